"""The grid barrier's arrival and wait (``T.sync_grid``: ``passes/grid_sync.py`` says
how it works; the block barriers around it are the pass's). Thread 0 of each block adds
to one 32-bit word in global memory with ``atom.add.release.gpu`` (the block's writes,
ordered before it by the block barrier, are released with it) and spins on
``ld.acquire.gpu`` until the word's top bit has flipped, sleeping a little between reads
(``nanosleep``) so that 132 spinning threads leave the memory system to the others."""
from __future__ import annotations

from llvmlite import ir

from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.tiles import I32, inline_asm
from tilejit.ir import markers

I64 = ir.IntType(64)
WORD = "__tj_grid_barrier"      # one per loaded module, zero when the module loads
TOP = 0x80000000


def _word_address(builder):
    module = builder.module
    gv = module.globals.get(WORD)
    if gv is None:
        gv = ir.GlobalVariable(module, I32, WORD, addrspace=1)
        gv.linkage = "internal"
        gv.initializer = I32(0)
        gv.align = 4
    return builder.ptrtoint(gv, I64)


@lower(markers.stub(markers.GRID_SYNC), target="cuda")
def grid_sync_impl(context, builder, sig, args):
    first = builder.icmp_unsigned("==", context.block_thread_index(builder), I32(0))
    with builder.if_then(first):
        dims = [context.grid_dim(builder, axis) for axis in range(3)]
        index = [context.block_index(builder, axis) for axis in range(3)]
        blocks = builder.mul(builder.mul(dims[0], dims[1]), dims[2])
        corner = builder.or_(builder.or_(index[0], index[1]), index[2])
        # block (0, 0, 0) adds 2^31 - (blocks - 1), the others 1: the top bit flips when
        # the last arrives, and the lower bits are 0 again
        master = builder.sub(I32(TOP + 1), blocks)
        add = builder.select(builder.icmp_unsigned("==", corner, I32(0)), master, I32(1))
        address = _word_address(builder)
        arrived = inline_asm(builder, "atom.add.release.gpu.global.u32 $0, [$1], $2;",
                             "=r,l,r,~{memory}", [address, add], I32)
        spin = builder.append_basic_block("grid_sync_wait")
        done = builder.append_basic_block("grid_sync_done")
        builder.branch(spin)
        builder.position_at_end(spin)
        now = inline_asm(builder, "ld.acquire.gpu.global.u32 $0, [$1];", "=r,l,~{memory}",
                         [address], I32)
        flipped = builder.icmp_unsigned("!=", builder.and_(builder.xor(now, arrived),
                                                           I32(TOP)), I32(0))
        wait = builder.append_basic_block("grid_sync_sleep")
        builder.cbranch(flipped, done, wait)
        builder.position_at_end(wait)
        inline_asm(builder, "nanosleep.u32 32;", "~{memory}", [])
        builder.branch(spin)
        builder.position_at_end(done)
    return context.get_dummy_value()
