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


@lower(T.print, types.StringLiteral)
def print_message_impl(context, builder, sig, args):
    prefix, ids = _thread_prefix(context, builder)
    emit_printf(builder, f"{prefix}{sig.args[0].literal_value.replace('%', '%%')}\n", ids)
    return context.get_dummy_value()


@lower(T.print_at, types.VarArg(types.Any))
def print_at_impl(context, builder, sig, args):
    """``msg[i, j] = value`` from the thread ``lane`` of the block (every thread for -1)."""
    msg = sig.args[1].literal_value.replace("%", "%%")
    lane = sig.args[2].literal_value
    conv, value = _printable(context, builder, sig.args[0], args[0])
    shown = [_printable(context, builder, t, v) for t, v in zip(sig.args[3:], args[3:])]
    index = [v for _, v in shown]
    where = ", ".join(conversion for conversion, _ in shown)

    def emit():
        prefix, ids = _thread_prefix(context, builder)
        emit_printf(builder, f"{prefix}{msg}[{where}] = {conv}\n", ids + index + [value])
    if lane < 0:
        emit()
    else:
        thread = context.thread_index(builder)
        with builder.if_then(builder.icmp_unsigned("==", thread,
                                                   ir.Constant(thread.type, lane))):
            emit()
    return context.get_dummy_value()


@lower(T.assume, types.boolean)
def assume_impl(context, builder, sig, args):
    """``llvm.assume``; with ``debug=True`` checked as ``T.device_assert`` instead."""
    if current_kernel().debug:
        _check(context, builder, args[0], f"T.assume is false at {_where(context)}")
        return context.get_dummy_value()
    fn = builder.module.declare_intrinsic("llvm.assume", (), ir.FunctionType(
        ir.VoidType(), [ir.IntType(1)]))
    builder.call(fn, [args[0]])
    return context.get_dummy_value()


@lower(T.device_assert, types.boolean)
@lower(T.device_assert, types.boolean, types.StringLiteral)
def device_assert_impl(context, builder, sig, args):
    if current_kernel().debug:
        msg = sig.args[1].literal_value.replace("%", "%%") if len(sig.args) > 1 else ""
        _check(context, builder, args[0], f"T.device_assert failed at {_where(context)}: {msg}")
    return context.get_dummy_value()


def _check(context, builder, cond, text):
    """Where ``cond`` is false: print ``text`` with the block and thread, and trap."""
    with builder.if_then(builder.not_(cond), likely=False):
        prefix, ids = _thread_prefix(context, builder)
        emit_printf(builder, f"{prefix}{text}\n", ids)
        emit_trap(builder)
