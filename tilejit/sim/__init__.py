"""The CPU simulator: the executable definition of the language's semantics.

``semantics.py`` is what each ``T.*`` operation means (numpy on whole tiles, one block
at a time), ``transform.py`` rewrites a kernel for whole-tile numpy execution,
``runtime.py`` holds the values it runs on (tensors with bounds-checked, masked access),
``runner.py`` runs the blocks of a launch one at a time.

How the language gets these meanings without importing the simulator:
``tilejit/language`` declares each operation once, as a function whose signature and
documentation say what it is and whose body calls ``_semantics.meaning("copy")(…)``;
importing this package installs ``semantics.MEANINGS`` into that table (``import
tilejit`` does so). So ``T.copy`` stays one object, the one the compiler's passes
recognise (``resolve_static(...) is T.copy``) and its typing is keyed on, and a
simulated kernel reaches the simulator's meaning however it names the operation: through
``T``, another alias of ``tilejit.language`` or a ``from … import copy``, inside an
``@T.macro`` (a plain Python call in simulation), or from a TileLang door that runs the
kernel eagerly. Nothing is bound per kernel. The names the front end inserts into the
device program are bound in the simulated program's namespace instead (``runner.py``):
``__tj_region`` to ``semantics.region``, ``__tj_atomic_*`` to ``semantics.SIM_ELEMENT``.
"""
from tilejit.language import _semantics as _declared
from tilejit.sim.async_copies import MEANINGS as _ASYNC_COPY_MEANINGS
from tilejit.sim.cluster import MEANINGS as _CLUSTER_MEANINGS
from tilejit.sim.math_intrinsics import MEANINGS as _MATH_INTRINSIC_MEANINGS
from tilejit.sim.roles import MEANINGS as _ROLE_MEANINGS
from tilejit.sim.scalar_math import MEANINGS as _SCALAR_MATH_MEANINGS
from tilejit.sim.semantics import MEANINGS as _MEANINGS
from tilejit.sim.sparse import MEANINGS as _SPARSE_MEANINGS
from tilejit.sim.warp import MEANINGS as _WARP_MEANINGS

_declared.install(_MEANINGS)
_declared.install(_ROLE_MEANINGS)     # mbarriers, T.tma_copy, T.ws (roles.py)
_declared.install(_WARP_MEANINGS)     # warp shuffles and reductions (warp.py)
_declared.install(_CLUSTER_MEANINGS)  # cluster ranks, multicast copies (cluster.py)
_declared.install(_SCALAR_MATH_MEANINGS)  # trigonometry, rounding, bit counts (scalar_math.py)
_declared.install(_MATH_INTRINSIC_MEANINGS)  # IEEE-rounded and fast math (math_intrinsics.py)
_declared.install(_SPARSE_MEANINGS)  # T.gemm_sp (sparse.py)
_declared.install(_ASYNC_COPY_MEANINGS)  # a thread's cp.async copies (async_copies.py)
