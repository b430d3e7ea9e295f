"""The runtime: what happens when a kernel is called.

``kernel.py`` is ``@tilejit.kernel`` (binding arguments, choosing the target, the
in-memory specialization cache), ``arguments.py`` describes call arguments as types,
``host.py`` runs the argument checks and the host program,
``fastlaunch.py`` the generated hot path of a cached launch, ``cuda_driver.py`` and
``tensor_maps.py`` the CUDA driver, ``disk_cache.py`` and ``kernel_cache.py`` the disk
cache in front of the compiler. Imports the compiler and the simulator only when a
kernel is first compiled or simulated (a process whose kernels are cached never
imports Numba). May import every layer below it; never tuning or the TileLang doors.
"""
