"""Run an AMDGPU kernel's optimized LLVM IR on this machine's CPU, one OS thread per work
item: a test's stand-in for the AMD GPU no session here is lent.

``handle.llvm_ir`` of ``kernel.compile(..., target="amdgpu")`` is the module the AMDGPU
back end turns into the code object. What in it is not host code is replaced textually:
address spaces are dropped (LDS becomes one host buffer, the blocks run one after another),
the work-item and workgroup ids become parameters of the kernel, ``s_barrier`` a barrier of
the block's threads, and each wave-wide operation (MFMA, ``ds_bpermute``,
``readfirstlane``) stores its lane's operands in an exchange buffer and waits on the wave's
barrier, whose last arrival computes the whole wave's results in numpy. The MFMA register
layouts used there are AMD's Matrix Instruction Calculator's ("Matrix element to register
mapping", ``matrix_calculator.py -a cdna3 -i <instruction> -d``), written here apart from
``tilejit/layouts``. The rest (the back end's instruction selection, the hardware's
scheduling, LDS banks) is not what this checks: that is for a ROCm machine.
"""
from __future__ import annotations

import ctypes
import re
import threading

import numpy as np

import llvmlite.binding as ll

_SLOT = 128             # exchange bytes per lane and operand
_TIMEOUT = 120.0

# mfma intrinsic suffix -> (M, N, K, operand numpy dtype or "bf16", accumulator dtype)
_MFMA = {
    "f32.32x32x8f16": (32, 32, 8, "float16", "float32"),
    "f32.16x16x16f16": (16, 16, 16, "float16", "float32"),
    "f32.32x32x8bf16.1k": (32, 32, 8, "bf16", "float32"),
    "f32.16x16x16bf16.1k": (16, 16, 16, "bf16", "float32"),
    "i32.32x32x8i8": (32, 32, 8, "int8", "int32"),
    "i32.16x16x16i8": (16, 16, 16, "int8", "int32"),
    "i32.32x32x16.i8": (32, 32, 16, "int8", "int32"),
    "i32.16x16x32.i8": (16, 16, 32, "int8", "int32"),
    "f32.32x32x2f32": (32, 32, 2, "float32", "float32"),
    "f32.16x16x4f32": (16, 16, 4, "float32", "float32"),
}


def _operand_values(raw: np.ndarray, dtype: str, count: int) -> np.ndarray:
    if dtype == "bf16":
        bits = raw[:, :2 * count].view(np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).astype(np.float64)
    values = raw[:, :count * np.dtype(dtype).itemsize].view(dtype)
    return values.astype(np.int64 if dtype == "int8" else np.float64)


def mfma_wave(name: str, a_raw, b_raw, c_raw) -> np.ndarray:
    """D of one wave (64 lanes' raw operand bytes in, raw D bytes out)."""
    m, n, k, in_dtype, acc_dtype = _MFMA[name]
    kl = k // (64 // m)
    a = _operand_values(a_raw, in_dtype, kl)
    b = _operand_values(b_raw, in_dtype, kl)
    regs = m * n // 64
    c = c_raw[:, :4 * regs].view(acc_dtype)
    A = np.zeros((m, k), a.dtype)
    B = np.zeros((k, n), b.dtype)
    for i in range(m):
        for kk in range(k):
            # A[i][k]: lane M * floor(k / KL) + i, element k % KL (B alike, j for i)
            A[i, kk] = a[m * (kk // kl) + i, kk % kl]
            B[kk, i] = b[n * (kk // kl) + i, kk % kl]

    def where(i, j):            # C/D[i][j] -> (lane, GPR)
        if m == 32:
            return (32 * (i // 4)) % 64 + j, 4 * (i // 8) + i % 4
        return 16 * (i // 4) + j, i % 4
    C = np.zeros((m, n), np.float64 if acc_dtype == "float32" else np.int64)
    for i in range(m):
        for j in range(n):
            C[i, j] = c[where(i, j)]
    D = A @ B + C
    out = np.zeros((64, regs), acc_dtype)
    for i in range(m):
        for j in range(n):
            out[where(i, j)] = D[i, j] if acc_dtype == "float32" else np.int64(D[i, j]).astype(
                np.int32)
    res = np.zeros_like(c_raw)
    res[:, :4 * regs] = out.view(np.uint8).reshape(64, 4 * regs)
    return res


class _Waves:
    """The exchange buffers, the barriers and the wave operations of one block."""

    def __init__(self, threads: int):
        self.threads = threads
        self.buf = {x: np.zeros((threads, _SLOT), np.uint8) for x in "ABCD"}
        self.ops = {}
        self.block = threading.Barrier(threads, timeout=_TIMEOUT)
        self.waves = [threading.Barrier(64, action=self._action(w), timeout=_TIMEOUT)
                      for w in range(threads // 64)]
        self.pending = [None] * (threads // 64)
        self.error = None

    def _action(self, w):
        def run():
            op = self.pending[w]
            lanes = slice(64 * w, 64 * w + 64)
            try:
                kind, arg = self.ops[op]
                a, b, c = (self.buf[x][lanes] for x in "ABC")
                if kind == "mfma":
                    self.buf["D"][lanes] = mfma_wave(arg, a, b, c)
                elif kind == "bpermute":        # dst[l] = src[(addr[l] / 4) % 64]
                    addr, src = a[:, :4].view(np.int32)[:, 0], b[:, :4].view(np.int32)[:, 0]
                    out = src[(addr >> 2) & 63]
                    self.buf["D"][lanes, :4] = out.astype(np.int32).view(np.uint8).reshape(64, 4)
                elif kind == "readfirstlane":
                    self.buf["D"][lanes, :4] = a[0, :4]
            except Exception as e:          # noqa: BLE001 (reported by run_kernel)
                self.error = e
                raise
        return run

    def wave_op(self, tid, op):
        self.pending[tid // 64] = op
        self.waves[tid // 64].wait()

    def barrier(self, tid):
        self.block.wait()


_WAVE_FN = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int32)
_BARRIER_FN = ctypes.CFUNCTYPE(None, ctypes.c_int32)


def _address(array) -> int:
    return array.ctypes.data


def host_module(text: str, waves: _Waves, wave_cb, barrier_cb) -> tuple[str, str, list[str]]:
    """The kernel's IR rewritten for the host: (text, entry name, parameter types)."""
    define = re.search(r"define amdgpu_kernel void @(\"?[\w.$]+\"?)\(", text)
    if not define:
        raise ValueError("no amdgpu_kernel in this module")
    name, depth, end = define.group(1), 1, define.end()
    while depth:
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        end += 1
    params = text[define.end():end - 1]
    body = text.index("{", end)
    ptypes = [p.split()[0] for p in _split_args(params)]
    text = (text[:define.start()]
            + f"define void @{name}(i32 %tj.tid, i32 %tj.bx, i32 %tj.by, i32 %tj.bz"
            + (", " + params if params else "") + ") {" + text[body + 1:])
    if len(re.findall(r"^define ", text, re.M)) != 1:
        raise ValueError("expected one function (everything inlined into the kernel)")
    text = re.sub(r"^target (triple|datalayout) = .*$", "", text, flags=re.M)
    text = re.sub(r"^declare .*@llvm\.amdgcn\..*$", "", text, flags=re.M)
    space = r"(?: addrspace\(\d+\))?"
    text = re.sub(rf"addrspacecast \(ptr{space} ([^ ]+) to ptr{space}\)", r"\1", text)
    text = re.sub(rf"= addrspacecast ptr{space} (%[\w.\"$-]+) to ptr{space}",
                  r"= getelementptr i8, ptr \1, i64 0", text)
    text = re.sub(r",? addrspace\(\d+\)", "", text)
    text = re.sub(r'syncscope\("[^"]*"\) ', "", text)
    text = re.sub(r"@__tj_smem = external (local_unnamed_addr )?global \[0 x i8\]",
                  "@__tj_smem = global [163840 x i8] zeroinitializer", text)
    text = re.sub(r'"target-(cpu|features)"="[^"]*"', "", text)
    helpers = []
    addr = {x: _address(waves.buf[x]) for x in "ABCD"}
    wave_ptr = ctypes.cast(wave_cb, ctypes.c_void_p).value
    barrier_ptr = ctypes.cast(barrier_cb, ctypes.c_void_p).value

    def exchange(op_id, ret, args):
        """A helper storing ``args`` (type, name) in buffers A, B, C, syncing the wave and
        loading D as ``ret``."""
        lines = [f"define internal {ret} @tj.op{op_id}(i32 %tid, "
                 + ", ".join(f"{t} %x{i}" for i, (t, _) in enumerate(args)) + ") {",
                 "  %t = zext i32 %tid to i64"]
        for i, (t, _) in enumerate(args):
            buf = "ABC"[i]
            lines += [f"  %p{i} = getelementptr [{_SLOT} x i8], ptr inttoptr (i64 {addr[buf]} "
                      f"to ptr), i64 %t", f"  store {t} %x{i}, ptr %p{i}, align 1"]
        lines += [f"  call void inttoptr (i64 {wave_ptr} to ptr)(i32 %tid, i32 {op_id})",
                  f"  %pd = getelementptr [{_SLOT} x i8], ptr inttoptr (i64 {addr['D']} to ptr),"
                  f" i64 %t", f"  %d = load {ret}, ptr %pd, align 1", f"  ret {ret} %d", "}"]
        helpers.append("\n".join(lines))

    def replace_call(m):
        lhs, ret, intr, args = m.group(1)[:-2], m.group(2), m.group(3), m.group(4)
        if intr == "workitem.id.x":
            return f"{lhs} = add i32 %tj.tid, 0"
        if intr.startswith("workgroup.id."):
            return f"{lhs} = add i32 %tj.b{intr[-1]}, 0"
        if intr == "s.barrier":
            return f"call void inttoptr (i64 {barrier_ptr} to ptr)(i32 %tj.tid)"
        arglist = _split_args(args)
        if intr.startswith("mfma."):
            op = len(waves.ops)
            waves.ops[op] = ("mfma", intr[len("mfma."):])
            exchange(op, ret, [(a.rsplit(" ", 1)[0], a) for a in arglist[:3]])
            return (f"{lhs} = call {ret} @tj.op{op}(i32 %tj.tid, " + ", ".join(arglist[:3]) + ")")
        if intr == "ds.bpermute":
            op = len(waves.ops)
            waves.ops[op] = ("bpermute", None)
            exchange(op, ret, [(a.rsplit(" ", 1)[0], a) for a in arglist])
            return f"{lhs} = call {ret} @tj.op{op}(i32 %tj.tid, " + ", ".join(arglist) + ")"
        if intr.startswith("readfirstlane"):
            op = len(waves.ops)
            waves.ops[op] = ("readfirstlane", None)
            exchange(op, ret, [(a.rsplit(" ", 1)[0], a) for a in arglist])
            return f"{lhs} = call {ret} @tj.op{op}(i32 %tj.tid, " + ", ".join(arglist) + ")"
        raise ValueError(f"the CPU run has no stand-in for llvm.amdgcn.{intr}")

    call = re.compile(r"^\s*(%[\w.\"$-]+ =|)\s*(?:tail |notail )?call "
                      r"(?:(?:noundef|fast|nnan|ninf|nsz|arcp|contract|afn|reassoc) )*"
                      r"([^@]*?) @llvm\.amdgcn\.([\w.]+)\((.*)\)(?:\s*#\d+)?"
                      r"(?:, ![\w.]+ ![\w.]+)*$", re.M)
    text = call.sub(lambda m: "  " + replace_call(m), text)
    if "@llvm.amdgcn." in text:
        left = sorted(set(re.findall(r"@llvm\.amdgcn\.[\w.]+", text)))
        raise ValueError(f"the CPU run has no stand-in for {left}")
    return text + "\n" + "\n".join(helpers) + "\n", name.strip('"'), ptypes


def _split_args(args: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in args:
        if ch in "(<[{":
            depth += 1
        elif ch in ")>]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


_CTYPES = {"i32": ctypes.c_int32, "i64": ctypes.c_int64, "ptr": ctypes.c_void_p,
           "float": ctypes.c_float, "double": ctypes.c_double, "i16": ctypes.c_int16,
           "i8": ctypes.c_int8, "i1": ctypes.c_bool}
_ENGINES = []           # the JIT engines stay alive (their code is called from threads)


def run_kernel(handle, args, grid, threads: int) -> None:
    """Run ``handle`` (compiled for AMDGPU from numpy ``args``, or PackedTensors of numpy
    bytes) over ``grid`` (bx, by, bz extents) on the CPU, writing the numpy arrays in
    ``args`` as the GPU would."""
    from tilejit.runtime.arguments import PackedTensor
    flat = []
    for a in args:
        if isinstance(a, PackedTensor):     # its bytes, by its logical shape and strides
            b = a.storage
            flat += [b.ctypes.data] + list(b.shape[:-1]) + [b.shape[-1] * a.dtype.packed]
            flat += [s // b.itemsize * a.dtype.packed for s in b.strides[:-1]] + [1]
        elif isinstance(a, np.ndarray):
            flat += [a.ctypes.data] + list(a.shape) + [s // a.itemsize for s in a.strides]
        else:
            flat.append(a)
    run_flat(handle.llvm_ir, flat, grid, threads)


def run_flat(llvm_ir: str, flat, grid, threads: int) -> None:
    """``run_kernel`` on the kernel's flat parameters (pointers as host addresses, shape
    entries, strides, scalars), each a Python number or the raw bytes of one kernarg
    (what a HIP launch packs: ``tests/support/fake_hip.py``)."""
    ll.initialize_native_target()
    ll.initialize_native_asmprinter()
    waves = _Waves(threads)
    wave_cb = _WAVE_FN(lambda tid, op: waves.wave_op(tid, op))
    barrier_cb = _BARRIER_FN(lambda tid: waves.barrier(tid))
    text, name, ptypes = host_module(llvm_ir, waves, wave_cb, barrier_cb)
    target = ll.Target.from_default_triple()
    tm = target.create_target_machine(cpu=ll.get_host_cpu_name(),
                                      features=ll.get_host_cpu_features().flatten(), opt=1)
    mod = ll.parse_assembly(text)
    mod.triple = ll.get_process_triple()
    mod.data_layout = str(tm.target_data)
    mod.verify()
    engine = ll.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    _ENGINES.append((engine, wave_cb, barrier_cb))
    flat = [_CTYPES[t].from_buffer_copy(v[:ctypes.sizeof(_CTYPES[t])]).value
            if isinstance(v, (bytes, bytearray)) else v for v, t in zip(flat, ptypes)]
    if len(flat) != len(ptypes):
        raise ValueError(f"{len(flat)} flat arguments for {len(ptypes)} parameters")
    proto = ctypes.CFUNCTYPE(None, *([ctypes.c_int32] * 4 + [_CTYPES[t] for t in ptypes]))
    fn = proto(engine.get_function_address(name))
    gx, gy, gz = (tuple(grid) + (1, 1))[:3]
    for bz in range(gz):
        for by in range(gy):
            for bx in range(gx):
                workers = [threading.Thread(target=fn, args=(t, bx, by, bz, *flat))
                           for t in range(threads)]
                for w in workers:
                    w.start()
                for w in workers:
                    w.join()
                if waves.error is not None:
                    raise waves.error
                if waves.block.broken or any(b.broken for b in waves.waves):
                    raise RuntimeError("a barrier broke (threads diverged or timed out)")
