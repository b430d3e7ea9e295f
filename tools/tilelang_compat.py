"""Write docs/tilelang-compat.md: every public name of TileLang's ``tilelang`` and
``tilelang.language`` (``tilejit/language/compat.py`` lists them) marked supported,
supported with a difference, or not supported, read from tilejit itself (a name is
supported when ``tilejit.language`` / ``tilejit`` has it).

    python tools/tilelang_compat.py > docs/tilelang-compat.md

``tests/language/test_compat.py`` checks that the page is this script's output."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tilejit  # noqa: E402
import tilejit.language as T  # noqa: E402
from tilejit.language import compat  # noqa: E402
from tilejit.language.dtypes import DType  # noqa: E402

# the explicit synchronization forms (frontend/explicit_sync.py)
_EXPLICIT_SYNC = ("on the GPU for sm_90+ (`passes/warp_roles.py`: mbarriers, TMA, warpgroup "
                  "roles); the simulator runs the roles as coroutines")

# supported names that behave differently from TileLang's

LANGUAGE_DIFFERENCES = {
    "float4_e2m1fn": "a tensor holds it two a byte (element 2k in the low four bits: a uint8, "
                     "int8 or torch float4_e2m1fn_x2 tensor), read and written one element "
                     "at a time (T.copy to or from a whole shared tile or fragment is that "
                     "element loop; other tile operations on it are a CompileError); a tile "
                     "holds one a byte; conversions round to nearest even and saturate at "
                     "±6, NaN becomes +6",
    **{name: "no vector dtypes: a packed value is the two lanes of a statement indexed with "
             "T.Ramp(base, stride, 2) (a name bound to the Ramp reads as it); each lane "
             "rounded once to nearest (bfloat16 fma2: float32's fma rounded again)"
       for name in ("add2", "sub2", "mul2", "fma2", "max2", "min2", "abs2")},
    "rng_init": "cuRAND's Philox (the default), XORWOW and MRG32k3a (`generator=`; one "
                "generator a kernel); the words and uniforms are cuRAND's bit for bit, the "
                "normals within a few ulp (this compiler's log, sqrt, sin and cos)",
    "rng_rand": "in a T.Parallel an iteration's draws are keyed by the iteration (row-major "
                "index × words per iteration past the thread's position), not by the order a "
                "thread meets them: the same numbers whatever the layout; in a thread's own "
                "code, cuRAND's sequence",
    "rng_rand_float": "as `rng_rand`; normals within a few ulp of the exact Box–Muller "
                      "value of cuRAND's words (cuRAND's own float normal uses "
                      "`__sincosf`, about 2^-21 off), and a T.Parallel's normal is the "
                      "first of its Box–Muller pair",
    "tma_store_arrive": "the compiler commits its TMA stores itself: a statement taken out",
    "tma_store_wait": "the compiler waits for its TMA stores where their shared tiles are "
                      "written again and before the kernel ends: a statement taken out",
    "__ldg": "the load `x[i]` (LLVM emits `ld.global.nc` where a tensor is read-only and not "
             "aliased; not forced where it is not)",
    "make_tensor": "`T.make_tensor(ptr, shape, dtype, strides=None)` of a `T.ptr` parameter or "
                   "a pointer table's element; its copies are element loads (no cp.async or "
                   "TMA); the simulator reads host memory at the address (checked to be "
                   "mapped; not bfloat16 or float8), or on a GPU machine a CUDA "
                   "allocation's through a host copy written back after the launch",
    "import_source": "`None` only (what TileLang's programs pass when they call no extern "
                     "function); CUDA C++ source is a CompileError: tilejit compiles no C++",
    "match_buffer": "an eager program's statement `A = T.match_buffer(A, shape, dtype)` "
                    "(a `T.ptr` parameter, in a compile-time branch or not) is the "
                    "annotation `A: T.Tensor[shape, dtype]` there; `strides=` and TVM's "
                    "other buffer fields, or a use in a kernel, are errors saying so",
    "int4": "a tensor holds int4 two a byte (an int8 or uint8 torch tensor, element 2k "
            "in the low four bits, as TileLang's programs pack them); a tile holds them one "
            "a byte, as int8 (its `.dtype` says int8), and T.gemm of int4 tiles runs on "
            "int8 tensor cores (wgmma or mma.sync .s8, not the .s4 forms); `\"uint4\"` "
            "(`T.dtype(\"uint4\")`) the same, zero-extended, its tiles uint8 (no gemm)",
    "annotate_compile_flags": "kept as the function's attribute; flags of NVIDIA's C++ "
                              "compiler, which tilejit does not run, so they change nothing",
    "annotate_pass_configs": "a statement at the top of the function's body, its argument "
                             "known when the function is defined; compile()'s pass_configs "
                             "apply over it",
    "annotate_l2_hit_ratio": "one tensor parameter (a launch holds one L2 access policy "
                             "window) and a ratio known when the kernel is defined; the "
                             "window is the launch's own (`cuLaunchKernelEx`), the "
                             "persisting set-aside raised towards the tensor's bytes and "
                             "left so (TileLang resets it after each launch); cluster and "
                             "cooperative launches and the simulator leave it out",
    "ptr": "a `T.ptr` parameter takes a tensor (its data pointer; the kernel runs where it "
           "lives) or an int address, in a `@T.prim_func` and in an eager `@tilejit.jit` "
           "program (`A = T.make_tensor(A, (M, K), dtype)` binding the name again); "
           "`T.Tensor([G], T.ptr)` is an int64 tensor of addresses",
    "print": "a buffer prints as `msg[i, j] = value` lines (the block and thread before them "
             "on the GPU); a global tensor from one thread (TileLang: every thread); a "
             "parameter needs a `T.Tensor` annotation to print whole; the simulator reports "
             "an uninitialized tile printed",
    "alloc_reducer": "a fragment; each `T.Parallel` loop that folds into it (`r[i] += x`, "
                     "`r[i] = T.max/T.min(r[i], x)`) gets a tile of its own, reduced into "
                     "`r` after the loop, so `r` holds the reduced values before "
                     "`T.finalize_reducer` too; `replication` is not used",
    "finalize_reducer": "checks `batch` only: the reducer holds its reduced values from the "
                        "end of the folding loop; with `dst` (reducer v2) they are copied "
                        "into `dst`",
    "reducer_init": "fills the reducer with `init` (or the op's identity), so `init` counts "
                    "once per output; the epoch rules (init before updates, one finalize in "
                    "the same block or a branch inside it, none in a loop the init is not "
                    "in, no other reads or stores while open) are compile errors",
    "reducer_update": "the fold `r[i] += x` / `T.max` / `T.min` of the reducer's op, in a "
                      "`T.Parallel` loop; ops sum, max and min (no bitwise ops)",
    "reduce_sum": "`batch` is checked (a positive integer) and has no effect: a reduction "
                  "across threads is warp shuffles",
    "float8_e4m3": "the OCP e4m3 (largest 448, no infinities), torch's `float8_e4m3fn`; "
                   "conversions to it saturate (PTX `cvt.rn.satfinite`); `T.gemm` on it runs "
                   "on wgmma (sm_90a, K-major operands; a tile of fewer than 64 rows a "
                   "warpgroup is refused there, where TileLang falls back to mma.sync) or "
                   "sm_89's mma.sync; the simulator "
                   "holds it in float32 (ml_dtypes rounding)",
    "float8_e4m3fn": "the same dtype as `T.float8_e4m3`",
    "bfloat16": "arithmetic on bfloat16 values is carried out in float32 and rounded when "
                "stored (TileLang's `bfloat16_t` rounds after each operation), and a Python "
                "float meeting a bfloat16 value stays float32 (a float16 value's becomes "
                "float16, as in TileLang): the simulator and the GPU agree, TileLang may "
                "differ by an ulp of bfloat16",
    "float8_e5m2": "as `T.float8_e4m3`, with e5m2's range (largest 57344) and infinities: "
                   "a conversion past the largest finite value gives infinity, as torch's",
    "dtype": "the class of tilejit's dtypes, a `str` subclass: `T.dtype(x)` returns the "
             "dtype `x` names (a name, a torch or numpy dtype); `bits`, `bytes`, "
             "`itemsize`, `as_torch()`; no `lanes` or `type_code` (no vector dtypes)",
    "tfloat32": "is `T.float32` (its name is `\"float32\"`, not `\"custom[tfloat32]\"`): "
                "float32 storage, and a float32 `T.gemm` already runs on tf32 tensor cores "
                "(operands rounded to nearest)",
    "Var": "the class of tilejit's shape symbols (`isinstance(M, T.Var)` for `T.const` and "
           "`T.dynamic` symbols); `T.Var(name, dtype)` makes a run-time extent, as "
           "`T.dynamic`. Symbols take `+ - * // %` and comparisons with ints and other "
           "symbols (`T.ceildiv(m, 128)`): in a `T.prim_func`'s annotations an extent linear "
           "in one symbol (`n * 4`, `n + 1`) gives `n` from the tensor's size, other extents "
           "(`m // 2`) are checked once their symbols are known; a closure value computed "
           "from symbols is computed in the kernel from the tensors' sizes. Python cannot "
           "branch on a symbol, divide it with `/` or use it as an `int` (a TypeError naming "
           "it). As a `@T.macro` parameter's annotation it is `T.Ref` (TileLang's older "
           "spelling)",
    "Kernel": "`threads` any count in [1, 1024]; with a count that is not a multiple of 32 "
              "T.gemm and the warp reductions, votes and matches are a compile error (they "
              "need whole warps), and a shuffle runs with its mask cut to the lanes the "
              "last warp has (one reading a lane the warp lacks is an error in the "
              "simulator: undefined on the GPU); "
              "no grid extent is one block; no cluster dimensions; a grid extent that is 0 at "
              "the call (an empty input) is an error naming the extent (EmptyGridError), as "
              "TileLang raises and CUDA's launch refuses: skip the call for an empty input",
    "get_thread_binding": "in a kernel's `with T.Kernel` body (not in a `@T.macro`); "
                          "dimensions 1 and 2 need `threads=(x, y[, z])` written as a tuple "
                          "in `T.Kernel`. The simulator runs such a block lane-wise: tile "
                          "operations under a thread-dependent branch, thread-dependent loop "
                          "bounds and `T.alloc_local` tiles in tile operations are not "
                          "simulated (a `ThreadCodeError`)",
    "get_thread_bindings": "as `T.get_thread_binding`",
    "attr": "only the thread all-reduce idiom: `with T.attr(T.comm_reducer(lambda x, y: "
            "<expr>, [identity]), \"reduce_scope\", ...): T.evaluate(T.tvm_thread_allreduce("
            "T.uint32(1), value, cond, result, *thread_vars, dtype=\"handle\"))`, one value, "
            "thread variables bound by `T.get_thread_binding(d)`; rewritten into a shared "
            "scratch, barriers and a sequential fold (`frontend/thread_allreduce.py`); and "
            "`with T.attr(..., \"async_scope\", 1):`, whose copies run as written (plain "
            "copies, not cp.async); any other use is a compile error at its line",
    "If": "`with T.If(cond):` holding `with T.Then():` and `with T.Else():`, or `with "
          "T.If(cond), T.Then():`, is Python's `if`/`else` (`frontend/tir_branches.py`)",
    "Then": "see `T.If`", "Else": "see `T.If`",
    "func_attr": "TVM's function attributes (`{\"tir.noalias\": True}`): the statement is "
                 "dropped (nothing tilejit uses; also `T.And`/`T.Or`/`T.Not` of TIR are "
                 "`and`/`or`/`not`)",
    "tvm_storage_sync": "`\"shared\"` and `\"shared.dyn\"` are `T.sync_threads()`, "
                        "`\"warp\"` is `T.sync_warp()`; another scope (`\"global\"`) is a "
                        "compile error (`T.sync_grid()` in a cooperative launch is tilejit's)",
    "comm_reducer": "only the thread all-reduce idiom (see `T.attr`): one value, "
                    "`lambda x, y: <expr>` (or a lambda passed in) and `[identity]` written "
                    "`T.cast(v, dtype)` or `dtype(v)`",
    "tvm_thread_allreduce": "only the thread all-reduce idiom (see `T.attr`): "
                            "`T.uint32(1)` (one value), every thread of a group gets the "
                            "result, folded in thread order in the identity's dtype",
    "evaluate": "a statement of its own, `T.evaluate(x)`, is the expression `x` evaluated "
                "and dropped; and the thread all-reduce idiom (see `T.attr`)",
    "reinterpret": "a bitcast between integer and float dtypes of one width; TileLang's "
                   "deprecated `T.reinterpret(dtype, value)` with its DeprecationWarning; "
                   "`T.reinterpret(T.uint64(0), dtype=\"handle\")` only as the thread "
                   "all-reduce idiom's `reduce_scope` value (see `T.attr`)",
    "get_thread_extent": "as `T.get_thread_binding`",
    "get_thread_extents": "as `T.get_thread_binding`",
    "thread_binding": "an expression, or a loop whose body the threads below `stop - start` "
                      "run; a kernel with no `T.Kernel` whose body opens with these loops "
                      "(or `T.launch_thread` statements) is launched with the extents they "
                      "bind, one extent per axis (`frontend/raw_launches.py`)",
    "async_copy": "a global region into a shared tile; the tile may be used only after a "
                  "`T.ptx_wait_group(n)` that covers its copy (each copy one group), checked "
                  "along every path (a use while it may be in flight is a compile error; a "
                  "tile is in flight as a whole, so double buffering in two halves of one "
                  "tile is refused: use two tiles); a program that waits is compiled as "
                  "`T.copy` (cp.async, or pipelined in `T.Pipelined`), its waits taken out",
    "launch_thread": "`T.launch_thread(\"threadIdx.x\", n)` is the index along that axis: "
                     "in a `T.Kernel` body `n` must be T.Kernel's own extent; opening a "
                     "kernel with no `T.Kernel`, the statements make the launch (see "
                     "`T.thread_binding`); TVM's `T.env_thread` variables are not taken",
    "atomic_add": "`use_tma=True` accepted, the region added by ordinary atomics (no TMA "
                  "reduction); `memory_order=` by fences around a relaxed atomic; "
                  "element and region forms; an element atomic in a `T.Parallel` over a "
                  "fragment every thread holds (a reduction's result, a gemm operand in "
                  "registers) is a `CompileError` (each thread would apply it): use the "
                  "region form",
    "atomic_max": "`memory_order=` by fences", "atomic_min": "`memory_order=` by fences",
    "atomic_or": "int32, int64, uint32 and uint64 elements of a tensor or shared tile, as "
                 "TileLang's (no region form); `memory_order=` by fences",
    "atomic_addx2": "two consecutive elements (the first, or a slice of them) as two "
                    "element atomics, not one vector atomic: the two are not added as one; "
                    "`P[i:i + 2] = T.atomic_addx2(..., return_prev=True)`, where "
                    "each element's previous value is its own; the whole-buffer form "
                    "`T.atomic_addx2(Dst, Val)` is the region atomic of the two tensors",
    "atomic_addx4": "four consecutive elements (the first, or a slice of them) as four "
                    "element atomics, not one vector atomic: the four are not added as one; "
                    "`P[i:i + 4] = T.atomic_addx4(..., return_prev=True)`, where "
                    "each element's previous value is its own; the whole-buffer form "
                    "`T.atomic_addx4(Dst, Val)` is the region atomic of the two tensors",
    "atomic_load": "one element of a tensor or shared tile; 32- and 64-bit dtypes; "
                   "`memory_order=` by fences around a relaxed load",
    "atomic_store": "one element of a tensor or shared tile; 32- and 64-bit dtypes; "
                    "`memory_order=` by fences around a relaxed store; outside a T.Parallel "
                    "the block stores once",
    "alloc_fragment": "an index is checked against the shape declared: a T.Parallel whose "
                      "index runs past a fragment's extent is a CompileError naming both "
                      "(TileLang lays the fragment out after the loop and lets it, as its "
                      "attention-sink backward examples do with a (heads,) fragment and a "
                      "block_M loop)",
    "copy": "`coalesced_width=`, `disable_tma=`, `eviction_policy=`, `annotations=` and "
            "`loop_layout=` are accepted and not used (tilejit chooses the copy's form); "
            "regions whose extents differ (beyond dimensions of extent 1 that one side "
            "leaves out) are a CompileError naming both: TileLang picks one side's "
            "extents by an internal rule its documentation warns about",
    "gemm": "takes `wg_wait=`, not `mbar=`; `k_pack` accepted; B in a fragment is copied into "
            "a shared tile before the tensor cores read it; `clear_accum` may be a run-time "
            "condition",
    "gemm_sp": "2:4 (float32: 1:2) sparse A with TileLang's natural row-major metadata; "
               "16-bit A (not transposed, K a multiple of 32) runs on the sparse tensor "
               "cores (wgmma.mma_async.sp on sm_90a, mma.sp elsewhere from sm_80); 8-bit "
               "and float32 A, and A transposed, run on the dense tensor cores after "
               "expanding A in shared memory (the dense product's time); A, E or B in "
               "registers go through shared memory; metadata the sparse tensor cores "
               "leave undefined is an error in the simulator",
    "pdl_sync": "`griddepcontrol.wait` on sm_90+ (nothing before); tilejit launches "
                "without the early-launch attribute, so the kernels never overlap: the "
                "result is the same, the overlap is not there",
    "pdl_trigger": "`griddepcontrol.launch_dependents` on sm_90+ (nothing before); "
                   "tilejit launches without the early-launch attribute, so the next kernel "
                   "starts when this one ends",
    "let": "the statement `T.let(v, value)` (after `v = T.int32()`) is the assignment "
           "`v = value`; the expression form `T.let(v, value, body)` is not built",
    "Ramp": "in a statement (an index or a value), the statement once per lane "
            "(`base + stride * lane`); all vectors of a statement of one lane count; no "
            "vector registers are formed beyond what the per-lane accesses give",
    "Broadcast": "in a statement with `T.Ramp` indices, the value in every lane",
    "Parallel": "`loop_layout=` (a `T.Fragment` over the loop's extents, checked) places "
                "each iteration on its thread and local index where that shows in the "
                "results: the loop indexes fragments (they take its layout), calls a warp "
                "primitive, or the kernel reads the thread index; in a loop of none of "
                "these, an element map over shared or global memory, it is a schedule "
                "tilejit replaces with its own (16-byte accesses; the results are the "
                "same). A replicated layout's warp primitives are not simulated. "
                "`coalesced_width=`, `prefer_async=` and `annotations=` are scheduling "
                "hints not used; a `T.Fragment` may be a compile-time argument",
    "Pipelined": "`order=`/`stage=` with one entry per statement schedule the loop; with "
                 "`group=` (entries per group of TileLang's lowered statements) the three "
                 "are a hint not used: the copies to run ahead are found as without them "
                 "(the results are the same)",
    "alloc_barrier": _EXPLICIT_SYNC, "mbarrier_arrive": _EXPLICIT_SYNC,
    "mbarrier_wait_parity": _EXPLICIT_SYNC, "tma_copy": _EXPLICIT_SYNC, "ws": _EXPLICIT_SYNC,
    "WarpSpecialize": _EXPLICIT_SYNC,
    "prim_func": "parameters are `T.Tensor`/`T.Buffer` annotated tensors, scalars (`n: "
                 "T.int32`, passed at each call) or `T.ptr` addresses; no handle "
                 "parameters",
    "macro": "a `T.Kernel` inside a macro works when the kernel calls the macro as a "
             "statement (or `return macro(...)`) with names or constants as arguments, "
             "the macro in the kernel's file",
    "call_extern": "CUDA's math functions by their C names only (`fmaxf`, `powf`, `exp2f`, "
                   "`__fdiv_rn`, ...: `language/tvm_calls.CUDA_MATH`), as tilejit's function of "
                   "the same meaning cast to the dtype; tilejit emits PTX and links no C, so "
                   "another name (a program's own CUDA source) is refused at the call",
    "tvm_warp_shuffle": "`T.shfl_sync(value, lane, width, mask)`; warp_size must be 32",
    "tvm_warp_shuffle_down": "`T.shfl_down(value, delta, width, mask)`; warp_size must be 32",
    "tvm_warp_shuffle_up": "`T.shfl_up(value, delta, width, mask)`; warp_size must be 32",
    "tvm_warp_activemask": "`T.activemask()` as a uint32",
    "alloc_buffer": "`T.alloc_buffer(shape, dtype, scope=...)` is the allocation its scope "
                    "names: \"global\" (the default) `T.alloc_global` (a scratch tensor the "
                    "launches share, before the first `T.Kernel`), \"shared\"/\"shared.dyn\" "
                    "`T.alloc_shared`, \"local\" `T.alloc_local`, \"local.fragment\" "
                    "`T.alloc_fragment`; TVM's other arguments (`data`, `strides`, ...) and "
                    "scopes are refused at the call",
    "Ref": "a `@T.macro` parameter's annotation: the argument, a `T.alloc_var` name or an "
           "element `buf[i]`, is substituted for the parameter (the macro is inlined), so "
           "its element indices are evaluated where the macro reads them, not once at "
           "the call",
    "Tensor": "`T.Tensor(shape, dtype)`; the dtype defaults to float32; it takes a tensor "
              "of any strides (TileLang's wants contiguous ones); in a kernel's body "
              "`T.Tensor(shape, dtype, X.data)` is `T.view(X, shape, dtype)`",
    "index_to_coordinates": "in a kernel the shape is a tuple written in the call or one "
                            "of numbers the program holds (not a tensor's `.shape`); a "
                            "tuple of the coordinates (TileLang: a list)",
    "annotate_safe_value": "one value per tensor in a kernel (TileLang scopes it to the "
                           "enclosing block), written before the tensor's first use and "
                           "not under a loop or a run-time condition; the copies from the "
                           "tensor run as element loops (no TMA or cp.async)",
    "StridedTensor": "on a `@T.prim_func` parameter, or annotating a `@tilejit.jit` "
                     "program's tensor (its signature or body); a stride symbol takes the "
                     "tensor's stride at run time (it is not a compile-time value); a "
                     "dimension of extent 1 may have any stride",
    "max": "a NaN operand is ignored (PTX `max`)", "min": "a NaN operand is ignored",
    "sin": "float32 and the half types (computed in float32), within 1 ulp over the whole "
           "range; float64 is not supported", "cos": "as `T.sin`", "tan": "as `T.sin`",
    **{name: "float32 and the half types (computed in float32); float64 is a CompileError "
             "naming it" for name in ("asin", "acos", "atan", "sinh", "cosh", "asinh",
                                      "acosh", "atanh", "atan2", "fmod", "hypot")},
    "popcount": "the count as an int32", "clz": "the count as an int32",
    "unroll": "a sequential loop (LLVM decides the unrolling)",
    "Unroll": "as `T.unroll`",
    "cast": "`round=` '' or 'rn' (to nearest even, tilejit's conversion), 'rz', 'rp', 'rm' "
            "(TileLang reserves them and rounds to nearest: so does tilejit, with a warning) "
            "and `sat=` (TileLang applies it to stochastic rounding only) are taken; "
            "stochastic rounding ('rs' with `rbits=`) is refused by name",
    "parallel": "TVM's parallel loop, laid out as TileLang lays it out: as `T.Parallel` "
                "(a perfect nest of them as one loop of their extents; a start offsets the "
                "index)",
    "vectorized": "a sequential loop (LLVM decides the vectorization)",
    "Vectorized": "as `T.vectorized`",
    "annotate_layout": "a `T.Layout` for a shared tile: one equal to a swizzle tilejit knows "
                       "takes its place (ldmatrix, TMA, wgmma read it), any other injective "
                       "map is addressed through its function (the tile's storage grows to "
                       "the indices it reaches) and a `T.gemm` reading it runs on mma.sync; "
                       "tilejit's own `tilejit.layouts` are taken too. A "
                       "`T.Fragment` for a fragment (see `Fragment`). A `T.Layout` for a "
                       "tensor parameter says where the host finds each element: its "
                       "accesses go through the function (TileLang's dQ layout)",
    "Fragment": "`forward_thread_fn` (with `replicate`'s `rep`) and `forward_index_fn`, or "
                "`forward_fn` giving `(thread, index)`; no index function: each element's "
                "rank in its thread, row-major; `repeat`, `replicate`, `get_thread_size`, "
                "`map_forward_thread`, `is_equal` (fragments of different shapes are unequal; "
                "TileLang calls them equal), `expand` (a `Layout` of the local index). Thread "
                "and local index must be sums of "
                "mixed-radix digits of each index (TileLang's fragments are), element 0 on "
                "thread 0 at index 0, local indices dense; threads below the kernel's, one "
                "element per (thread, index) (checked by the compiler and the simulator). A "
                "`T.gemm` accumulator's annotation must be the gemm's own layout (else a "
                "`CompileError`); `T.copy`/`T.Parallel` to a fragment of another fixed layout "
                "go through shared memory; fragments indexed by hand with the thread index "
                "are not built; `condense_rep_var`, `inverse`, `thread`/`index` (TVM "
                "expressions) are not built",
    "Layout": "`forward_fn` built from Python's arithmetic and bit operators on the indices, a "
              "bijection onto the tile's elements (checked by the compiler and the "
              "simulator); `expand`, `repeat(dim, factor)`, `inverse` (by table: an annotated "
              "tile takes it only where it equals a layout tilejit knows), `is_equal` "
              "(equal values at every index where TileLang compares expressions), "
              "`get_input/output_shape`, `map_forward_index`/`__call__`; where TileLang "
              "returns TVM objects: `get_forward_index` the function, "
              "`get_linearized_forward_index` an `IndexFunction` (callable, `==` over the "
              "shape), `get_forward_vars` `(name, extent)` pairs; `==` is identity, as "
              "TileLang's; `index`, `reshape` are not built",
    "get_swizzle_layout": "TileLang's current form: `(column atom, row, column)`, "
                          "`swizzle_bytes=` 32, 64 or 128",
    "make_mma_swizzle_layout": "as TileLang's, on `get_swizzle_layout`",
    "PersistentTileScheduler": "its methods become scalar code; no clusters; num_workers "
                               "defaults to the grid's x extent (TileLang: the SM count)",
    "ClusterKernel": "at most 8 blocks per cluster; each grid extent a multiple of the "
                     "cluster's; sm_90 and newer",
    "copy_cluster": "global → shared multicast (`cluster_mask=`) only, every block of the mask "
                    "naming the same region (the simulator checks); multicast by TMA in a "
                    "warp-specialized wgmma pipeline on sm_90a, a copy per block elsewhere; "
                    "no `dst_block=`/`remote_barrier=`",
    "cluster_sync": "the simulator runs a cluster's blocks one after another, lower ranks "
                    "first: data handed through a global tensor from a higher rank to a "
                    "lower one across the barrier is not seen there",
    "cluster_arrive": "as `T.cluster_sync`", "cluster_arrive_relaxed": "as `T.cluster_sync`",
    "cluster_wait": "as `T.cluster_sync`",
    "symbolic": "deprecated (a `DeprecationWarning`, as in TileLang): `T.dynamic`",
    "sync_threads": "`T.sync_threads()` every thread must reach (a `CompileError` under a "
                    "thread-dependent branch; among a `T.Parallel` body's statements the "
                    "loop is cut in two there); `T.sync_threads(id, count)`: named barriers "
                    "1…15 not used by tilejit in the kernel (NVPTX only); the simulator "
                    "counts the threads reaching each (whole warps) in per-thread code, "
                    "whole warpgroup roles between `T.ws` roles",
    "SharedBuffer": "an annotation of a `@T.macro`'s parameter (the macro is inlined and uses "
                    "the tile it is given; its shape and dtype are not checked against it); "
                    "on a kernel parameter a `TypeError`",
    "FragmentBuffer": "as `T.SharedBuffer`", "LocalBuffer": "as `T.SharedBuffer`",
    "loop_break": "Python's `break` of the loop around it; in a `T.Parallel` loop a "
                  "`CompileError` (its iterations run on the threads at once)",
    "sync_grid": "every thread of every block must reach it: not inside a `T.Pipelined` "
                 "loop nor in a `T.ws` role; among a `T.Parallel` body's statements "
                 "(TileLang's own test) the loop is cut in two there, every iteration's "
                 "statements before it running first (under an `if` of the body a "
                 "`CompileError`); CUDA only; the launch is "
                 "cooperative and a grid larger than the device holds at once is a "
                 "`ValueError` before it runs; the simulator runs the blocks in turns between "
                 "barriers (a block that skips one: `DeadlockError`)",
    "named_barrier_arrive": "simulated between `T.ws` warpgroup roles only (a role arrives "
                            "as its 128 threads); in per-thread code a `ThreadCodeError` in "
                            "the simulator",
    "wgmma_gemm": "`T.gemm`: wgmma on sm_90a where the operands allow, else mma.sync (not an "
                  "error); it waits where the products are first needed",
    "wgmma_gemm_sp": "`T.gemm_sp` (its difference too); it waits where the products are "
                     "first needed",
    "wait_wgmma": "a no-op: every gemm waits where its products are first needed",
    "im2col": "a `T.Parallel` loop of ordinary loads into `col` (a whole shared tile), not "
              "TMA's im2col mode; zeros past the last image and the last filter tap too; "
              "`eviction_policy`, `annotations` not used",
    "c2d_im2col": "as `T.im2col` (deprecated, with a `DeprecationWarning`)",
    "float8_e8m0fnu": "a storage dtype (MX scales): casts round as torch converts (the "
                      "sign dropped, the exponent rounded up from half a mantissa, past "
                      "2^127 NaN); not a gemm operand; its vector forms are not built",
}
TILELANG_DIFFERENCES = {
    "transform": "`simplify_prim_func` (returns the program: tilejit simplifies while "
                 "lowering) and `PassConfigKey`; TVM's passes (`ThreadSync`, `Simplify`, ...) "
                 "are refused by name",
    "engine": "`engine.callback`'s post-processing hooks import and refuse to register "
              "(tilejit emits PTX); the TVM lowering engine (`engine.lower`) is not built",
    "cuda": "`tilelang.cuda.intrinsics`, the hand-written MMA path (`TensorCoreIntrinEmitter`, "
            "its layout helpers, `make_mma_swizzle_layout`), and `tilelang.cuda.language`, the "
            "CUDA dialect (`from tilelang.cuda import language as T`: tilejit's language "
            "itself); the rest of TileLang's CUDA backend package is refused by name",
    "contrib": "`contrib.nvcc`'s compute-capability queries (`get_target_compute_version`, "
               "`have_tensorcore`, ...); the source compilers (nvcc, NVRTC, hipcc, cc) are "
               "refused by name",
    "tileop": "`tileop.base.GemmWarpPolicy` (`T.GemmWarpPolicy`, which programs import from "
              "there); the tile operators themselves (TVM nodes: `Gemm`, `GemmSP`) are refused "
              "by name",
    "jit": "eager and classic styles; `target` picks the GPU or the simulator by where the "
           "tensors live; `execution_backend` and other TVM options are accepted and ignored",
    "compile": "returns tilejit's compiled kernel; `get_kernel_source()` gives PTX, not CUDA C",
    "par_compile": "`compile` of each prim_func in turn (device code compiles at the first "
                   "call; `@tilejit.autotune` is what compiles in parallel processes); "
                   "`ignore_error` gives None (and a warning) for a prim_func that fails "
                   "to build; an error in its device code shows at its first call",
    "autotune": "`configs`, `warmup` and `rep` (numbers of calls, as TileLang's "
                "`n_warmup`/`n_repeat`), `timeout` (100 s by default, as TileLang's: skips "
                "a config whose timing would take longer); explicit tuned values skip the "
                "tuning; a classic factory's `ref_prog`, `supply_prog`, `supply_type`, "
                "`rtol`/`atol`, `max_mismatched_ratio`, `skip_check`, `manual_check_prog`, "
                "`cache_input_tensors`, `early_stop` and `early_stop_factor` act (and "
                "`AutoTuner.run(early_stop=...)`'s); simulation picks the first "
                "config that compiles; the tuned kernel has `config`, `latency` (ms; NaN in "
                "simulation) and `ref_latency`",
    "Profiler": "made by `kernel.get_profiler(tensor_supply_type=...)`; `func` (the kernel), "
                "`assert_allclose` (the reference first, dtypes checked, None outputs "
                "skipped), `do_bench` (TileLang's milliseconds and estimate; `backend="
                "\"cupti\"` the kernels' own time from the CUDA profiler, \"cudagraph\" "
                "CUDA events; `dynamic_symbolic_constraints={'m': ...}` sizes symbolic inputs "
                "by symbol name; `device` accepted and not used; a simulated kernel is "
                "timed by one call), `run_once`, "
                "`input_tensors`",
    "profiler": "`do_bench` as the Profiler's (TileLang's `tilelang.profiler.do_bench`)",
    "PassConfigKey": "the keys tilejit reads (fast math, dump IR, TMA/wgmma/warp "
                     "specialization off, safe memory access off) act; the others are "
                     "accepted with a warning",
    "carver": "`carver.arch.driver` (`get_num_sms()`, the device limits), `carver.arch.CUDA` "
              "(`get_arch`, `auto_infer_current_arch`, the `is_*_arch` tests; `CDNA` an "
              "error to make) and the templates `MatmulTemplate`, `GEMVTemplate` (its config "
              "`BLOCK_N`, `reduce_threads`), `FlashAttentionTemplate`, "
              "`ElementwiseTemplate`, `GeneralReductionTemplate` (any structure of "
              "\"S\"/\"R\" axes: the spatial extents multiply into rows, the reduced into "
              "the row length), as `carver.<name>` and `carver.template.<name>` "
              "(`recommend_hints`, `get_hardware_aware_configs`) with tilejit's own search, "
              "not TVM's roller; "
              "a hint has the roller's `block`, `warp`, `rstep`, `pipeline_stage` and "
              "`rasterization_plan` (`carver.roller.rasterization.NoRasterization`); "
              "`equivalent_function()` is a torch reference, not a PrimFunc",
    "JITKernel": "a class for `isinstance` and annotations: what `tilejit.compile` and an "
                 "eager program's `.compile(...)` return are its subclasses; "
                 "`JITKernel(prim_func, out_idx=..., target=...)` compiles as "
                 "`tilelang.compile` (`from_database` and `backend_context` are refused)",
    "testing": "`do_bench`, `torch_assert_close`, `set_random_seed`, `main`, the "
               "performance-regression harness `process_func` and `regression` (results "
               "printed as `name: latency`; no environment filter, `only=` instead), and the "
               "decorators `requires_cuda`, `requires_cuda_compute_version[_ge/_gt/_eq/_lt/_le]`, "
               "`requires_package`, `requires_llvm` (AMD and Metal ones skip)",
    "utils": "the tensor helpers (`TensorSupplyType`, `get_tensor_supply`, "
             "`torch_assert_close`)",
    "dtypes": "tilejit's dtypes module",
    "language": "see the table below",
    "layout": "`Layout`, `make_swizzled_layout` (row-major where TileLang pads rows), "
              "`make_full/half/quarter_bank_swizzled_layout`, `make_linear_layout`, "
              "`get_swizzle_layout`, `make_mma_swizzle_layout`, `Fragment`, the submodules "
              "`layout`, `fragment`, `swizzle`; no "
              "`make_volta/wgmma/tcgen05mma_swizzled_layout`. For TileLang's layout tests: "
              "`tilelang._ffi_api`'s `Layout_*` functions (the methods), `tvm.tirx.decl_buffer`"
              "/`const`, `tvm.arith.Analyzer().can_prove_equal` on ints and "
              "`IndexFunction`s (compared at every index)",
    "Layout": "as `T.Layout`",
    "Fragment": "as `T.Fragment`",
    "DataType": "tilejit's dtype class (`DataType(x).bits`, `.bytes`); no lanes",
    "set_log_level": "sets tilejit's logger (`logging.getLogger('tilejit')`), which logs "
                     "each compilation at DEBUG",
    "logger": "`logging.getLogger('tilejit')`",
}
TILELANG_SUPPORTED = ["__version__", "jit", "compile", "par_compile", "autotune", "autotuner",
                      "PassConfigKey",
                      "language", "testing", "profiler", "Profiler", "TensorSupplyType",
                      "utils", "carver", "dtypes", "cdiv", "next_power_of_2", "math",
                      "disable_cache", "enable_cache", "is_cache_enabled", "JITKernel",
                      "layout", "Layout", "DataType", "Fragment", "set_log_level", "logger",
                      "transform", "engine", "cuda", "contrib", "tileop"]


def _row(name, supported, difference, why, prefix):
    if not supported:
        return f"| `{prefix}{name}` | not supported | {why} |"
    if difference:
        return f"| `{prefix}{name}` | supported, with a difference | {difference} |"
    return f"| `{prefix}{name}` | supported | |"


def _named_only(name) -> str | None:
    """The difference of one of TileLang's dtypes that tilejit names but does not hold."""
    value = getattr(T, name, None)
    if isinstance(value, DType) and not value.held and name not in LANGUAGE_DIFFERENCES:
        return ("a dtype name only (compare dtypes with it, pass it, list it in "
                "`pytest.mark.parametrize`; `bits`, `lanes`, `is_float4()`, `as_torch()` "
                "where torch has it); a tensor or tile of it is a TypeError saying so")
    return None


def _difference(name) -> str | None:
    return LANGUAGE_DIFFERENCES.get(name) or _named_only(name)


def _has(module, name) -> bool:
    try:
        getattr(module, name)
    except AttributeError:
        return False
    return True


def markdown() -> str:
    lines = [
        "# TileLang compatibility",
        "",
        "<!-- generated by tools/tilelang_compat.py; tests/language/test_compat.py checks "
        "it -->",
        "",
        f"Every public name of TileLang {compat.VERSION}'s `tilelang` and `tilelang.language` "
        "(its common and CUDA dialects, its dtypes, the TVM TIR operations it re-exports, and "
        "the names of TVM's TIR script that TileLang's own examples and tests use), as "
        "`import tilejit as tilelang` and `import tilejit.language as T` give them: "
        "**supported**, **supported, with a difference** (which), or **not supported**.",
        "",
        "A name that is not supported raises `tilejit.language.compat.NotSupportedError` (an "
        "`AttributeError`) naming it and saying so where the program reads it; in a kernel's "
        "body the front end reports it as a `CompileError` at its line:",
        "",
        # (the message a name the table marks not supported gives now, not a copy of it)
        "    " + compat.message("WSRole", compat.reason("WSRole")),
        "",
        "The same holds outside `tilelang.language`: `from tilelang.x import name` of a name "
        "tilejit's module lacks raises `NotSupportedImportError` (an `ImportError`) with that "
        "message, not Python's bare \"cannot import name\"; a submodule of TileLang's that "
        "tilejit lacks (`tilelang.engine.lower`, `tilelang.jit.adapter`, "
        "`tilelang.language.tir.exports`) raises `ModuleNotFoundError` saying so, also where "
        "tilejit keeps TileLang's package as one module (Python would say \"not a "
        "package\"); an attribute of TileLang's compiled kernel (`JITKernel`), `@jit` object, "
        "profiler, `AutoTuner`, `PrimFunc` or `DataType` that tilejit's lacks "
        "(`kernel.get_host_source()`, `kernel.adapter`, `func.script()`, "
        "`T.float16.type_code`) raises `NotSupportedError` naming it and listing what "
        "tilejit's object has. Probes keep Python's answers (`hasattr` is False). "
        "TileLang's `tilelang.language.tir.op` and `tilelang.language.tir.ir` (`from "
        "tilelang.language.tir import op as tir_op`) give `tilelang.language`'s names: "
        "`tir_op.abs` is `T.abs`, and a name the table marks not supported is refused so.",
        "",
        "`from tilelang import tvm` (TVM, which tilejit is built without) imports, and so "
        "does `import tvm` where TVM is not installed (TileLang makes its bundled TVM "
        "importable; a TVM module the stand-in lacks, `tvm.ir`, `tvm.tirx.expr`, and "
        "`tvm_ffi` are refused by name); reading "
        "its names raises the same error, except `tvm.DataType` (tilejit's dtype class), "
        "`tvm.arith.Analyzer().can_prove_equal` (on ints and layouts' index functions), "
        "`tvm.target.Target` (a target string or dict, entered as a context that a compile "
        "with target \"auto\" takes; TileLang's CPU targets `\"c\"` and `\"llvm\"` run "
        "the program in the simulator on host tensors as those backends run it, not as "
        "compiled C: a block is one thread unless `T.Kernel` names its threads, so its "
        "local tiles are the block's and `T.gemm` multiplies them, float32 as float32 (no "
        "tensor cores)), "
        "`tvm.tirx.decl_buffer` and the expression builders TileLang's dequantizing helpers "
        "use: `tirx.const`, `tirx.reinterpret(dtype, x)`, `tirx.Cast`, `tirx.Select` and "
        "`tirx.PrimExpr` (for annotations), with a value's `x.dtype` and `x.astype(dtype)`, "
        "the same under TVM's older name `tvm.tir` (BitBLAS's), and `tvm.te.var(name)` (a "
        "run-time dimension, `T.dynamic`). "
        "A helper computes as the kernel does: bitwise operations and shifts on integers of "
        "one type in C's types (int32 at least), `+ - *` of unsigned integers of at most "
        "32 bits with a uint32 wrapping in uint32 as C's, the rest of its integer arithmetic in "
        "64 bits, so `tirx.reinterpret` first cuts an integer to the width of its dtype; "
        "`x.dtype` of a bfloat16 or float8 value is refused (the simulator holds those in "
        "float32).",
        "",
    ]
    names = compat.language_names()
    supported = [n for n in names if _has(T, n)]
    held = [n for n in supported if _named_only(n) is None]
    top = TILELANG_SUPPORTED + list(compat.TILELANG)
    top_supported = [n for n in top if n not in compat.TILELANG and _has(tilejit, n)]
    lines += [
        f"Counts: `tilelang.language` {len(held)} of {len(names)} names supported "
        f"({sum(_difference(n) is not None for n in held)} with a difference), and "
        f"{len(supported) - len(held)} more that are dtype names only (no tensor or tile "
        f"holds them); `tilelang` {len(top_supported)} of {len(top)}.",
        "",
        "## `tilelang`",
        "",
        "| name | status | notes |",
        "|---|---|---|",
    ]
    for name in top:
        lines.append(_row(name, name in top_supported, TILELANG_DIFFERENCES.get(name),
                          compat.TILELANG.get(name, ""), "tilelang."))
    for where, group in compat.LANGUAGE_GROUPS:
        lines += ["", f"## `tilelang.language`: {where}", "", "| name | status | notes |",
                  "|---|---|---|"]
        for name in group:
            ok = name in supported
            lines.append(_row(name, ok, _difference(name),
                              "" if ok else compat.reason(name), "T."))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
