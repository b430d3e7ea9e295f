"""The kernel entry both back ends build around the lowered device function.

The device function (Numba's calling convention) takes one value per kernel argument;
the entry takes the flat parameters the launch packs (``kernel_parameters``: a tensor as
its data pointer, then its shape and strides as i64; a TMA tensor map as a pointer to
its 128 bytes) and rebuilds each tensor's struct. The back ends add their calling
convention's attributes (``nvptx.build_entry``, ``amdgpu.build_entry``).
"""
from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types

from tilejit.codegen.lowering.tiles import SMEM
from tilejit.codegen.typing.types import GlobalTensorType, TensorMapType


def kernel_parameters(context, argtypes):
    """The flat LLVM parameter types of the entry, per kernel argument."""
    out = []
    for ty in argtypes:
        if isinstance(ty, GlobalTensorType):
            out.append([context.get_value_type(ty.pointer)] + [ir.IntType(64)] * (2 * ty.ndim))
        elif isinstance(ty, TensorMapType):
            out.append([ir.PointerType(ir.IntType(8))])
        else:
            out.append([context.get_value_type(ty)])
    return out


def entry_module(context, fndesc, argtypes, name: str, calling_convention: str,
                 shape_constants=None, prologue=None, aliased=frozenset()) -> str:
    """LLVM IR text of the entry ``name`` (``calling_convention``: ``ptx_kernel`` or
    ``amdgpu_kernel``) calling the device function of ``fndesc``. ``shape_constants``
    maps an argument's position to ``{dim: value}``: the shape entries this
    specialization was compiled for. The launch passes exactly those values (they are
    part of the specialization's key), so the entry uses the constants: bounds checks
    against them fold away. A tensor map parameter is named ``tjmap<i>``. ``prologue``
    (builder → None) emits code before the call (``poison_shared``). The tensor pointers
    are ``noalias`` (``tensor_value``) but those of the arguments at the positions in
    ``aliased``."""
    module = context.create_module("entry")
    fnty = context.call_conv.get_function_type(types.none, argtypes)
    inner = cgutils.get_or_insert_function(module, fnty, fndesc.llvm_func_name)
    groups = kernel_parameters(context, argtypes)
    flat = [t for g in groups for t in g]
    entry = ir.Function(module, ir.FunctionType(ir.VoidType(), flat), name)
    entry.calling_convention = calling_convention
    builder = ir.IRBuilder(entry.append_basic_block("entry"))
    values, pos = [], 0
    for index, (ty, group) in enumerate(zip(argtypes, groups)):
        params = entry.args[pos:pos + len(group)]
        pos += len(group)
        if isinstance(ty, GlobalTensorType):
            known = (shape_constants or {}).get(index, {})
            values.append(tensor_value(context, builder, ty, params, known,
                                       index not in aliased))
        elif isinstance(ty, TensorMapType):
            params[0].name = f"tjmap{index}"
            values.append(params[0])
        else:
            values.append(params[0])
    if prologue is not None:
        prologue(builder)
    context.call_conv.call_function(builder, inner, types.none, argtypes, values)
    builder.ret_void()
    return str(module)


def tensor_value(context, builder, ty: GlobalTensorType, params, known: dict,
                 restrict: bool = True):
    data, dims = params[0], params[1:]
    shape, strides = dims[:ty.ndim], dims[ty.ndim:]
    shape = [ir.IntType(64)(known[d]) if d in known else s for d, s in enumerate(shape)]
    # tensor arguments are `__restrict__`, as in TileLang's generated CUDA: the
    # iterations of a T.Parallel are independent, so accesses of different iterations
    # may be reordered (an in-place `A[i] = f(A[i])` stays correct: within one
    # iteration the store depends on the load). Not in a kernel with its own barriers
    # (T.sync_threads, T.sync_grid, ...): LLVM takes a noalias pointer's memory to be seen
    # by this thread alone, so it moves a load of another thread's element before the
    # barrier, or drops a store another thread reads after it when this thread overwrites
    # it later (no call may read a noalias object it was not given)
    if restrict:
        data.add_attribute("noalias")
    if ty.aligned:
        # launch checked: data 16-byte aligned, every stride but the last a multiple of
        # 16 bytes; say so, so LLVM may merge consecutive accesses into 16-byte ones
        data.attributes.align = 16
        vec = max(1, 16 // ty.dtype.itemsize)
        assume = builder.module.declare_intrinsic("llvm.assume", (),
                                                  ir.FunctionType(ir.VoidType(), [ir.IntType(1)]))
        for s in strides[:-1]:
            low = builder.and_(s, s.type(vec - 1))
            builder.call(assume, [builder.icmp_unsigned("==", low, s.type(0))])
    struct = cgutils.create_struct_proxy(ty)(context, builder)
    struct.data = data
    struct.shape = _tuple(context, builder, shape)
    struct.strides = _tuple(context, builder, strides)
    return struct._getvalue()


def _tuple(context, builder, values):
    return context.make_tuple(builder, types.UniTuple(types.int64, len(values)), list(values))


def poison_shared(builder, nbytes: int, threads: int, thread_index: str, barrier) -> None:
    """``debug=True``: the block's shared memory (``@__tj_smem``, address space 3)
    filled with all-ones bits (NaN in every float type, -1 in every integer) by all its
    threads, then ``barrier(builder)``, before the kernel's body runs: a tile element read
    before it is written reads NaN on the GPU, as the simulator reports it (SPEC: the
    simulator is never kinder than the GPU). ``thread_index`` names the target's
    intrinsic for the thread's index in the block. The fragments' slots get the same
    pattern where they are allocated (``lowering/tiles.tile_impl``)."""
    i32 = ir.IntType(32)
    module = builder.module
    smem = module.globals.get(SMEM)
    if smem is None:
        smem = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(8), 0), SMEM, addrspace=3)
        smem.linkage = "external"
        smem.align = 16
    tid_fn = module.declare_intrinsic(thread_index, (), ir.FunctionType(i32, []))
    words = builder.bitcast(smem, ir.PointerType(i32, 3))
    tid = builder.call(tid_fn, [])
    with cgutils.for_range_slice(builder, tid, i32((nbytes + 3) // 4), i32(threads),
                                 inc=True) as (index, _):
        builder.store(i32(-1), builder.gep(words, [index]))
    barrier(builder)
