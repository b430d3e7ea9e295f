"""passes/index_ranges.py: the interval of an index expression, what safe_memory.py
leaves a guard out on. Its claims are checked against every value the expressions take."""
import ast
import itertools
import random

import pytest

import tilejit.language as T
from tilejit.frontend.rewrite import shape_constant_name
from tilejit.passes.index_ranges import IndexRanges


class _Ctx:
    def __init__(self, **globals_):
        self.namespace = {"T": T, **globals_}
        self.param_dtypes = {}


def _ranges(source, **globals_):
    return IndexRanges(ast.parse(source).body[0], _Ctx(**globals_))


def _of(ranges, text):
    return ranges.of(ast.parse(text, mode="eval").body)


def test_what_is_known_and_what_is_not():
    ranges = _ranges(
        "def main(A, n):\n"
        "    bx = __tj_block_index(0, 8)\n"
        "    by = __tj_block_index(1)\n"
        "    for i, j in T.Parallel(bm, 16):\n"
        "        r = bx * bm + i\n"
        "    for k in T.serial(2, 10):\n"
        "        pass\n"
        "    for k in range(4):\n"
        "        pass\n"
        "    for m in T.serial(n):\n"
        "        pass\n"
        "    for s in T.serial(0, 8, 2):\n"
        "        pass\n"
        "    q = 1\n"
        "    q += 1\n"
        "    t, u = n, 2\n",
        bm=32, **{shape_constant_name("A", 0): 100})
    assert _of(ranges, "bx") == (0, 7)
    assert _of(ranges, "by") is None                 # a grid known only at the launch
    assert _of(ranges, "r") == (0, 255) and _of(ranges, "j") == (0, 15)
    assert _of(ranges, "k") == (0, 9)                # the union of its two loops
    for name in ("m", "s", "q", "t", "n", "A"):      # run-time, stepped, rebound, unpacked
        assert _of(ranges, name) is None, name
    assert _of(ranges, "(r + 3) // 4") == (0, 64) and _of(ranges, "r % 7") == (0, 6)
    assert _of(ranges, "(r - 3) // 4") is None and _of(ranges, "(r - 3) % 4") is None
    assert _of(ranges, "-j") == (-15, 0) and _of(ranges, "i * j") == (0, 31 * 15)
    assert _of(ranges, "__tj_shape_A_0 - 1") == (99, 99)
    assert _of(ranges, "r * 100000000") is None      # past int32: it could wrap


def test_a_pipelined_loop_variable_has_its_range():
    ranges = _ranges(
        "def main(A, n):\n"
        "    for k in T.Pipelined(16, num_stages=3):\n"
        "        pass\n"
        "    for k2 in T.Pipelined(2, 10, num_stages=2, order=[0, 1]):\n"
        "        pass\n"
        "    for k3 in T.Pipelined(0, stop=n):\n"
        "        pass\n"
        "    for k4 in T.Pipelined(0, stop=8):\n"
        "        pass\n"
        "    for k5 in T.Pipelined(n, num_stages=2):\n"
        "        pass\n")
    assert _of(ranges, "k * 64") == (0, 960) and _of(ranges, "k2") == (2, 9)
    for name in ("k3", "k4", "k5"):      # a bound by keyword, a run-time bound
        assert _of(ranges, name) is None, name


def test_a_parameter_has_no_range():
    """A scalar parameter hides a global of its name, and a later loop variable of its
    name does not give it the loop's range (both found by review)."""
    ranges = _ranges(
        "def main(A, off, k):\n"
        "    for i in T.Parallel(64):\n"
        "        pass\n"
        "    for k in T.serial(1):\n"
        "        pass\n", off=0)
    assert _of(ranges, "off + i") is None and _of(ranges, "i + k") is None
    assert _of(ranges, "k") is None


def _expression(rng, names, depth):
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(names + [str(rng.randint(-5, 40))])
    op = rng.choice(["+", "-", "*", "//", "%", "neg"])
    if op == "neg":
        return f"(-{_expression(rng, names, depth - 1)})"
    right = str(rng.randint(1, 9)) if op in ("//", "%") else _expression(rng, names,
                                                                          depth - 1)
    return f"({_expression(rng, names, depth - 1)} {op} {right})"


@pytest.mark.parametrize("seed", range(4))
def test_every_value_lies_in_the_claimed_interval(seed):
    """Random expressions of loop variables and block indices: wherever a range is
    claimed, every combination of the names' values gives a value inside it."""
    rng = random.Random(seed)
    extents = {"bx": rng.randint(1, 6), "i": rng.randint(1, 5), "j": rng.randint(1, 4)}
    source = ("def main():\n"
              f"    bx = __tj_block_index(0, {extents['bx']})\n"
              f"    for i, j in T.Parallel({extents['i']}, {extents['j']}):\n"
              "        pass\n")
    ranges = _ranges(source)
    claimed = 0
    for _ in range(300):
        text = _expression(rng, list(extents), 4)
        found = _of(ranges, text)
        if found is None:
            continue
        claimed += 1
        for values in itertools.product(*(range(n) for n in extents.values())):
            value = eval(text, dict(zip(extents, values)))
            assert found[0] <= value <= found[1], (text, values, value, found)
    assert claimed > 50
