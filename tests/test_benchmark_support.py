"""The timing helper the benchmarks share: rounds interleave the variants, each round
starting one variant later."""
from tilejit.testing_support import interleaved_times


def test_interleaved_times_runs_every_variant_once_per_round_rotating():
    calls = []

    def timer(fn, rep=1):
        calls.append(fn())
        return float(len(calls) * rep)

    variants = [("a", lambda: "a", "extra"), ("b", lambda: "b", "extra")]
    times = interleaved_times(variants, rounds=3, timer=timer, rep=2)
    assert calls == ["a", "b", "b", "a", "a", "b"]
    assert times == {"a": [2.0, 8.0, 10.0], "b": [4.0, 6.0, 12.0]}


def test_interleaved_times_has_a_round_per_variant_at_least():
    """With more variants than rounds every variant still comes first once: none
    always follows the same neighbour."""
    calls = []
    variants = [(name, lambda name=name: name) for name in "abcd"]
    times = interleaved_times(variants, rounds=2, timer=lambda fn: calls.append(fn()) or 1.0)
    assert [calls[4 * r] for r in range(4)] == ["a", "b", "c", "d"]
    assert all(len(v) == 4 for v in times.values())


def test_interleaved_times_of_no_variants_is_empty():
    """A benchmark whose every variant failed to run times nothing (no division by 0)."""
    assert interleaved_times([], rounds=3, timer=lambda fn: 1.0) == {}
