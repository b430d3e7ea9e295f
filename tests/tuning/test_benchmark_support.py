"""The timing helper the benchmarks share: rounds interleave the variants in the orders
of a Williams design, so that no variant always follows the same neighbour."""
import collections
import os
import sys

import pytest

from tilejit.tuning.bench import interleaved_times, round_orders

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "experiments"))


def test_interleaved_times_runs_every_variant_once_per_round_rotating():
    calls = []

    def timer(fn, rep=1):
        calls.append(fn())
        return float(len(calls) * rep)

    variants = [("a", lambda: "a", "extra"), ("b", lambda: "b", "extra")]
    times = interleaved_times(variants, rounds=3, timer=timer, warm_round=False, rep=2)
    assert calls == ["a", "b", "b", "a", "b", "a"]
    assert times == {"a": [2.0, 8.0, 12.0], "b": [4.0, 6.0, 10.0]}


def test_interleaved_times_has_a_round_per_variant_at_least():
    """With more variants than rounds every variant still comes first once: none
    always follows the same neighbour."""
    calls = []
    variants = [(name, lambda name=name: name) for name in "abcd"]
    times = interleaved_times(variants, rounds=2, timer=lambda fn: calls.append(fn()) or 1.0,
                              warm_round=False)
    assert [calls[4 * r] for r in range(4)] == ["a", "b", "c", "d"]
    assert all(len(v) == 4 for v in times.values())


def test_a_warm_round_is_run_and_not_reported():
    """The first variant timed after the device sat idle runs at clocks no later one
    sees: one untimed round of every variant comes first."""
    calls = []

    def timer(fn):
        calls.append(fn())
        return float(len(calls))

    times = interleaved_times([("a", lambda: "a"), ("b", lambda: "b")], rounds=2, timer=timer)
    assert calls == ["a", "b", "a", "b", "b", "a"]
    assert times == {"a": [3.0, 6.0], "b": [4.0, 5.0]}


def test_interleaved_times_of_no_variants_is_empty():
    """A benchmark whose every variant failed to run times nothing (no division by 0)."""
    assert interleaved_times([], rounds=3, timer=lambda fn: 1.0) == {}


@pytest.mark.parametrize("n", range(2, 9))
def test_round_orders_balance_who_follows_whom(n):
    """Over n rounds (even n) or 2n (odd n) every variant comes first equally often and
    follows every other variant equally often (a Williams design)."""
    rounds = n if n % 2 == 0 else 2 * n
    orders = round_orders(n, rounds)
    assert all(sorted(order) == list(range(n)) for order in orders)
    firsts = collections.Counter(order[0] for order in orders)
    assert set(firsts.values()) == {rounds // n}
    follows = collections.Counter((o[i], o[i + 1]) for o in orders for i in range(n - 1))
    assert len(follows) == n * (n - 1) and set(follows.values()) == {rounds // n}


def test_a_fixed_neighbour_does_not_repeat_in_every_round():
    """The bias it removes: with 6 variants (run.py attention) the third variant followed
    the second in 5 of 6 rounds when the rounds only rotated."""
    orders = round_orders(6, 6)
    after_second = sum(o[o.index(2) - 1] == 1 for o in orders if o.index(2) > 0)
    assert after_second <= 1


def test_environment_restores_what_was_there(monkeypatch):
    """An experiment switch is set only while its variant compiles: a new key goes away
    after the block, a changed one gets its old value back, even when the block raises."""
    import os

    from experiment_support import environment
    monkeypatch.setenv("TJ_TEST_KEEP", "old")
    monkeypatch.delenv("TJ_TEST_NEW", raising=False)
    with pytest.raises(RuntimeError):
        with environment({"TJ_TEST_KEEP": "new", "TJ_TEST_NEW": "1"}):
            assert os.environ["TJ_TEST_KEEP"] == "new" and os.environ["TJ_TEST_NEW"] == "1"
            raise RuntimeError
    assert os.environ["TJ_TEST_KEEP"] == "old" and "TJ_TEST_NEW" not in os.environ


def test_write_results_records_the_commit_the_gpu_and_the_rows(tmp_path, monkeypatch):
    import json

    from experiment_support import write_results
    monkeypatch.setenv("TILEJIT_COMMIT", "abc1234+variant")
    path = tmp_path / "r.json"
    write_results(str(path), [{"name": "base", "ms": 1.5}], config={"block_M": 128})
    data = json.loads(path.read_text())
    assert data["rows"] == [{"name": "base", "ms": 1.5}]
    assert data["meta"]["commit"] == "abc1234+variant"
    assert data["meta"]["config"] == {"block_M": 128}
    assert isinstance(data["meta"]["gpu"], str) and data["meta"]["gpu"]
