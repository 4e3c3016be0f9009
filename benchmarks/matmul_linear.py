"""GEMMs written `x @ W` against the same GEMMs written `F.linear`, both routed to TileLang.

    python3 benchmarks/matmul_linear.py [--device cuda|cpu] [--tokens 1024] [--width 768] [--json OUT]

In: BERT-base's widths (d 768, FFN 3072) at `--tokens` rows, two copies of one stack of
bias-free projections (d -> 3d, d -> 4d, 4d -> d, d -> d) with the same weights: one calls
`F.linear(x, W)` with W stored (N, K) as nn.Linear does; the other calls `x @ W` with W
stored (K, N), `torch.matmul(x, W)` and `x @ W.T`, as hand-written models do. One kernel per
shape (the gemm family's first config for the device) serves both, through the operator
router. Out: each side's calls in TileLang and in PyTorch, the outputs' agreement, and the
two sides timed in interleaved rounds (CUDA-graph replay on CUDA): matmul / linear.

Why: the router takes a matmul by a weight as it takes a linear layer; a weight stored
(K, N) is transposed once per parameter and kept (`kernels/gemm`, `_weight_nk`), so the
routed matmul should cost what the routed linear costs. This prints whether it does.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from evaluator import kernels  # noqa: E402
from evaluator.device import hardware  # noqa: E402
from evaluator.measuring.timing import TimingPolicy, time_pair  # noqa: E402
from evaluator.routing import router as R  # noqa: E402


class Linear(nn.Module):
    def __init__(self, ws: list[torch.Tensor]):
        super().__init__()
        self.ws = nn.ParameterList([nn.Parameter(w) for w in ws])  # (N, K), as nn.Linear

    def forward(self, x):
        qkv = F.linear(x, self.ws[0])
        h = F.linear(x + qkv[..., : x.shape[-1]], self.ws[1])
        return F.linear(F.linear(h, self.ws[2]), self.ws[3])


class Matmul(nn.Module):
    def __init__(self, ws: list[torch.Tensor]):
        super().__init__()
        self.kn = nn.ParameterList([nn.Parameter(w.t().contiguous()) for w in ws[:3]])  # (K, N)
        self.nk = nn.Parameter(ws[3].clone())  # (N, K), used as x @ W.T

    def forward(self, x):
        qkv = x @ self.kn[0]
        h = torch.matmul(x + qkv[..., : x.shape[-1]], self.kn[1])
        return (h @ self.kn[2]) @ self.nk.T


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=("cuda", "cpu"))
    ap.add_argument("--tokens", type=int, default=None, help="rows (batch x sequence); default 1024 on CUDA, 64 on CPU")
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    dev, d = args.device, args.width
    m = args.tokens or (1024 if dev == "cuda" else 64)
    dtype = "float16" if dev == "cuda" else "float32"
    tdtype = getattr(torch, dtype)
    g = torch.Generator().manual_seed(0)
    dims = [(3 * d, d), (4 * d, d), (d, 4 * d), (d, d)]  # (N, K) each
    ws = [(torch.randn(n, k, generator=g) / k**0.5).to(dev, tdtype) for n, k in dims]
    x = torch.randn(m, d, generator=g).to(dev, tdtype)
    hw = hardware.detect(dev)
    gemm = kernels.get("gemm")
    table = R.KernelTable(dtype, hw.target)
    for n, k in dims:
        shape = (m, n, k)
        cfg = gemm.search_space(shape, dtype, hw)[0]
        table.add("gemm", shape, cfg, gemm.build(shape, dtype, cfg, hw.target))
    sides = {}
    for name, cls in (("linear", Linear), ("matmul", Matmul)):
        model = cls(ws).to(dev).eval()
        router = R.Router([gemm], table, model=model)

        def run(model=model, router=router):
            with router:
                return model(x)

        with torch.inference_mode():
            out = run()
        counts = [c for c in router.counts() if c.family == "gemm"]
        sides[name] = {
            "fn": run,
            "out": out,
            "tilelang": sum(c.tilelang for c in counts),
            "fell_back": sum(sum(c.fallback.values()) for c in counts),
        }
    agree = (sides["linear"]["out"].float() - sides["matmul"]["out"].float()).abs().max().item()
    with torch.inference_mode():
        t_lin, t_mm, ratio, note = time_pair([sides["linear"]["fn"]], [sides["matmul"]["fn"]], dev, TimingPolicy())
    name = torch.cuda.get_device_name() if dev == "cuda" else "CPU"
    print(f"{m} tokens x width {d}, {dtype}, on {name}; 4 projections a pass, one kernel per shape")
    for side in ("linear", "matmul"):
        s = sides[side]
        print(f"  {side:6}: {s['tilelang']} calls in TileLang, {s['fell_back']} in PyTorch")
    print(f"  outputs differ by at most {agree:.2e}")
    print(
        f"  linear {t_lin.median_ms:.4f} ms, matmul {t_mm.median_ms:.4f} ms: "
        f"matmul runs at {ratio.value:.3f}x linear's speed"
    )
    if dev == "cpu":
        print("(a shared CPU: this checks that both forms route and agree, not their speed)")
    if note:
        print(f"  note: {note}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "device": name,
                    "tokens": m,
                    "width": d,
                    "dtype": dtype,
                    "linear_ms": t_lin.median_ms,
                    "matmul_ms": t_mm.median_ms,
                    "matmul_vs_linear": ratio.value,
                    "max_abs_diff": agree,
                    **{f"{k}_{c}": sides[k][c] for k in sides for c in ("tilelang", "fell_back")},
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
