"""TileLang's ``tilelang.language.builtin`` as ``T.builtin`` (programs write
``T.builtin.sync_threads()``; TileLang's language package imports the module, so it is
an attribute there): each of its names is the language's own (``T.sync_threads``), one
tilejit does not have refused as ``T.<name>`` is (NotSupportedError naming it)."""
from __future__ import annotations

from tilejit.language.compat import not_in_module

# the names TileLang's builtin module defines (TileLang at the version compat.py names)
NAMES = frozenset("""
    __ffs __fns __ldg access_ptr activemask all_sync annotate_consumer_reg_alloc
    annotate_producer_reg_dealloc any_sync ballot ballot_sync barrier_arrive
    barrier_wait cooperative_tensor_fill cooperative_tensor_load
    cooperative_tensor_multiply_accumulate cooperative_tensor_store
    cp_async_barrier_noinc create_tma_descriptor deallocate_tmem dec_max_nreg
    disable_warp_group_reg_alloc ds_read_tr16_b64 ds_read_tr8_b64 fence_proxy_async
    get_lane_idx get_warp_group_idx get_warp_idx get_warp_idx_sync inc_max_nreg
    increase_descriptor_offset initialize_tcgen05_descriptor initialize_wgmma_descriptor
    ldg128 ldg256 ldg32 ldg64 lds128 lds32 lds64 loop_break match_all_sync
    match_any_sync mbarrier_arrive mbarrier_arrive_expect_tx mbarrier_expect_tx
    mbarrier_wait_parity named_barrier_arrive no_set_max_nreg ptx_arrive_cluster_barrier
    ptx_mma_sm70 set_max_nreg shfl_down shfl_sync shfl_up shfl_xor shuffle_elect stg128
    stg256 stg32 stg64 sts128 sts32 sts64 sync_global sync_grid sync_threads sync_warp
    syncthreads_and syncthreads_count syncthreads_or tcgen05_after_thread_sync
    tcgen05_before_thread_sync tcgen05_cp_warpx4 tcgen05_mma_arrive
    tcgen05_sf_warp_transpose tma_load tma_load_2sm tma_store_arrive tma_store_wait
    wait_wgmma warpgroup_arrive warpgroup_commit_batch warpgroup_fence_operand
    warpgroup_wait
""".split())


def __getattr__(name):
    if name in NAMES:
        import tilejit.language as T    # (the package imports this module: at use)
        return getattr(T, name)
    raise not_in_module(name, "tilelang.language.builtin", __name__,
                        "of TileLang's builtin module tilejit has the names the language "
                        "has (T.sync_threads, T.shfl_xor, T.get_lane_idx, ...)")
