"""tilejit's Numba target: typing and target contexts on numba.core, no numba.cuda.

Numba's bytecode front end, type inference and ``Lower`` do the work; this module
supplies what a GPU target needs: data models for tensors and half types, a minimal
calling convention, a code library that only collects LLVM modules, a dispatcher for
the ``@overload``-defined builtins Numba calls internally (``bool()`` on branches), and
the target hooks (thread and block index) the lowering rules read.
"""
from __future__ import annotations

from functools import cached_property

import llvmlite.binding as ll
from llvmlite import ir
from numba.core import callconv, compiler, cpu, datamodel, types
from numba.core.base import BaseContext
from numba.core.codegen import CodeLibrary, Codegen
from numba.core.compiler_lock import global_compiler_lock
from numba.core.datamodel import models
from numba.core.descriptors import TargetDescriptor
from numba.core.dispatcher import Dispatcher
from numba.core.target_extension import (GPU, dispatcher_registry, jit_registry,
                                         target_registry)

from tilejit.codegen.lowering.registry import TABLES, load_rules
from tilejit.codegen.typing.context import TilejitTypingContext
from tilejit.ir.kernel_config import current_kernel_or_none
from tilejit.codegen.typing.tiles import RegionType, TileType
from tilejit.codegen.typing.types import (BFloat16, DTypeType, Float4, Float8, GlobalTensorType,
                                          ParallelIterType, ParallelType, TensorMapType,
                                          WeakFloat, is_half)

TRIPLE = "nvptx64-nvidia-cuda"
TARGET_NAME = "tilejit_cuda"


class TilejitCUDA(GPU):
    """The tilejit CUDA target in Numba's target hierarchy."""


target_registry[TARGET_NAME] = TilejitCUDA

ll.initialize_all_targets()
ll.initialize_all_asmprinters()
# shared-memory pointers (addrspace 3) in 32 bits: ldmatrix/cp.async addresses and
# tile offsets then use 32-bit registers and arithmetic (set before any target machine)
ll.set_option("tilejit", "--nvptx-short-ptr")


def _data_models():
    dmm = datamodel.default_manager.copy()
    dmm.register(WeakFloat, lambda m, t: models.PrimitiveModel(m, t, ir.DoubleType()))
    dmm.register(BFloat16, lambda m, t: models.PrimitiveModel(m, t, ir.IntType(16)))
    dmm.register(Float8, lambda m, t: models.PrimitiveModel(m, t, ir.IntType(8)))
    dmm.register(Float4, lambda m, t: models.PrimitiveModel(m, t, ir.IntType(8)))
    dmm.register(DTypeType, models.OpaqueModel)
    dmm.register(ParallelType, models.OpaqueModel)
    dmm.register(TensorMapType, models.OpaqueModel)

    class ParallelIterModel(models.StructModel):
        def __init__(self, m, t):
            super().__init__(m, t, [("counter", types.EphemeralPointer(types.int32))])

    class GlobalTensorModel(models.StructModel):
        def __init__(self, m, t):
            super().__init__(m, t, [("data", t.pointer),
                                    ("shape", types.UniTuple(types.int64, t.ndim)),
                                    ("strides", types.UniTuple(types.int64, t.ndim))])

    class HalfModel(models.PrimitiveModel):
        def __init__(self, m, t):
            super().__init__(m, t, ir.HalfType())

    dmm.register(ParallelIterType, ParallelIterModel)

    def tile_model(m, t):
        space = 3 if t.kind == "shared" else 0
        return models.PrimitiveModel(m, t, ir.PointerType(m[t.element].get_data_type(), space))

    class RegionModel(models.StructModel):
        def __init__(self, m, t):
            # stops: each dimension's end where the slice names one at run time, else -1
            # (T.fill of a region whose extent is known only then: copy.py)
            super().__init__(m, t, [("base", t.base),
                                    ("starts", types.UniTuple(types.int64, len(t.kinds))),
                                    ("stops", types.UniTuple(types.int64, len(t.kinds)))])

    dmm.register(TileType, tile_model)
    dmm.register(RegionType, RegionModel)
    dmm.register(GlobalTensorType, GlobalTensorModel)
    default_float = dmm._handlers[types.Float]

    def float_model(m, t):
        return HalfModel(m, t) if t.bitwidth == 16 else default_float(m, t)
    dmm.register(types.Float, float_model)
    return dmm


class LLVMModuleLibrary(CodeLibrary):
    """A code library that collects LLVM modules; code generation happens later, for
    the whole kernel at once (``tilejit/codegen/nvptx.py``)."""

    def __init__(self, codegen, name):
        super().__init__(codegen, name)
        self.modules: list[ir.Module] = []
        self.linking: list[CodeLibrary] = []

    def add_ir_module(self, module):
        self.modules.append(module)

    def add_linking_library(self, library):
        self.linking.append(library)

    def finalize(self):
        self._finalized = True

    def get_function(self, name):
        for m in self.modules:
            try:
                return m.get_global(name)
            except KeyError:
                pass
        raise KeyError(name)

    def get_llvm_str(self):
        return "\n".join(str(m) for m in self.modules)

    def get_asm_str(self):
        raise NotImplementedError("tilejit emits device code for whole kernels only")

    def all_modules(self):
        seen, out = set(), []

        def visit(lib):
            if id(lib) in seen:
                return
            seen.add(id(lib))
            out.extend(lib.modules)
            for sub in lib.linking:
                visit(sub)
        visit(self)
        return out


class NVPTXCodegen(Codegen):
    _library_class = LLVMModuleLibrary

    def __init__(self):
        target = ll.Target.from_triple(TRIPLE)
        self._tm = target.create_target_machine(cpu="sm_80", opt=3)
        self._data_layout = str(self._tm.target_data)
        self._target_data = ll.create_target_data(self._data_layout)

    def _create_empty_module(self, name):
        module = ir.Module(name)
        module.triple = TRIPLE
        module.data_layout = self._data_layout
        return module

    def _add_module(self, module):
        pass

    def create_library(self, name, **kwargs):
        return LLVMModuleLibrary(self, name)

    def magic_tuple(self):
        return (TRIPLE, "sm_80", "")

    @property
    def target_data(self):
        return self._target_data


AMDGPU_TRIPLE = "amdgcn-amd-amdhsa"


class AMDGPUCodegen(NVPTXCodegen):
    """Modules for AMDGPU: its data layout without the alloca and global address spaces
    (``codegen/amdgpu.py`` moves the allocas to address space 5 after SROA)."""

    def __init__(self):
        tm = ll.Target.from_triple(AMDGPU_TRIPLE).create_target_machine(cpu="gfx942", opt=3)
        self._data_layout = "-".join(p for p in str(tm.target_data).split("-")
                                     if p not in ("A5", "G1"))
        self._target_data = ll.create_target_data(self._data_layout)

    def _create_empty_module(self, name):
        # no triple yet: LLVM's verifier wants an amdgcn module's allocas in address
        # space 5, which codegen/amdgpu.py arranges after SROA
        module = ir.Module(name)
        module.data_layout = self._data_layout
        return module

    def magic_tuple(self):
        return (AMDGPU_TRIPLE, "gfx942", "")


class NVPTXTargetContext(BaseContext):
    implement_powi_as_math_call = True
    strict_alignment = True
    enable_nrt = False
    allow_dynamic_globals = False

    def __init__(self, typing_context, target=TARGET_NAME):
        super().__init__(typing_context, target)
        self.data_model_manager = _data_models()

    @global_compiler_lock
    def init(self):
        self._internal_codegen = NVPTXCodegen()

    def load_additional_registries(self):
        from numba.cpython import (builtins, iterators, numbers, rangeobj,  # noqa: F401
                                   slicing, tupleobj)
        from numba.misc import literal  # noqa: F401
        load_rules()
        self.install_registry(TABLES["common"])
        self.install_registry(TABLES["cuda"])

    def create_module(self, name):
        return self._internal_codegen._create_empty_module(name)

    def codegen(self):
        return self._internal_codegen

    @property
    def target_data(self):
        return self._internal_codegen.target_data

    @cached_property
    def call_conv(self):
        return callconv.MinimalCallConv(self)

    def mangler(self, name, argtypes, *, abi_tags=(), uid=None):
        from numba.core import funcdesc
        return funcdesc.default_mangler(name, argtypes, abi_tags=abi_tags, uid=uid)

    def get_function(self, fn, sig, _firstcall=True):
        # half types compute in float32: the typing gave (f32, …) -> half; run the
        # float32 implementation and round its result.
        if is_half(sig.return_type) and sig.args and all(
                a == types.float32 for a in sig.args):
            inner = super().get_function(fn, sig.replace(return_type=types.float32))

            def rounded(builder, args, loc=None):
                value = inner(builder, args, loc)
                return self.cast(builder, value, types.float32, sig.return_type)
            return rounded
        return super().get_function(fn, sig, _firstcall)

    # target hooks read by the lowering rules
    def _sreg(self, builder, name):
        fnty = ir.FunctionType(ir.IntType(32), [])
        fn = builder.module.globals.get(name) or ir.Function(builder.module, fnty, name)
        return builder.call(fn, [])

    def thread_index(self, builder):
        """This thread's index among the threads that share the kernel's tiles: the
        block's, or in a kernel with ``T.ws`` roles its warpgroup's (``role_threads``)."""
        return self._in_role(builder, self.block_thread_index(builder))

    def block_thread_index(self, builder):
        return self._sreg(builder, "llvm.nvvm.read.ptx.sreg.tid.x")

    def thread_index_here(self, builder):
        """%tid.x read where it is used: a side-effecting inline-asm move, so LLVM does
        not hoist what is computed from it out of a loop (nor merge two reads)."""
        asm = ir.InlineAsm(ir.FunctionType(ir.IntType(32), []), "mov.u32 $0, %tid.x;", "=r",
                           side_effect=True)
        return self._in_role(builder, builder.call(asm, []))

    @staticmethod
    def _in_role(builder, tid):
        config = current_kernel_or_none()
        roles = config.tiles.role_threads if config is not None and config.tiles else 0
        return builder.and_(tid, ir.IntType(32)(roles - 1)) if roles else tid

    def block_index(self, builder, axis, extent=None):
        """%ctaid on ``axis``; within [0, extent) (LLVM range metadata) when given."""
        return _in_range(builder, self._sreg(builder, "llvm.nvvm.read.ptx.sreg.ctaid." +
                                             "xyz"[axis]), extent)

    def grid_dim(self, builder, axis):
        return self._sreg(builder, "llvm.nvvm.read.ptx.sreg.nctaid." + "xyz"[axis])


def _in_range(builder, value, extent):
    """``value`` (a read of a block index) known to lie in [0, extent): LLVM's range
    metadata, where the launch's grid is compile-time (frontend/static_grid.py)."""
    if extent is not None:
        i32 = ir.IntType(32)
        value.set_metadata("range", builder.module.add_metadata([i32(0), i32(extent)]))
    return value


class AMDGPUTargetContext(NVPTXTargetContext):
    """The same lowering with AMDGPU's work-item intrinsics and its own rule table."""

    @global_compiler_lock
    def init(self):
        self._internal_codegen = AMDGPUCodegen()

    def load_additional_registries(self):
        from numba.cpython import (builtins, iterators, numbers, rangeobj,  # noqa: F401
                                   slicing, tupleobj)
        from numba.misc import literal  # noqa: F401
        load_rules()
        self.install_registry(TABLES["common"])
        self.install_registry(TABLES["amdgpu"])

    def thread_index(self, builder):
        return self._sreg(builder, "llvm.amdgcn.workitem.id.x")

    def block_thread_index(self, builder):
        return self.thread_index(builder)

    def thread_index_here(self, builder):
        return self.thread_index(builder)

    def block_index(self, builder, axis, extent=None):
        return _in_range(builder, self._sreg(builder, "llvm.amdgcn.workgroup.id." +
                                             "xyz"[axis]), extent)

    def grid_dim(self, builder, axis):
        from tilejit.errors import CompileError   # the grid size needs the dispatch packet
        raise CompileError("AMDGPU: the grid's extent inside a kernel (T.PersistentTileScheduler "
                           "without num_workers) is not supported yet")


class TilejitTargetOptions(cpu.CPUTargetOptions):
    def finalize(self, flags, options):
        super().finalize(flags, options)
        configure_flags(flags)


def configure_flags(flags):
    # nopython only: a helper whose typing fails is that error, never an object-mode
    # fallback (which compiled it with Python objects and left the target's state for
    # later compiles in the process: "dyn globals disabled in this target")
    flags.enable_pyobject = False
    flags.enable_looplift = False
    flags.force_pyobject = False
    flags.no_compile = True
    flags.no_cpython_wrapper = True
    flags.no_cfunc_wrapper = True
    flags.nrt = False
    flags.error_model = "numpy"
    flags.release_gil = False
    return flags


class TilejitTargetDescriptor(TargetDescriptor):
    options = TilejitTargetOptions

    @cached_property
    def typing_context(self):
        return TilejitTypingContext()

    @cached_property
    def target_context(self):
        return NVPTXTargetContext(self.typing_context)


descriptor = TilejitTargetDescriptor(TARGET_NAME)
_AMDGPU_CONTEXT = []


def target_context_for(target):
    """The Numba target context that lowers for ``target`` (a tilejit Target)."""
    if target.kind != "amdgpu":
        return descriptor.target_context
    if not _AMDGPU_CONTEXT:
        _AMDGPU_CONTEXT.append(AMDGPUTargetContext(descriptor.typing_context))
    return _AMDGPU_CONTEXT[0]


class _DeviceFunctionKey:
    """The implementation key of one compiled device function."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<device function {self.name}>"


class TilejitDeviceDispatcher(Dispatcher):
    """Compiles device functions of this target: the ``@overload`` implementations
    Numba's builtins use, and ``@T.macro`` helpers. A device function has no host entry
    point; its compile result itself is the key its implementation is registered
    under, so that calls to it lower to a call of its LLVM function."""
    targetdescr = descriptor

    def add_overload(self, cres):
        args = tuple(cres.signature.args)
        self.overloads[args] = cres
        key = _DeviceFunctionKey(cres.fndesc.qualname)
        self.__dict__.setdefault("_device_keys", {})[args] = key
        cres.target_context.insert_user_function(key, cres.fndesc, [cres.library])

    def get_overload(self, sig):
        from numba.core import sigutils
        args, _ = sigutils.normalize_signature(sig)
        return self._device_keys[tuple(args)]


def _device_jit(**options):
    def wrap(pyfunc):
        return TilejitDeviceDispatcher(pyfunc, targetoptions=options)
    return wrap


dispatcher_registry[TilejitCUDA] = TilejitDeviceDispatcher
jit_registry[TilejitCUDA] = _device_jit


def new_flags():
    return configure_flags(compiler.Flags())
