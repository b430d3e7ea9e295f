"""Run a compiled kernel's LLVM IR on the host, one thread at a time, and record the
addresses of its ``cp.async`` and ``ldmatrix`` instructions — a developer tool for the
address arithmetic of the lowering (the simulator runs the tile program, not the IR).

Not a test and not run by CI (it needs a host C compiler and rewrites the IR's text).
The IR is made host code: address spaces dropped, the NVVM intrinsics replaced by stubs
(special registers read globals the driver sets; cp.async and ldmatrix call back into
Python with their operands; barriers, commits and waits do nothing; everything else
returns zero), the inline-asm adds and moves replaced by plain ones. Shared data is
garbage and threads do not interact, so only what depends on the thread, block and
arguments is meaningful: exactly the addresses and source sizes.

    python tests/support/ir_emulator.py          # the checks below, on this machine

The checks: every cp.async that reads (source size > 0) reads inside its tensor, for a
pipelined copy whose tiles start before the tensor and end past it, and for
FlashAttention with sequence tails (head dim 128 included: register-starved, its chunk
addresses come from the thread index read where used).
"""
from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
from llvmlite import binding as llvm

_RECORDS: list = []
_CALLBACK_T = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_int32,
                               ctypes.c_int32)


def _record(shared, glob, size, src_size):
    _RECORDS.append((shared, glob, size, src_size))


_CALLBACK = _CALLBACK_T(_record)

_STUBS = r'''
@emu_tid = global i32 0
@emu_ctaid_x = global i32 0
@emu_ctaid_y = global i32 0
@emu_ctaid_z = global i32 0
@emu_record = global ptr null
define void @emu_rec(i64 %a, i64 %b, i32 %c, i32 %d) {
 %f = load ptr, ptr @emu_record
 call void %f(i64 %a, i64 %b, i32 %c, i32 %d)
 ret void }
'''
for _reg, _var in (("tid.x", "emu_tid"), ("ctaid.x", "emu_ctaid_x"),
                   ("ctaid.y", "emu_ctaid_y"), ("ctaid.z", "emu_ctaid_z")):
    _STUBS += (f"define i32 @nv_read.ptx.sreg.{_reg}() {{ %v = load i32, ptr @{_var}\n"
               f" ret i32 %v }}\n")
for _kind in ("cg", "ca"):
    for _n in (4, 8, 16):
        _STUBS += (f"define void @nv_cp.async.{_kind}.shared.global.{_n}.s(ptr %s, ptr %g, "
                   f"i32 %b) {{\n %si = ptrtoint ptr %s to i64\n %gi = ptrtoint ptr %g to i64\n"
                   f" call void @emu_rec(i64 %si, i64 %gi, i32 {_n}, i32 %b)\n ret void }}\n")


def _stub(declaration: str) -> str:
    """A host definition for one ``declare ... @llvm.nvvm.NAME(...)``."""
    head, name, args = re.match(r"declare (.*?)@llvm\.nvvm\.([\w.]+)\((.*)\)",
                                declaration).groups()
    if f"@nv_{name}(" in _STUBS:
        return ""
    ret = re.sub(r"\b(noundef|range\([^)]*\)|signext|zeroext)\s*", "", head).strip()
    params = ", ".join(
        f"{re.sub(r'[ ]*(immarg|noundef|nocapture|readonly|writeonly|captures[(][^)]*[)])', '', a).strip()} %a{i}"  # noqa: E501
        for i, a in enumerate(x for x in args.split(",") if x.strip()))
    if name.startswith("ldmatrix"):
        return (f"define {ret} @nv_{name}({params}) {{\n %si = ptrtoint ptr %a0 to i64\n"
                f" call void @emu_rec(i64 %si, i64 0, i32 -1, i32 0)\n"
                f" ret {ret} zeroinitializer }}\n")
    if ret == "void":
        return f"define void @nv_{name}({params}) {{ ret void }}\n"
    if name.startswith("shfl"):
        return f"define {ret} @nv_{name}({params}) {{ ret {ret} %a1 }}\n"
    return f"define {ret} @nv_{name}({params}) {{ ret {ret} zeroinitializer }}\n"


def host_ir(text: str, shared_bytes: int) -> str:
    """The kernel's IR rewritten as host code (see the module docstring)."""
    body, declarations = [], []
    for line in text.splitlines():
        if line.startswith(("target ", "source_filename")):
            continue
        if line.startswith("declare") and "@llvm.nvvm." in line:
            declarations.append(re.sub(r"addrspace\(\d\) ", "", line))
            continue
        body.append(line)
    t = "\n".join(body)
    t = re.sub(r"@__tj_smem = external (?:local_unnamed_addr )?addrspace\(3\) global \[0 x i8\]",
               f"@__tj_smem = global [{max(shared_bytes, 16)} x i8] zeroinitializer", t)
    t = re.sub(r" addrspace\(\d+\)", "", t)
    t = re.sub(r"addrspacecast \((ptr [^ ]+) to ptr\)", r"bitcast (\1 to ptr)", t)
    t = re.sub(r"addrspacecast (ptr [^ ,]+) to ptr", r"bitcast \1 to ptr", t)
    t = t.replace("ptx_kernel ", "").replace("@llvm.nvvm.", "@nv_")
    t = re.sub(r'(?:tail )?call i64 asm "add\.s64 \$0, \$1, \$2;", "=l,l,l"\(i64 ([^,]+), '
               r'i64 ([^)]+)\)( #\d+)?', r"add i64 \1, \2", t)
    t = re.sub(r'(?:tail )?call (i64|i32) asm "mov\.b(?:64|32) \$0, \$1;", "=[lr],[lr]"\('
               r'(?:i64|i32) ([^)]+)\)( #\d+)?', r"add \1 \2, 0", t)
    # the thread index read where used (register-starved kernels: lowering/tiles.py)
    t = re.sub(r'(?:tail )?call i32 asm sideeffect "mov\.u32 \$0, %tid\.x;", "=r"\(\)'
               r'( #\d+)?', "load i32, ptr @emu_tid", t)
    left = set(re.findall(r'asm [a-z ]*"[^"]*"', t))
    if left:
        raise RuntimeError(f"ir_emulator: no host form for inline asm {left}")
    return t + "\n" + _STUBS + "".join(_stub(d) for d in declarations)


class Emulator:
    """One compiled kernel (``kernel.compile(..., target="cuda")``) as a host library."""

    def __init__(self, compiled, workdir: str | None = None):
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        text = host_ir(compiled.llvm_ir, compiled.shared_bytes)
        module = llvm.parse_assembly(text)
        module.verify()
        machine = llvm.Target.from_default_triple().create_target_machine(reloc="pic")
        module.triple = machine.triple
        folder = tempfile.mkdtemp(dir=workdir)
        with open(os.path.join(folder, "k.o"), "wb") as f:
            f.write(machine.emit_object(module))
        subprocess.check_call(["cc", "-shared", "-o", os.path.join(folder, "k.so"),
                               os.path.join(folder, "k.o")])
        self.lib = ctypes.CDLL(os.path.join(folder, "k.so"))
        self.shared = ctypes.addressof(ctypes.c_char.in_dll(self.lib, "__tj_smem"))
        name = compiled.compiled.name
        m = re.search(r'define void @"?' + re.escape(name) + r'"?\(', text)
        i, depth = m.end(), 1
        j = i
        while depth:
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        self.params = [p.strip().split()[0] for p in text[i:j - 1].split(",")]
        self.entry = ctypes.cast(getattr(self.lib, name), ctypes.c_void_p).value
        ctypes.c_void_p.in_dll(self.lib, "emu_record").value = ctypes.cast(
            _CALLBACK, ctypes.c_void_p).value
        self.registers = {k: ctypes.c_int32.in_dll(self.lib, k)
                          for k in ("emu_tid", "emu_ctaid_x", "emu_ctaid_y", "emu_ctaid_z")}

    def run(self, arrays, grid, threads):
        """{(bx, by, bz, t): [("cp", shared offset, size, source size, (array, byte offset)
        or None) | ("ldmatrix", shared offset)]} over the whole grid."""
        flat, spans = [], []
        for a in arrays:
            flat += [a.ctypes.data, *a.shape, *(s // a.itemsize for s in a.strides)]
            spans.append((a.ctypes.data, a.nbytes))
        if len(flat) != len(self.params):
            raise ValueError(f"ir_emulator: {len(flat)} arguments for parameters {self.params}")
        types = [ctypes.c_void_p if p == "ptr" else {"i64": ctypes.c_int64,
                                                      "i32": ctypes.c_int32}[p]
                 for p in self.params]
        fn = ctypes.CFUNCTYPE(None, *types)(self.entry)
        out = {}
        gx, gy, gz = (tuple(grid) + (1, 1))[:3]
        for bz in range(gz):
            for by in range(gy):
                for bx in range(gx):
                    for t in range(threads):
                        for k, v in zip(("emu_tid", "emu_ctaid_x", "emu_ctaid_y", "emu_ctaid_z"),
                                        (t, bx, by, bz)):
                            self.registers[k].value = v
                        _RECORDS.clear()
                        fn(*flat)
                        out[(bx, by, bz, t)] = [self._describe(r, spans) for r in _RECORDS]
        return out

    def _describe(self, record, spans):
        shared, glob, size, src_size = record
        if size == -1:
            return ("ldmatrix", shared - self.shared)
        where = next(((i, glob - b) for i, (b, n) in enumerate(spans) if b <= glob < b + n),
                     None)
        return ("cp", shared - self.shared, size, src_size, where)


def reads_outside(records, arrays):
    """The cp.async records that read bytes outside the array they point into."""
    bad = []
    for recs in records.values():
        for r in recs:
            if r[0] == "cp" and r[3] > 0:
                where = r[4]
                if where is None or where[1] + r[3] > arrays[where[0]].nbytes:
                    bad.append(r)
    return bad


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path[:0] = [root, os.path.join(root, "examples", "flash_attention"),
                    os.path.join(root, "tests")]
    os.environ["TILEJIT_DISABLE_CACHE"] = "1"
    import tilejit
    from flash_attn import flashattn
    from kernels import shifted_copy
    a = np.zeros((100, 200), np.float16)
    arrays = [a, np.zeros_like(a)]
    c = tilejit.kernel(shifted_copy.func).compile(*arrays, target="cuda", arch="sm_90a")
    records = Emulator(c).run(arrays, (2,), 128)
    bad = reads_outside(records, arrays)
    print(f"shifted copy: {sum(len(v) for v in records.values())} records, "
          f"{len(bad)} reads outside")
    failures = len(bad)
    # head dim 128 at 128x64 is register-starved: its chunk addresses come from the
    # thread index read where used
    for bm, bn, threads, causal, d in ((128, 64, 128, False, 64), (64, 64, 128, True, 64),
                                       (128, 64, 128, True, 128)):
        q = np.zeros((1, 136, 2, d), np.float16)
        arrays = [q, q.copy(), q.copy(), np.zeros_like(q)]
        c = tilejit.kernel(flashattn.func).compile(
            *arrays, block_M=bm, block_N=bn, threads=threads, is_causal=causal,
            target="cuda", arch="sm_90a")
        records = Emulator(c).run(arrays, (-(-136 // bm), 2, 1), threads)
        bad = reads_outside(records, arrays)
        print(f"flashattn {bm}x{bn} t{threads} d{d} causal={causal}: "
              f"{sum(len(v) for v in records.values())} records, {len(bad)} reads outside")
        failures += len(bad)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
