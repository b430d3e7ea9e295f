"""Front end: from a decorated Python function to the three programs tilejit runs.

``source.py`` parses the function and finds its launch (``with T.Kernel``);
``rewrite.py`` derives the device program (typed by Numba), the host program (grid and
outputs, run before each launch) and the simulator program; ``tile_operands.py`` makes
tile operations' subscript operands regions and element atomics their own calls (for the
compiler and the simulator alike); ``references.py`` lists what a function reads by
global or closure name (checked at a kernel's first compilation, digested by the disk
cache); ``attribute_chains.py`` folds the chains it reads through objects (``cfg.BLOCK``)
to their values before typing; ``persistent.py`` rewrites ``T.Persistent`` loops and
``T.PersistentTileScheduler`` objects into plain loops, ``host_queries.py`` makes
``driver.get_num_sms()`` in a body a compile-time value, ``explicit_sync.py`` finds the
mbarrier/TMA/``T.ws`` forms (lowered by ``passes/warp_roles.py`` for sm_90+). Binding
call arguments is the runtime's (``runtime/arguments.py``). May import ``language``,
``ir``, ``target``, ``errors``.
"""
