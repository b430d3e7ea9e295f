"""The grid barrier's arrival and wait (``T.sync_grid``: ``passes/grid_sync.py`` says
how it works; the block barriers around it are the pass's). Thread 0 of each block adds
to one 32-bit word in global memory with ``atom.add.release.gpu`` (the block's writes,
ordered before it by the block barrier, are released with it) and spins on
``ld.acquire.gpu`` until the word's top bit has flipped, sleeping a little between reads
(``nanosleep``) so that 132 spinning threads leave the memory system to the others."""
from __future__ import annotations

from llvmlite import ir

from tilejit.codegen.lowering.registry import lower
from tilejit.codegen.lowering.tiles import I32, intrinsic
from tilejit.ir import markers

I64 = ir.IntType(64)
WORD = "__tj_grid_barrier"      # one per loaded module, zero when the module loads
TOP = 0x80000000


def _sreg(builder, name):
    return builder.call(intrinsic(builder, f"llvm.nvvm.read.ptx.sreg.{name}", I32, []), [])


def _word_address(builder):
    module = builder.module
    gv = module.globals.get(WORD)
    if gv is None:
        gv = ir.GlobalVariable(module, I32, WORD, addrspace=1)
        gv.linkage = "internal"
        gv.initializer = I32(0)
        gv.align = 4
    return builder.ptrtoint(gv, I64)


def _asm(builder, ret, text, constraints, args):
    fnty = ir.FunctionType(ret, [a.type for a in args])
    return builder.call(ir.InlineAsm(fnty, text, constraints, side_effect=True), args)


@lower(markers.stub(markers.GRID_SYNC), target="cuda")
def grid_sync_impl(context, builder, sig, args):
    first = builder.icmp_unsigned("==", _sreg(builder, "tid.x"), I32(0))
    with builder.if_then(first):
        blocks = builder.mul(builder.mul(_sreg(builder, "nctaid.x"), _sreg(builder, "nctaid.y")),
                             _sreg(builder, "nctaid.z"))
        corner = builder.or_(builder.or_(_sreg(builder, "ctaid.x"), _sreg(builder, "ctaid.y")),
                             _sreg(builder, "ctaid.z"))
        # block (0, 0, 0) adds 2^31 - (blocks - 1), the others 1: the top bit flips when
        # the last arrives, and the lower bits are 0 again
        master = builder.sub(I32(TOP + 1), blocks)
        add = builder.select(builder.icmp_unsigned("==", corner, I32(0)), master, I32(1))
        address = _word_address(builder)
        arrived = _asm(builder, I32, "atom.add.release.gpu.global.u32 $0, [$1], $2;",
                       "=r,l,r,~{memory}", [address, add])
        spin = builder.append_basic_block("grid_sync_wait")
        done = builder.append_basic_block("grid_sync_done")
        builder.branch(spin)
        builder.position_at_end(spin)
        now = _asm(builder, I32, "ld.acquire.gpu.global.u32 $0, [$1];", "=r,l,~{memory}",
                   [address])
        flipped = builder.icmp_unsigned("!=", builder.and_(builder.xor(now, arrived),
                                                           I32(TOP)), I32(0))
        wait = builder.append_basic_block("grid_sync_sleep")
        builder.cbranch(flipped, done, wait)
        builder.position_at_end(wait)
        _asm(builder, ir.VoidType(), "nanosleep.u32 32;", "~{memory}", [])
        builder.branch(spin)
        builder.position_at_end(done)
    return context.get_dummy_value()
