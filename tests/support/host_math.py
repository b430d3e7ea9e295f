"""The GPU's math routines compiled for this CPU, to measure their accuracy without a GPU:
``HostRoutines({name: build}, ty)`` JIT-compiles each IR builder ``build(builder, x)``
(or ``build(builder, x, y)`` with ``arity=2``) with a loop over arrays; ``routines(name,
x[, y])`` runs it. ``out_ty``: a result type other than the arguments' (a conversion).
``ulps(got, ref)`` is the distance in float32 ulps from a float64 reference."""
import ctypes

import numpy as np


class HostRoutines:
    def __init__(self, builds, ty, arity=1, out_ty=None):
        import llvmlite.binding as ll
        from llvmlite import ir
        ll.initialize_native_target()
        ll.initialize_native_asmprinter()
        module = ir.Module("host_math")
        module.triple = ll.get_process_triple()
        out_ty = out_ty or ty
        i64, ptr = ir.IntType(64), ty.as_pointer()
        for name, build in builds.items():
            f = ir.Function(module, ir.FunctionType(out_ty, [ty] * arity), f"m_{name}")
            b = ir.IRBuilder(f.append_basic_block())
            b.ret(build(b, *f.args))
            loop = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr] * arity + [
                out_ty.as_pointer(), i64]), f"a_{name}")
            *ins, out, n = loop.args
            entry, body, done = (loop.append_basic_block(s) for s in ("e", "b", "d"))
            b = ir.IRBuilder(entry)
            b.cbranch(b.icmp_signed(">", n, i64(0)), body, done)
            b = ir.IRBuilder(body)
            i = b.phi(i64)
            i.add_incoming(i64(0), entry)
            b.store(b.call(f, [b.load(b.gep(x, [i])) for x in ins]), b.gep(out, [i]))
            nxt = b.add(i, i64(1))
            i.add_incoming(nxt, body)
            b.cbranch(b.icmp_signed("<", nxt, n), body, done)
            ir.IRBuilder(done).ret_void()
        llmod = ll.parse_assembly(str(module))
        llmod.verify()
        tm = ll.Target.from_default_triple().create_target_machine(opt=2)
        self.engine = ll.create_mcjit_compiler(llmod, tm)
        self.engine.finalize_object()
        proto = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (arity + 1), ctypes.c_int64)
        self.fns = {n: proto(self.engine.get_function_address(f"a_{n}")) for n in builds}
        self.dtype, self.out_dtype = _NUMPY[str(ty)], _NUMPY[str(out_ty)]

    def __call__(self, name, *xs):
        xs = [np.ascontiguousarray(x, self.dtype) for x in np.broadcast_arrays(*xs)]
        out = np.empty(xs[0].shape, self.out_dtype)
        self.fns[name](*(x.ctypes.data for x in xs), out.ctypes.data, xs[0].size)
        return out


_NUMPY = {"float": np.float32, "double": np.float64, "i8": np.uint8}


def ulps(got, ref):
    """Distance in float32 ulps of ``got`` from the float64 ``ref`` (0 where ``got`` is
    ``ref`` rounded to float32, infinities and NaN included)."""
    with np.errstate(all="ignore"):
        ref32 = ref.astype(np.float32)
        spacing = np.spacing(np.abs(ref32)).astype(np.float64)
        d = np.abs(got.astype(np.float64) - ref) / spacing
    same = (got == ref32) | (np.isnan(got) & np.isnan(ref))
    return np.where(same, 0.0, np.where(np.isnan(d), np.inf, d))
