"""Types of the random-stream markers (``frontend/random_draws.py``): the state is the
kernel's ``__tj_rng`` local uint32 array; a draw's type follows its literal kind."""
from __future__ import annotations

from numba.core import errors, types
from numba.core.typing import signature
from numba.core.typing.templates import AbstractTemplate

from tilejit import language as T
from tilejit.ir import markers
from tilejit.ir import random_state as rs
from tilejit.codegen.typing.templates import infer_global
from tilejit.codegen.typing.tiles import TileType

_RESULT = {rs.UINT32: types.uint32, rs.UNIFORM: types.float32,
           rs.UNIFORM_DOUBLE: types.float64, rs.NORMAL: types.float32,
           rs.NORMAL_DOUBLE: types.float64}


def _state(ty, what):
    if not (isinstance(ty, TileType) and ty.kind == "local" and ty.dtype.name == "uint32"
            and ty.shape == (rs.WORDS,)):
        raise errors.TypingError(f"{what}: the random stream must be the kernel's own "
                                 f"(got {ty})")


def _integer(ty, what):
    if not isinstance(ty, (types.Integer, types.Boolean)):
        raise errors.TypingError(f"{what} must be an integer, got {ty}")


def _generator(ty) -> int:
    if not isinstance(ty, types.IntegerLiteral) or ty.literal_value not in (
            rs.PHILOX, rs.XORWOW, rs.MRG32K3A):
        raise errors.TypingError(f"a random stream's generator must be a literal, got {ty}")
    return ty.literal_value


def _kind(ty) -> int:
    if not isinstance(ty, types.IntegerLiteral) or ty.literal_value not in _RESULT:
        raise errors.TypingError(f"a random draw's kind must be a literal, got {ty}")
    return ty.literal_value


@infer_global(markers.stub(markers.RNG_INIT))
class RngInitTemplate(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) != 5 or kws:
            raise errors.TypingError("T.rng_init(seed, seq, off)")
        _state(args[0], "T.rng_init")
        for ty, what in zip(args[1:4], ("seed", "seq", "off")):
            _integer(ty, f"T.rng_init: {what}")
        _generator(args[4])
        return signature(types.none, args[0], types.int64, types.int64, types.int64,
                         args[4])


@infer_global(markers.stub(markers.RNG_NEXT))
class RngNextTemplate(AbstractTemplate):
    def generic(self, args, kws):
        _state(args[0], "a random draw")
        _generator(args[2])
        return signature(_RESULT[_kind(args[1])], *args)


@infer_global(markers.stub(markers.RNG_AT))
class RngAtTemplate(AbstractTemplate):
    def generic(self, args, kws):
        _state(args[0], "a random draw")
        _integer(args[2], "a T.Parallel iteration's index")
        _generator(args[3])
        return signature(_RESULT[_kind(args[1])], args[0], args[1], types.int64, args[3])


@infer_global(markers.stub(markers.RNG_SKIP))
class RngSkipTemplate(AbstractTemplate):
    def generic(self, args, kws):
        _state(args[0], "a T.Parallel's random draws")
        _integer(args[1], "a T.Parallel's count of draws")
        _generator(args[2])
        return signature(types.none, args[0], types.int64, args[2])


class _DrawOutsideTheKernel(AbstractTemplate):
    """``T.rng_*`` that the front end did not rewrite: in a helper compiled as a device
    function (one whose value the kernel uses in an expression)."""

    def generic(self, args, kws):
        raise errors.TypingError(
            f"T.{self.key.__name__} in a helper compiled by itself (its value used in an "
            f"expression): a random stream is the kernel's; call the helper as a statement "
            f"(it is then inlined into the kernel), or draw in the kernel and pass the value")


for _fn in (T.rng_init, T.rng_rand, T.rng_rand_float):
    infer_global(_fn)(type(f"{_fn.__name__}_outside", (_DrawOutsideTheKernel,), {"key": _fn}))
