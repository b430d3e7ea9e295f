"""Pass: the fragments and local tiles of a thread must fit its registers.

After layout inference every fragment has its slots per thread. A thread has at most
``Target.max_registers_per_thread`` 32-bit registers (255 on every CUDA arch); tiles
that need more than that can only live in local memory, and a kernel that spills whole
tiles is both slow and, at the sizes that get here by mistake (a 1024×1024 float32
fragment at 128 threads is 8192 registers per thread), minutes of LLVM and ptxas time.
So it is a ``CompileError`` naming each tile's share, before lowering. The simulator
applies the same limit (the GPU's), so what would not compile does not simulate either.
"""
from __future__ import annotations

import ast

# the register file per thread on every CUDA arch; the simulator uses the same
MAX_REGISTERS = 255


def check_registers(fdef: ast.FunctionDef, ctx) -> ast.FunctionDef:
    plan = ctx.plan
    limit = MAX_REGISTERS if ctx.target.is_sim else ctx.target.max_registers_per_thread
    words = plan.register_words()
    if words <= limit:
        return fdef
    shares = sorted(plan.register_shares(), key=lambda s: -s[0])
    detail = ", ".join(f"{t.name} {t.kind} {'x'.join(map(str, t.shape))} {t.dtype.name}: {n}"
                       for n, t in shares if n)
    line = min((t.line for _, t in shares if t.line), default=None)
    raise ctx.error(f"the kernel's fragments and local tiles need {words} 32-bit registers "
                    f"per thread ({detail}); a thread has at most {limit}: use more threads "
                    f"(T.Kernel(threads=...)) or smaller tiles", line)
