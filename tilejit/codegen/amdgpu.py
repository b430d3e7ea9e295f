"""LLVM IR → an AMDGPU code object (HSA, ``amdgcn-amd-amdhsa``) for one kernel
specialization, without ROCm: llvmlite's AMDGPU back end writes the assembly and the
relocatable object, and the LLD of the ``ziglang`` wheel links the object into the shared
object HIP's ``hipModuleLoadData`` takes (``ld.lld -shared``).

Numba lowers the kernel as for NVPTX (generic 64-bit pointers, allocas in address
space 0). AMDGPU's stack is address space 5 (its data layout's ``A5``; the verifier of an
amdgcn module insists), so the lowered modules are linked without a triple under the same
layout without ``A5``, every alloca is then moved to address space 5 behind an
``addrspacecast``, and only then does the module become amdgcn and run the AMDGPU
pipeline (SROA makes the fragments registers; ``InferAddressSpaces`` turns the flat
accesses into global, LDS and scratch ones).

The entry is an ``amdgpu_kernel`` taking the same flat parameters as the ``ptx_kernel``
(``nvptx.kernel_parameters``), with ``amdgpu-flat-work-group-size`` set to the block.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

import llvmlite.binding as ll

from tilejit.codegen.entry import entry_module, poison_shared
from tilejit.codegen.lowering.tiles import workgroup_barrier
from tilejit.codegen.nvptx import contract_multiply_add
from tilejit.errors import CompileError
from tilejit.target import Target

TRIPLE = "amdgcn-amd-amdhsa"
_MACHINES: dict[Target, ll.TargetMachine] = {}


def target_machine(target: Target) -> ll.TargetMachine:
    tm = _MACHINES.get(target)
    if tm is None:
        tm = ll.Target.from_triple(TRIPLE).create_target_machine(cpu=target.arch, opt=3)
        _MACHINES[target] = tm
    return tm


def lowering_data_layout(target: Target) -> str:
    """The AMDGPU data layout without its alloca and global address spaces (A5, G1):
    what Numba's allocas (address space 0) may be lowered and optimized under."""
    parts = str(target_machine(target).target_data).split("-")
    return "-".join(p for p in parts if p not in ("A5", "G1"))


def build_entry(context, fndesc, argtypes, name: str, threads: int,
                shape_constants=None, poison_bytes: int = 0, aliased=frozenset()) -> str:
    """The ``amdgpu_kernel`` entry as LLVM IR text (``entry.entry_module``), with its
    work-group size; ``poison_bytes`` of LDS filled with all-ones bits first
    (``debug=True`` kernels, as on CUDA)."""
    prologue = (lambda b: poison_lds(b, poison_bytes, threads)) if poison_bytes else None
    text = entry_module(context, fndesc, argtypes, name, "amdgpu_kernel", shape_constants,
                        prologue, aliased)
    text = re.sub(rf'(define amdgpu_kernel void @"?{re.escape(name)}"?\([^\n]*\))',
                  r"\1 #901", text, count=1)
    return text + (f'\nattributes #901 = {{ "amdgpu-flat-work-group-size"="1,{threads}" '
                   f'"uniform-work-group-size"="true" }}\n')


def poison_lds(builder, nbytes: int, threads: int) -> None:
    """``entry.poison_shared`` with the work-item id and the tile program's block
    barrier (``lowering/tiles.workgroup_barrier``)."""
    poison_shared(builder, nbytes, threads, "llvm.amdgcn.workitem.id.x", workgroup_barrier)


_ALLOCA = re.compile(r'^(\s*)(%"[^"]+"|%[\w.$-]+) = alloca (.*?)(, align \d+)?$', re.M)


def _allocas_to_private(text: str) -> str:
    """Every ``%x = alloca T`` → an alloca in address space 5 and a cast back to a flat
    pointer (what the rest of the function uses)."""
    def move(m):
        indent, name, ty, align = m.group(1), m.group(2), m.group(3), m.group(4) or ""
        private = name[:-1] + '.p5"' if name.endswith('"') else name + ".p5"
        return (f"{indent}{private} = alloca {ty}{align}, addrspace(5)\n"
                f"{indent}{name} = addrspacecast ptr addrspace(5) {private} to ptr")
    return _ALLOCA.sub(move, text)


# what a kernel used that only the CUDA lowering has yet, by the intrinsic it left
_FEATURES = (("llvm.nvvm.shfl", "reductions across the threads of a warp (T.reduce_*, "
                                "T.cumsum on fragments)"),
             ("llvm.nvvm.cp.async", "asynchronous copies"),
             ("llvm.nvvm.ldmatrix", "ldmatrix"),
             ("llvm.nvvm.mma", "tensor-core MMA"),
             ("llvm.nvvm.atomic", "atomics"),
             ("llvm.nvvm.", "a CUDA intrinsic"))


def _refuse_nvptx_only(module: ll.ModuleRef, entry_name: str, target: Target) -> None:
    """A CompileError naming what the kernel uses that has no AMDGPU lowering yet (a CUDA
    intrinsic or PTX inline assembly), instead of LLVM aborting the process."""
    used = sorted({fn.name for fn in module.functions
                   if fn.is_declaration and fn.name.startswith("llvm.nvvm.")})
    text = str(module)
    has_asm = " asm " in text or "asm sideeffect" in text
    if not used and not has_asm:
        return
    what = []
    for prefix, feature in _FEATURES:
        if any(u.startswith(prefix) for u in used) and feature not in what:
            what.append(feature)
            used = [u for u in used if not u.startswith(prefix)]
    if has_asm:
        what.append("PTX inline assembly (TMA, mbarriers, printing, math approximations)")
    raise CompileError(f"{entry_name}: not lowered for AMDGPU ({target.arch}) yet: "
                       f"{'; '.join(what)}. AMDGPU compiles elementwise kernels, copies, "
                       f"reductions and T.gemm (MFMA) today; run this kernel in the simulator "
                       f"or on CUDA")


def _optimize(module: ll.ModuleRef, tm: ll.TargetMachine) -> None:
    pb = ll.create_pass_builder(tm, ll.create_pipeline_tuning_options(3))
    pb.getModulePassManager().run(module, pb)


def link_and_optimize(ir_texts: list[str], entry_name: str, target: Target) -> ll.ModuleRef:
    tm = target_machine(target)
    neutral = lowering_data_layout(target)
    main = None
    for text in ir_texts:
        mod = ll.parse_assembly(contract_multiply_add(text))
        mod.triple = ""             # amdgcn only once the allocas are in address space 5
        mod.data_layout = neutral
        if main is None:
            main = mod
        else:
            main.link_in(mod)
    _refuse_nvptx_only(main, entry_name, target)
    for fn in main.functions:
        if fn.name != entry_name and not fn.is_declaration:
            fn.linkage = ll.Linkage.internal
    for gv in main.global_variables:
        if not gv.is_declaration:
            gv.linkage = ll.Linkage.internal
    main.verify()
    final = ll.parse_assembly(_allocas_to_private(str(main)))
    final.triple = TRIPLE
    final.data_layout = str(tm.target_data)
    final.verify()
    _optimize(final, tm)
    return final


def emit_assembly(module: ll.ModuleRef, target: Target) -> str:
    # the AMDGPU code generator rewrites the IR it runs on (control-flow annotation):
    # each emission gets a copy
    return target_machine(target).emit_assembly(module.clone())


def code_object(module: ll.ModuleRef, target: Target) -> bytes:
    """The HSA code object (an ELF shared object): the object linked by ``ld.lld -shared``
    from the ``ziglang`` wheel."""
    obj = target_machine(target).emit_object(module.clone())
    with tempfile.TemporaryDirectory(prefix="tilejit-hsaco-") as tmp:
        src, out = os.path.join(tmp, "k.o"), os.path.join(tmp, "k.hsaco")
        with open(src, "wb") as f:
            f.write(obj)
        try:
            done = subprocess.run([sys.executable, "-m", "ziglang", "ld.lld", "-shared", src,
                                   "-o", out], capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise CompileError(f"AMDGPU: linking the code object failed: {e}") from None
        if done.returncode != 0:
            missing = "No module named ziglang" in done.stderr
            raise CompileError("AMDGPU: linking the code object needs LLD: pip install ziglang"
                               if missing else f"AMDGPU: ld.lld failed: {done.stderr.strip()}")
        with open(out, "rb") as f:
            return f.read()
