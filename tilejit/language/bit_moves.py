"""TileLang's explicit loads and stores of 32 to 256 bits (``tilelang.language.builtin``'s
``ldg*``/``stg*`` for global memory, ``lds*``/``sts*`` for shared memory): raw bits
moved from the address of an element, whatever the dtype::

    val = T.ldg128(X[pid * 4:pid * 4 + 4])       # 16 bytes from &X[pid * 4]
    T.stg128(Y[pid * 4:pid * 4 + 4], val)        # the same 16 bytes to &Y[pid * 4]
    Y[pid] = T.reinterpret(T.ldg32(X[pid]), T.float32)
    Y[i:i + 4] = T.reinterpret(T.ldg128(X[i:i + 4]), T.float32x4)

The operand is an element or a region of a tensor (``ldg``/``stg``) or of a shared tile
(``lds``/``sts``): its first element's address, which must be aligned to the access's
size (on the GPU a misaligned one is a fault; the simulator reports it). A 32-bit load
is a ``uint32``; a wider one a tuple of ``uint32`` words (TileLang's ``uint32x2``,
``uint32x4``, ``uint32x8``), which ``T.reinterpret(value, T.float32x4)`` (any vector
dtype of as many bits) reads as elements and a store of the same width takes back.
``pred=`` (global memory only) skips the access where false: a load then gives 0.
In a kernel the front end rewrites each into one access of the GPU's vector width
(``frontend/bit_moves.py``: ``ld.global.v4.b32`` for 128 bits); called anywhere else
they raise."""
from __future__ import annotations

# TileLang's names: {name: (bits, memory, load)}
ACCESSES = {
    **{f"ldg{b}": (b, "global", True) for b in (32, 64, 128, 256)},
    **{f"stg{b}": (b, "global", False) for b in (32, 64, 128, 256)},
    **{f"lds{b}": (b, "shared", True) for b in (32, 64, 128)},
    **{f"sts{b}": (b, "shared", False) for b in (32, 64, 128)},
}


def _in_kernel_only(name):
    raise RuntimeError(f"T.{name} is an access of a kernel: it is only meaningful in the body "
                       f"of a `with T.Kernel(...)` block")


def _load(name):
    bits, memory, _ = ACCESSES[name]

    def load(src, pred=None):
        _in_kernel_only(name)
    load.__name__ = load.__qualname__ = name
    load.__doc__ = (f"{bits} bits from {memory} memory at the address of ``src`` (an element "
                    f"or a region's first element), aligned to {bits // 8} bytes: a "
                    + ("uint32" if bits == 32 else f"tuple of {bits // 32} uint32 words")
                    + (". ``pred``: where false, no load and 0." if memory == "global"
                       else "."))
    return load


def _store(name):
    bits, memory, _ = ACCESSES[name]

    def store(dst, value, pred=None):
        _in_kernel_only(name)
    store.__name__ = store.__qualname__ = name
    store.__doc__ = (f"``value`` ({'a uint32' if bits == 32 else f'{bits // 32} uint32 words'}"
                     f") as {bits} bits to {memory} memory at the address of ``dst``, aligned "
                     f"to {bits // 8} bytes" + (". ``pred``: where false, no store."
                                                if memory == "global" else "."))
    return store


ldg32, ldg64, ldg128, ldg256 = (_load(f"ldg{b}") for b in (32, 64, 128, 256))
lds32, lds64, lds128 = (_load(f"lds{b}") for b in (32, 64, 128))
stg32, stg64, stg128, stg256 = (_store(f"stg{b}") for b in (32, 64, 128, 256))
sts32, sts64, sts128 = (_store(f"sts{b}") for b in (32, 64, 128))

__all__ = list(ACCESSES)
