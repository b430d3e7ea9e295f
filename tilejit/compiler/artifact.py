"""A compiled kernel as data: what the compiler produces and the disk cache holds
(``runtime/kernel_cache.py``). Importing this module does not import Numba."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CompiledKernel:
    name: str
    llvm_ir: str = ""
    ptx: str = ""
    shared_bytes: int = 0
    param_formats: list = field(default_factory=list)
    # per hidden tensor-map parameter (after the others): (argument position, dtype name,
    # itemsize, box extents, swizzle bytes) (passes/tma.py, runtime/tensor_maps.py)
    tensor_maps: list = field(default_factory=list)
    # threads per block at launch when the compiler added some (a warp-specialized
    # kernel's producer warpgroup: passes/warp_specialize.py); 0: the kernel's own
    block_threads: int = 0
    # T.sync_grid (passes/grid_sync.py): launched cooperatively, every block resident
    cooperative: bool = False
    # AMDGPU (codegen/amdgpu.py): the assembly and the HSA code object (ELF)
    asm: str = ""
    code_object: bytes = b""

    def launch_threads(self, threads: int) -> int:
        return self.block_threads or threads

