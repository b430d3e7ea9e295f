"""What an HSA code object says about its kernels: the AMDGPU metadata note read back.

A code object (``codegen/amdgpu.code_object``: an ELF shared object) carries one note
named "AMDGPU" of type ``NT_AMDGPU_METADATA`` (32), a MessagePack map (AMDGPU code
object V4/V5, "Code Object Metadata" in LLVM's AMDGPUUsage): ``amdhsa.kernels`` lists
each kernel with its arguments (offset, size and kind in the kernarg segment), the
kernarg segment's size, the LDS it uses (``.group_segment_fixed_size``), its VGPR and
SGPR counts and the largest work group it was compiled for. The HIP launcher
(``hip_driver.py``) packs a launch's arguments by these offsets, and tests check them
against what the compiler planned. Standard library only: the reader runs where no ROCm
and no MessagePack package is installed.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

NT_AMDGPU_METADATA = 32
SHT_NOTE = 7


class CodeObjectError(ValueError):
    pass


@dataclass(frozen=True)
class KernelArg:
    offset: int
    size: int
    kind: str           # .value_kind: global_buffer, by_value, hidden_* …


@dataclass(frozen=True)
class KernelInfo:
    name: str
    symbol: str
    args: tuple          # KernelArg, in order
    kernarg_size: int
    kernarg_align: int
    lds_bytes: int
    private_bytes: int
    vgprs: int
    sgprs: int
    max_threads: int
    wavefront: int
    agprs: int = 0
    vgpr_spills: int = 0
    sgpr_spills: int = 0

    @property
    def explicit_args(self) -> tuple:
        """The kernel's own parameters (the ``hidden_*`` ones the runtime fills are left
        out)."""
        return tuple(a for a in self.args if not a.kind.startswith("hidden_"))


def metadata(code_object: bytes) -> dict:
    """The metadata map of ``code_object`` (decoded MessagePack)."""
    for name, ntype, desc in _notes(code_object):
        if name == b"AMDGPU" and ntype == NT_AMDGPU_METADATA:
            value, end = _unpack(desc, 0)
            if not isinstance(value, dict):
                raise CodeObjectError("the AMDGPU metadata note is not a map")
            return value
    raise CodeObjectError("the code object has no AMDGPU metadata note")


def kernels(code_object: bytes) -> dict:
    """{kernel name: KernelInfo} of every kernel in the code object."""
    out = {}
    for k in metadata(code_object).get("amdhsa.kernels", []):
        args = tuple(KernelArg(int(a[".offset"]), int(a[".size"]), str(a[".value_kind"]))
                     for a in k.get(".args", []))
        out[k[".name"]] = KernelInfo(
            name=k[".name"], symbol=k.get(".symbol", k[".name"] + ".kd"), args=args,
            kernarg_size=int(k.get(".kernarg_segment_size", 0)),
            kernarg_align=int(k.get(".kernarg_segment_align", 8)),
            lds_bytes=int(k.get(".group_segment_fixed_size", 0)),
            private_bytes=int(k.get(".private_segment_fixed_size", 0)),
            vgprs=int(k.get(".vgpr_count", 0)), sgprs=int(k.get(".sgpr_count", 0)),
            max_threads=int(k.get(".max_flat_workgroup_size", 0)),
            wavefront=int(k.get(".wavefront_size", 64)), agprs=int(k.get(".agpr_count", 0)),
            vgpr_spills=int(k.get(".vgpr_spill_count", 0)),
            sgpr_spills=int(k.get(".sgpr_spill_count", 0)))
    return out


# -- ELF ------------------------------------------------------------------------------
def _notes(blob: bytes):
    """(name, type, descriptor) of every note in the ELF64 little-endian ``blob``."""
    if blob[:4] != b"\x7fELF" or blob[4] != 2 or blob[5] != 1:
        raise CodeObjectError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", blob, 0x3A)
    for i in range(shnum):
        base = shoff + i * shentsize
        sh_type, = struct.unpack_from("<I", blob, base + 4)
        if sh_type != SHT_NOTE:
            continue
        offset, size = struct.unpack_from("<QQ", blob, base + 0x18)
        pos, end = offset, offset + size
        while pos + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", blob, pos)
            pos += 12
            name = blob[pos:pos + namesz].rstrip(b"\0")
            pos += (namesz + 3) & ~3
            desc = blob[pos:pos + descsz]
            pos += (descsz + 3) & ~3
            yield name, ntype, desc


# -- MessagePack (the subset the metadata uses, and the rest of the format's types) ----
def _unpack(b: bytes, i: int):
    t = b[i]
    if t <= 0x7F:
        return t, i + 1
    if t >= 0xE0:
        return t - 0x100, i + 1
    if 0x80 <= t <= 0x8F:
        return _map(b, i + 1, t & 0x0F)
    if 0x90 <= t <= 0x9F:
        return _array(b, i + 1, t & 0x0F)
    if 0xA0 <= t <= 0xBF:
        n = t & 0x1F
        return b[i + 1:i + 1 + n].decode(), i + 1 + n
    simple = {0xC0: None, 0xC2: False, 0xC3: True}
    if t in simple:
        return simple[t], i + 1
    sized = {0xCC: "<B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h",
             0xD2: ">i", 0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}
    if t in sized:
        fmt = sized[t]
        return struct.unpack_from(fmt, b, i + 1)[0], i + 1 + struct.calcsize(fmt)
    lengths = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I", 0xC4: ">B", 0xC5: ">H", 0xC6: ">I"}
    if t in lengths:
        fmt = lengths[t]
        n, = struct.unpack_from(fmt, b, i + 1)
        start = i + 1 + struct.calcsize(fmt)
        raw = b[start:start + n]
        return (raw.decode() if t >= 0xD9 else raw), start + n
    if t in (0xDC, 0xDD, 0xDE, 0xDF):
        fmt = ">H" if t in (0xDC, 0xDE) else ">I"
        n, = struct.unpack_from(fmt, b, i + 1)
        start = i + 1 + struct.calcsize(fmt)
        return (_array if t in (0xDC, 0xDD) else _map)(b, start, n)
    raise CodeObjectError(f"MessagePack type byte {t:#x} is not one the metadata uses")


def _array(b, i, n):
    out = []
    for _ in range(n):
        v, i = _unpack(b, i)
        out.append(v)
    return out, i


def _map(b, i, n):
    out = {}
    for _ in range(n):
        k, i = _unpack(b, i)
        v, i = _unpack(b, i)
        out[k] = v
    return out, i
