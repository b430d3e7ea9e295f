"""``T.print`` and ``T.device_assert`` on the device (through ``debug.emit_printf``)."""
from __future__ import annotations

from llvmlite import ir
from numba.core import types

from tilejit import language as T
from tilejit.codegen.typing.types import StorageFloat
from tilejit.codegen.lowering.debug import _thread_prefix, emit_printf, emit_trap
from tilejit.codegen.lowering.registry import lower
from tilejit.ir.kernel_config import current_kernel


def _printable(context, builder, ty, value):
    """(printf conversion, value promoted as C's varargs are)."""
    if isinstance(ty, types.Boolean):
        return "%d", builder.zext(value, ir.IntType(32))
    if isinstance(ty, types.Integer):
        wide = builder.sext(value, ir.IntType(64)) if ty.signed else builder.zext(
            value, ir.IntType(64))
        return ("%lld" if ty.signed else "%llu"), wide
    if isinstance(ty, (types.Float, StorageFloat)):
        return "%g", context.cast(builder, value, ty, types.float64)
    raise NotImplementedError(f"T.print of {ty}")


def _where(context) -> str:
    loc = getattr(context, "current_loc", None)
    return f"{loc.filename}:{loc.line}".replace("%", "%%") if loc is not None else "?"


@lower(T.print, types.Any)
@lower(T.print, types.Any, types.StringLiteral)
def print_impl(context, builder, sig, args):
    msg = sig.args[1].literal_value.replace("%", "%%") if len(sig.args) > 1 else ""
    conv, value = _printable(context, builder, sig.args[0], args[0])
    prefix, ids = _thread_prefix(context, builder)
    emit_printf(builder, f"{prefix}{msg}{conv}\n", ids + [value])
    return context.get_dummy_value()


@lower(T.device_assert, types.boolean)
@lower(T.device_assert, types.boolean, types.StringLiteral)
def device_assert_impl(context, builder, sig, args):
    if current_kernel().debug:
        msg = sig.args[1].literal_value.replace("%", "%%") if len(sig.args) > 1 else ""
        with builder.if_then(builder.not_(args[0]), likely=False):
            prefix, ids = _thread_prefix(context, builder)
            emit_printf(builder, f"{prefix}T.device_assert failed at {_where(context)}: "
                        f"{msg}\n", ids)
            emit_trap(builder)
    return context.get_dummy_value()
