"""``emit``'s reuse of index arithmetic (issue 24, compile time): a subexpression object
read twice in one expression (a swizzled offset reads its unswizzled offset twice) is
emitted once, and a ``SlotMemo`` emits the part of a fragment slot's coordinates that does
not read the slot once for all the slots of a run. The values are those of
``addressing.evaluate`` at every (thread, slot); only the number of instructions drops."""
import re

import numpy as np
from llvmlite import ir

import tilejit
import tilejit.language as T

from tilejit.codegen.lowering.tiles import SlotMemo, emit, fragment_slot
from tilejit.ir.addressing import BinOp, Const, Var, evaluate

I32 = ir.IntType(32)
MASK = (1 << 32) - 1
TV, S = Var("t"), Var("s")


def _function():
    module = ir.Module("slot_memo")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I32]), "f")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    return fn, builder


def _run(value, t: int, memo: dict) -> int:
    """The emitted i32 ``value`` with the function's argument = t (a tiny interpreter of
    the instructions ``emit`` builds)."""
    if isinstance(value, ir.Constant):
        return value.constant & MASK
    if isinstance(value, ir.Argument):
        return t & MASK
    if id(value) in memo:
        return memo[id(value)]
    ops = [_run(v, t, memo) for v in value.operands]
    op = value.opname
    if op == "add":
        r = ops[0] + ops[1]
    elif op == "mul":
        r = ops[0] * ops[1]
    elif op == "udiv":
        r = ops[0] // ops[1]
    elif op == "urem":
        r = ops[0] % ops[1]
    elif op == "xor":
        r = ops[0] ^ ops[1]
    elif op == "and":
        r = ops[0] & ops[1]
    elif op == "lshr":
        r = ops[0] >> ops[1]
    elif op == "zext":
        r = ops[0]
    elif op == "icmp":
        assert value.op in ("ult", "ne"), value.op
        r = int(ops[0] < ops[1]) if value.op == "ult" else int(ops[0] != ops[1])
    else:
        raise AssertionError(op)
    memo[id(value)] = r & MASK
    return memo[id(value)]


class _Indexing:
    """A fragment's indexing as ``fragment_slot`` reads it: an mma-accumulator-like
    thread/slot split and, through shared memory, a 128-byte swizzle of the offset."""

    def __init__(self, valid=None):
        row = (TV // 4) % 8 + (S // 2) % 2 * 8 + TV // 32 * 16
        col = TV % 4 * 2 + S % 2 + S // 4 * 8
        inner = row * 64 + col
        self.coords = (row, col, inner ^ ((inner & Const(448)) >> Const(3)))
        self.valid = valid
        self.slots = 32


def _instructions(fn) -> int:
    return sum(len(b.instructions) for b in fn.blocks)


def test_slot_memo_keeps_the_values_and_emits_the_thread_part_once():
    for valid in (None, BinOp("lt", TV % 64 + S * 2, Const(70))):
        ix = _Indexing(valid)
        results = {}
        counts = {}
        for use_memo in (False, True):
            fn, builder = _function()
            tid = fn.args[0]
            memo = SlotMemo() if use_memo else None
            results[use_memo] = [fragment_slot(builder, ix, tid, s, memo=memo)
                                 for s in range(ix.slots)]
            counts[use_memo] = _instructions(fn)
        assert counts[True] < counts[False] // 2
        for t in (0, 1, 5, 31, 32, 77, 127):
            for use_memo in (False, True):
                memo = {}
                for s, (coords, guard) in enumerate(results[use_memo]):
                    env = {"t": t, "s": s}
                    assert [_run(c, t, memo) for c in coords] == \
                        [evaluate(c, env) & MASK for c in ix.coords]
                    if valid is None:
                        assert guard is None
                    else:
                        assert _run(guard, t, memo) == int(evaluate(valid, env) != 0)


def test_a_subexpression_read_twice_is_emitted_once():
    fn, builder = _function()
    inner = (TV // 8) * 64 + TV % 8
    offset = inner ^ ((inner & Const(448)) >> Const(3))
    value = emit(builder, offset, {"t": fn.args[0]})
    # inner: udiv, mul, urem, add; then and, lshr, xor (inner not emitted again)
    assert _instructions(fn) == 7
    for t in range(0, 4096, 37):
        assert _run(value, t, {}) == evaluate(offset, {"t": t}) & MASK


def test_a_memo_does_not_reuse_another_slots_values():
    fn, builder = _function()
    memo = SlotMemo()
    expr = (TV + S) * (TV + S)          # reads s: emitted anew at each slot
    values = [memo.emit(builder, expr, {"t": fn.args[0], "s": s}) for s in range(3)]
    assert len({id(v) for v in values}) == 3
    for t in (0, 3, 100):
        assert [_run(v, t, {}) for v in values] == [(t + s) ** 2 for s in range(3)]


def test_adding_0_and_multiplying_by_1_emit_nothing():
    fn, builder = _function()
    t = fn.args[0]
    for expr in (BinOp("add", TV, Const(0)), BinOp("add", Const(0), TV),
                 BinOp("mul", TV, Const(1)), BinOp("mul", Const(1), TV)):
        assert emit(builder, expr, {"t": t}) is t
    assert _instructions(fn) == 0
    # 0 * t and t + 1 are instructions (LLVM folds the first; ``emit`` leaves it to LLVM)
    emit(builder, BinOp("mul", Const(0), TV), {"t": t})
    emit(builder, BinOp("add", TV, Const(1)), {"t": t})
    assert _instructions(fn) == 2


def _lowered_ir(monkeypatch, compile_it) -> str:
    from tilejit.codegen import nvptx
    captured = []
    link_and_optimize = nvptx.link_and_optimize

    def capture(texts, *args, **kwargs):
        captured.extend(texts)
        return link_and_optimize(texts, *args, **kwargs)
    monkeypatch.setattr(nvptx, "link_and_optimize", capture)
    compile_it()
    return "\n".join(captured)


@tilejit.kernel
def through_fragment(A, B, bm: T.constexpr = 16):
    M, N = A.shape
    with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
        F = T.alloc_fragment((bm, 64), A.dtype)
        T.copy(A[bx * bm, 0], F)
        T.copy(F, B[bx * bm, 0])


def test_a_global_copy_reads_the_tensor_struct_once(monkeypatch):
    """``copy.describe`` reads a global tensor's shape and strides once where the copy
    begins: their loads do not grow with the elements a thread copies (they were a load
    and an extractvalue per dimension at every bounds check and address)."""
    a = np.zeros((100, 64), np.float32)
    loads = []
    for bm in (16, 64):
        text = _lowered_ir(monkeypatch, lambda bm=bm: through_fragment.compile(
            a, a.copy(), target="cuda", arch="sm_80", bm=bm))
        loads.append(len(re.findall(r"= load \[2 x i64\]", text)))
    assert loads[0] == loads[1] <= 8, loads
