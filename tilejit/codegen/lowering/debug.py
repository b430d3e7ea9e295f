"""Device-side diagnostics: formatted printing through PTX's ``vprintf`` system call
(PTX ISA, "System Calls": the format string in global memory, the arguments packed in
a local buffer, each at its natural alignment) and the bounds checks of
``debug=True`` kernels, which print the failing access and trap."""
from __future__ import annotations

import zlib

from llvmlite import ir

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
I8P = I8.as_pointer()


def _format_string(builder, text: str):
    module = builder.module
    data = bytearray(text.encode() + b"\0")
    # crc32, not hash(): str hashes differ between processes (PYTHONHASHSEED)
    name = f"__tj_fmt_{zlib.crc32(text.encode()):08x}_{len(data)}"
    gv = module.globals.get(name)
    if gv is None:
        gv = ir.GlobalVariable(module, ir.ArrayType(I8, len(data)), name, addrspace=1)
        gv.global_constant = True
        gv.linkage = "internal"
        gv.initializer = ir.Constant(ir.ArrayType(I8, len(data)), data)
    ptr = builder.gep(gv, [I32(0), I32(0)], inbounds=True)
    return builder.addrspacecast(ptr, I8P)


def emit_printf(builder, text: str, values) -> None:
    """``printf(text, *values)`` on the device. Values are i32/i64 integers or doubles
    (C's default argument promotions: callers widen floats to double)."""
    module = builder.module
    vprintf = module.globals.get("vprintf") or ir.Function(
        module, ir.FunctionType(I32, [I8P, I8P]), "vprintf")
    if values:
        struct = ir.LiteralStructType([v.type for v in values])
        buf = builder.alloca(struct)
        for k, v in enumerate(values):
            builder.store(v, builder.gep(buf, [I32(0), I32(k)], inbounds=True))
        args = builder.bitcast(buf, I8P)
    else:
        args = ir.Constant(I8P, None)
    builder.call(vprintf, [_format_string(builder, text), args])


def emit_trap(builder) -> None:
    trap = builder.module.declare_intrinsic("llvm.trap", (), ir.FunctionType(ir.VoidType(), []))
    builder.call(trap, [])


def emit_bounds_check(builder, index64, extent64, what: str) -> None:
    """If not 0 <= index < extent: print which access failed, block and thread, trap."""
    bad = builder.icmp_unsigned(">=", index64, extent64)   # negative is huge unsigned
    with builder.if_then(bad, likely=False):
        emit_printf(builder, f"tilejit: out-of-bounds access {what}: index %lld, "
                    "extent %lld\n", [index64, extent64])
        emit_trap(builder)


def _thread_prefix(context, builder):
    ids = [context.block_index(builder, a) for a in range(3)] + [context.thread_index(builder)]
    return "[block (%d, %d, %d), thread %d] ", ids
