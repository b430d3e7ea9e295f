"""Numba's SSA reconstruction (``reconstruct_ssa``), rewriting for each variable only the
blocks that mention it.

Numba fixes one variable assigned more than once at a time, and for each one copies
every block of the function twice (fresh names for its definitions, then each use tied
to the definition that reaches it). A kernel's device function is one function of
~50 blocks and ~1,300 statements in which some 20 names are assigned more than once (a
loop's index, a helper's temporaries), so those copies were ~21 of the pass's ~24 ms in
FlashAttention's cold compile on the CPU machine.

A block that neither defines nor uses the variable is left as it is by both of Numba's
rewrites (their handlers return its statements unchanged), and the order in which the
blocks that do are visited decides the fresh names and the phi nodes, so visiting only
those, in the same order, gives the same IR. Numba's own handlers do the rewriting;
this module chooses the blocks. A phi node that lands in a block left as it was goes
into a copy of that block, as Numba's copy would have had it.
"""
from __future__ import annotations

from collections import defaultdict

from numba.core import config, errors, ir, postproc
from numba.core.analysis import compute_cfg_from_blocks
from numba.core.compiler_machinery import register_pass
from numba.core.ir_utils import build_definitions
from numba.core.ssa import (_CacheListVars, _find_defs_violators, _FixSSAVars,
                            _FreshVarHandler, _iterated_domfronts, _make_states,
                            _compute_phi_locations, _run_ssa_block_pass)
from numba.core.untyped_passes import ReconstructSSA


def reconstruct_ssa(func_ir):
    """``numba.core.ssa.reconstruct_ssa``, block by block only where needed."""
    func_ir.blocks = _run_ssa(func_ir.blocks)
    return func_ir


def _run_ssa(blocks):
    if not blocks:
        return {}
    cfg = compute_cfg_from_blocks(blocks)
    df_plus = _iterated_domfronts(cfg)
    violators = _find_defs_violators(blocks, cfg)
    cache_list_vars = _CacheListVars()
    mentions = _mentions(blocks) if violators else {}
    for varname in violators:
        labels = mentions[varname]
        blocks, defmap = _fresh_vars(blocks, varname, labels)
        blocks = _fix_ssa_vars(blocks, varname, defmap, cfg, df_plus, cache_list_vars,
                               labels)
    if compute_cfg_from_blocks(blocks) != cfg:
        raise errors.CompilerError("CFG mutated in SSA pass")
    return blocks


def _mentions(blocks) -> dict[str, set]:
    """Each variable name: the labels of the blocks whose statements define or use it.
    Renaming one variable never adds or removes another's mentions, so this is computed
    once for all of them."""
    where = defaultdict(set)
    for label, block in blocks.items():
        for stmt in block.body:
            if isinstance(stmt, ir.Assign):
                where[stmt.target.name].add(label)
            for var in stmt.list_vars():
                where[var.name].add(label)
    return where


def _rewrite(blocks, states, handler, labels):
    """Numba's ``_run_block_rewrite`` on the blocks of ``labels``; the others as they
    are (a new dict, in the same order)."""
    out = {}
    for label, block in blocks.items():
        if label not in labels:
            out[label] = block
            continue
        new = ir.Block(scope=block.scope, loc=block.loc)
        states["label"] = label
        states["block"] = block
        new.body = list(_run_ssa_block_pass(states, block, handler))
        out[label] = new
    return out


def _fresh_vars(blocks, varname, labels):
    states = _make_states(blocks)
    states["varname"] = varname
    states["defmap"] = defmap = defaultdict(list)
    return _rewrite(blocks, states, _FreshVarHandler(), labels), defmap


def _fix_ssa_vars(blocks, varname, defmap, cfg, df_plus, cache_list_vars, labels):
    states = _make_states(blocks)
    states["varname"] = varname
    states["defmap"] = defmap
    states["phimap"] = phimap = defaultdict(list)
    states["cfg"] = cfg
    states["phi_locations"] = _compute_phi_locations(df_plus, defmap)
    new = _rewrite(blocks, states, _FixSSAVars(cache_list_vars), labels)
    for label, phis in phimap.items():
        block = new[label]
        if block is blocks[label]:          # left as it was: phis go into a copy
            block = new[label] = ir.Block(scope=block.scope, loc=block.loc)
            block.body = list(blocks[label].body)
        block.body = phis + block.body
    return new


@register_pass(mutates_CFG=False, analysis_only=False)
class TilejitReconstructSSA(ReconstructSSA):
    """Numba's ``reconstruct_ssa`` pass with the sparse rewrite above."""
    _name = "tilejit_reconstruct_ssa"

    def run_pass(self, state):
        state.func_ir = reconstruct_ssa(state.func_ir)
        self._patch_locals(state)
        state.func_ir._definitions = build_definitions(state.func_ir.blocks)
        # Numba's pass reruns its post-processor for the IR's metadata; so does this one
        postproc.PostProcessor(state.func_ir).run(emit_dels=False)
        if config.DEBUG or config.DUMP_SSA:     # Numba's NUMBA_DUMP_SSA, kept
            print(f"SSA IR DUMP: {state.func_ir.func_id.func_qualname}".center(80, "-"))
            state.func_ir.dump()
        return True
