import sys, os, torch
sys.path[:0] = [os.getcwd(), "examples/flash_attention"]
import tilejit
from flash_attn import flashattn
which = sys.argv[1]
dt = getattr(torch, sys.argv[2]) if len(sys.argv) > 2 else torch.float16
q, k, v = (torch.randn(4, 4096, 32, 128, device="cuda", dtype=dt) for _ in range(3))
o = torch.empty_like(q)
if which == "cudnn":
    from torch.nn.attention import SDPBackend, sdpa_kernel
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    for _ in range(3):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(qt, kt, vt)
else:
    bm, bn, th = map(int, which.split(","))
    fa = tilejit.kernel(flashattn.func, fast_math=True)
    for _ in range(3):
        fa(q, k, v, o, block_M=bm, block_N=bn, threads=th, num_stages=2)
torch.cuda.synchronize()
