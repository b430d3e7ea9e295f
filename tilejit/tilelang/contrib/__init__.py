"""TileLang's ``tilelang.contrib``: the helpers its programs import (``nvcc``'s
compute-capability queries). Its source compilers (nvcc, NVRTC, hipcc) are not part of
tilejit, which emits PTX itself."""
