"""The compile-time measures of issue 24 leave what is compiled alone
(``benchmarks/profile_compile.py`` measures them; ``benchmarks/ptx_fingerprints.py``
checks every kernel's PTX): constant index arithmetic folded as LLVM folds it, the
globals Numba's typeof() cannot type looked up first, and code generation with
CodeGenPrepare's huge-function walk giving the PTX of its default walk."""
import builtins
import gc
import math
import random
import re

import llvmlite.binding as ll
import numpy as np
import pytest
from llvmlite import ir
from numba.core.typing.typeof import typeof

from tilejit.codegen import nvptx
from tilejit.codegen.lowering.tiles import _fold_i32, emit
from tilejit.codegen.typing.context import _typed_as_global
from tilejit.ir.addressing import BinOp, Const, Var
from tilejit.target import Target

I32 = ir.IntType(32)
OPS = {"add": "add", "mul": "mul", "div": "udiv", "mod": "urem", "xor": "xor", "and": "and",
       "shr": "lshr"}


def _llvm_folds(cases):
    """What LLVM's instcombine makes of ``op i32 a, b`` for each (op, a, b)."""
    lines = []
    for k, (op, a, b) in enumerate(cases):
        if op == "lt":
            body = f"%c = icmp ult i32 {a}, {b}\n  %r = zext i1 %c to i32"
        else:
            body = f"%r = {OPS[op]} i32 {a}, {b}"
        lines.append(f"define i32 @f{k}() {{\n  {body}\n  ret i32 %r\n}}")
    module = ll.parse_assembly("\n".join(lines))
    tm = nvptx.target_machine(Target.cuda("sm_80"))
    pb = ll.create_pass_builder(tm, ll.create_pipeline_tuning_options(0))
    mpm = ll.create_new_module_pass_manager()
    mpm.add_instruction_combine_pass()
    mpm.run(module, pb)
    return [int(re.search(r"ret i32 (-?\d+)", str(fn)).group(1)) for fn in module.functions]


def test_folded_index_arithmetic_is_llvms():
    rng = random.Random(0)
    values = [0, 1, 2, 3, 7, 8, 31, 32, 64, 127, 128, 1000, 2 ** 31 - 1, -1, -2 ** 31]
    cases = []
    for op in list(OPS) + ["lt"]:
        for _ in range(24):
            a, b = rng.choice(values), rng.choice(values)
            if op in ("div", "mod") and b == 0 or op == "shr" and not 0 <= b < 32:
                continue
            cases.append((op, a, b))
    assert [_fold_i32(op, a, b) for op, a, b in cases] == _llvm_folds(cases)
    # what LLVM would not fold stays an instruction
    assert _fold_i32("div", 5, 0) is None and _fold_i32("mod", 5, 0) is None
    assert _fold_i32("shr", 5, 32) is None


def test_emit_folds_constants_only():
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I32]), "f")
    builder = ir.IRBuilder(fn.append_basic_block())
    t, s = Var("t"), Var("s")
    expr = BinOp("add", BinOp("mul", BinOp("mod", BinOp("div", s, Const(2)), Const(2)),
                              Const(8)), BinOp("mod", t, Const(4)))
    folded = emit(builder, BinOp("mul", BinOp("mod", s, Const(4)), Const(8)), {"s": 7})
    assert isinstance(folded, ir.Constant) and folded.constant == 24
    assert len(builder.block.instructions) == 0
    value = emit(builder, expr, {"t": fn.args[0], "s": 3})
    assert [i.opname for i in builder.block.instructions] == ["urem", "add"]
    assert value is builder.block.instructions[-1]


def test_globals_typed_first_are_those_typeof_cannot_type():
    import operator
    candidates = [getattr(builtins, n) for n in dir(builtins)] + [
        math.exp, math.sqrt, operator.add, np.float32, np, math, random.random, gc.collect]
    checked = 0
    for value in candidates:
        if _typed_as_global(value):
            checked += 1
            with pytest.raises(ValueError):
                typeof(value)
    assert checked > 50
    assert not _typed_as_global(np.float32)      # typeof knows numpy scalar classes
    assert not _typed_as_global(ValueError)      # and exception classes


def test_codegen_walk_gives_the_default_walks_ptx():
    """emit_ptx (CodeGenPrepare walking the kernel as a huge function) and LLVM's
    default walk give the same PTX (FlashAttention: 60 % of its code generation was
    the default walk's restarts)."""
    from ptx_examples import all_examples, example_arguments
    name, kernel, specs, constexprs, _ = next(e for e in all_examples()
                                              if "flash_attn" in e[0])
    target = Target.cuda("sm_90a")
    text = kernel.compile(*example_arguments(specs), target="cuda", arch="sm_90a",
                          **constexprs).llvm_ir
    ours = nvptx.emit_ptx(ll.parse_assembly(text), target)
    default = nvptx.target_machine(target).emit_assembly(ll.parse_assembly(text))
    assert ours == default


def test_numba_inliners_run_only_where_something_may_be_inlined():
    """Numba's ``inline_inlinables`` and ``inline_overloads`` passes are skipped for IR
    that cannot reach a function jitted or overloaded with ``inline=``: a kernel's
    compile then never imports Numba's inliner (15–20 ms of a fresh process)."""
    import numba
    from numba.core.compiler import run_frontend

    from tilejit.codegen.numba_pipeline import _inlinables, _inline_template

    @numba.njit(inline="always")
    def helper(x):
        return x + 1

    @numba.njit
    def plain(x):
        return x + 1

    def calls_inline(x):
        return helper(x)

    def calls_plain(x):
        return plain(x) + math.floor(x)

    assert _inlinables(run_frontend(calls_inline))
    assert not _inlinables(run_frontend(calls_plain))

    from numba.core.cpu import InlineOptions

    class Template:
        _inline = InlineOptions("always")
        _inline_overloads = {(numba.types.int64,): {}}

    class Never(Template):
        _inline = InlineOptions("never")

    class Untyped(Template):
        _inline_overloads = {}
    assert _inline_template(Template)
    assert not _inline_template(Never) and not _inline_template(Untyped)
    assert not _inline_template(object())


def test_a_kernel_compile_does_not_import_numbas_inliner(tmp_path):
    import subprocess
    import sys
    code = (
        "import sys, numpy as np, tilejit, tilejit.language as T\n"
        "@tilejit.kernel\n"
        "def add(A, B, block: T.constexpr = 256):\n"
        "    with T.Kernel(T.ceildiv(A.shape[0], block), threads=block) as bx:\n"
        "        for i in T.Parallel(block):\n"
        "            B[bx * block + i] = A[bx * block + i] + 1\n"
        "a = np.zeros(1024, np.float32)\n"
        "add.compile(a, a.copy(), target='cuda', arch='sm_90a')\n"
        "print('numba.core.inline_closurecall' in sys.modules)\n")
    path = tmp_path / "kernel.py"
    path.write_text(code)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                         env={**__import__("os").environ, "TILEJIT_DISABLE_CACHE": "1"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
