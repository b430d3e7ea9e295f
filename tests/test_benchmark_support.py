"""The timing helper the benchmarks share: rounds interleave the variants."""
from tilejit.testing_support import interleaved_times


def test_interleaved_times_runs_every_variant_once_per_round_in_order():
    calls = []

    def timer(fn, rep=1):
        calls.append(fn())
        return float(len(calls) * rep)

    variants = [("a", lambda: "a", "extra"), ("b", lambda: "b", "extra")]
    times = interleaved_times(variants, rounds=3, timer=timer, rep=2)
    assert calls == ["a", "b"] * 3
    assert times == {"a": [2.0, 6.0, 10.0], "b": [4.0, 8.0, 12.0]}
