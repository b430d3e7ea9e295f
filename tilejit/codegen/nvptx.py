"""LLVM IR → PTX for one kernel specialization.

The typed, lowered Numba function takes tensors as structs; the ``ptx_kernel`` entry
built here takes them as flat parameters (data pointer, shape…, strides…), rebuilds
the structs, and calls it. All modules are linked into one, every function but the
entry is internalized, the optimization pipeline of the NVPTX target machine runs, and
the target machine prints PTX.
"""
from __future__ import annotations

import re

import llvmlite.binding as ll
from llvmlite import ir
from numba.core.compiler_lock import global_compiler_lock

from tilejit.codegen.entry import entry_module
from tilejit.codegen.entry import poison_shared as fill_shared
from tilejit.target import Target
from tilejit.codegen.numba_target import TRIPLE

_MACHINES: dict[Target, ll.TargetMachine] = {}


def target_machine(target: Target) -> ll.TargetMachine:
    """LLVM's NVPTX machine for the target's arch and PTX ISA version (Target.ptx_features)."""
    tm = _MACHINES.get(target)
    if tm is None:
        llvm_target = ll.Target.from_triple(TRIPLE)
        tm = llvm_target.create_target_machine(cpu=target.arch, features=target.ptx_features,
                                               opt=3)
        _MACHINES[target] = tm
    return tm


def build_entry(context, fndesc, argtypes, name: str, threads: int,
                min_blocks_per_sm: int | None = None, shape_constants=None,
                poison_bytes: int = 0, aliased=frozenset()) -> str:
    """The ``ptx_kernel`` entry as LLVM IR text (``entry.entry_module``), with its launch
    bounds and the tensor maps passed by value; ``poison_bytes`` of shared memory filled
    with all-ones bits first (``poison_shared``: ``debug=True`` kernels)."""
    prologue = (lambda b: poison_shared(b, poison_bytes, threads)) if poison_bytes else None
    text = entry_module(context, fndesc, argtypes, name, "ptx_kernel", shape_constants,
                        prologue, aliased)
    # launch bounds: the block size is exact, which lets ptxas budget registers; with
    # min_blocks_per_sm, .minnctapersm makes it fit that many blocks per SM
    text = re.sub(rf'(define ptx_kernel void @"{re.escape(name)}"\([^\n]*\))',
                  r"\1 #900", text, count=1)
    bounds = f'"nvvm.maxntid"="{threads}"'
    if min_blocks_per_sm:
        bounds += f' "nvvm.minctasm"="{min_blocks_per_sm}"'
    text += f'\nattributes #900 = {{ {bounds} }}\n'
    # a TMA tensor map (passes/tma.py) is 128 bytes passed by value and read in place:
    # `.param .align 64 .b8 [128]`, addressed through cvta.param (no local copy)
    head, _, rest = text.partition("define ptx_kernel")
    line, _, rest = rest.partition("\n")
    line = re.sub(r'(?:ptr|i8\*) (%"?tjmap\d+"?)',
                  r'ptr byval([128 x i8]) align 64 "nvvm.grid_constant" \1', line)
    return f"{head}define ptx_kernel{line}\n{rest}"


def poison_shared(builder, nbytes: int, threads: int) -> None:
    """``entry.poison_shared`` with %tid.x and ``bar.sync 0``."""
    def barrier(b):
        b.call(b.module.declare_intrinsic("llvm.nvvm.barrier0", (),
                                          ir.FunctionType(ir.VoidType(), [])), [])
    fill_shared(builder, nbytes, threads, "llvm.nvvm.read.ptx.sreg.tid.x", barrier)


_FDIV_F32 = re.compile(r"= fdiv ((?:[a-z]+ )*)float ")


def approximate_division(ir_text: str) -> str:
    """``fast_math``: float (not double) division may be the hardware's approximation:
    the ``afn`` flag, which NVPTX lowers to ``div.approx.f32`` (2 ulp for divisors in
    [2^-126, 2^126]), as CUDA's ``--use_fast_math`` does."""
    return _FDIV_F32.sub(lambda m: f"= fdiv afn {m.group(1)}float ", ir_text)


_FP_ARITH = re.compile(r"= (fmul|fadd|fsub) ((?:[a-z]+ )*)(float|double|<\d+ x (?:float|double)>) "
                       r"(?![^\n]*!tilejit\.exact)")


def contract_multiply_add(ir_text: str) -> str:
    """A product feeding an addition may become one ``fma`` (rounded once): the
    ``contract`` flag on float and double multiplies, adds and subtracts, which is
    what CUDA compilers do by default (nvcc's ``--fmad=true``). The math routines'
    own operations carry ``!tilejit.exact`` and keep rounding one by one (their error
    analysis assumes it; where they want a fused product they call ``llvm.fma``)."""
    return _FP_ARITH.sub(lambda m: f"= {m.group(1)} contract {m.group(2)}{m.group(3)} "
                         if "contract" not in m.group(2) else m.group(0), ir_text)


def link_and_optimize(ir_texts: list[str], entry_name: str, target: Target,
                      fast_math: bool = False) -> ll.ModuleRef:
    tm = target_machine(target)
    main = None
    for text in ir_texts:
        text = contract_multiply_add(text)
        mod = ll.parse_assembly(approximate_division(text) if fast_math else text)
        if main is None:
            main = mod
        else:
            main.link_in(mod)
    main.triple = TRIPLE
    main.data_layout = str(tm.target_data)
    for fn in main.functions:
        if fn.name != entry_name and not fn.is_declaration:
            fn.linkage = ll.Linkage.internal
    for gv in main.global_variables:
        if not gv.is_declaration:
            gv.linkage = ll.Linkage.internal
    main.verify()
    pb = ll.create_pass_builder(tm, ll.create_pipeline_tuning_options(3))
    pb.getModulePassManager().run(main, pb)
    return main


# CodeGenPrepare, the first pass of LLVM's code generation, restarts its walk over the
# function's blocks from the first one each time one of its rewrites changes the
# dominator tree (or an instruction's place in it), unless the function has at least
# ``-cgpp-huge-func`` blocks (default 10000): then it re-optimizes only the block it
# changed and walks on. A kernel is one function of a few hundred blocks, walked again
# from the top after every such rewrite: that was 60 % of code generation (FlashAttention
# 128x64 on sm_90a: 355 ms of emit_assembly, 145 ms with the huge-function walk, perf on
# the CPU machine). The two walks reach the same result here: the PTX of every kernel of
# benchmarks/ptx_fingerprints.py is byte-identical. The threshold is a global option of
# LLVM, so it is lowered only while our code generation runs (under Numba's compiler
# lock, which Numba's own compilations take) and restored after.
_CGP_HUGE_FUNCTION = "-cgpp-huge-func"
_CGP_HUGE_FUNCTION_DEFAULT = 10000     # LLVM's cl::init


def emit_ptx(module: ll.ModuleRef, target: Target) -> str:
    tm = target_machine(target)
    with global_compiler_lock:
        ll.set_option("tilejit", f"{_CGP_HUGE_FUNCTION}=0")
        try:
            return tm.emit_assembly(module)
        finally:
            ll.set_option("tilejit", f"{_CGP_HUGE_FUNCTION}={_CGP_HUGE_FUNCTION_DEFAULT}")
