"""The conv2d family's NCHW layout: its CUDA search space, and the via-channels_last path
(an NCHW convolution run by the channels_last kernel) with both layout changes done by
TileLang kernels.

In: an NCHW convolution's Geometry and the SM count (for `nchw_space`); a batch of row-major matrices
In[B, R, Cc] (an NCHW image is [C, H*W], a channels_last output [P*Q, K]), a dtype and a
TileLang target. Out: the ordered NCHW configs; a compiled batched transpose
Out[B, Cc, R] (cached per shape, dtype and target); and `ViaChannelsLast`, the kernel the
family returns for a via_nhwc config: transpose x to NHWC, run the channels_last
convolution, transpose y back to NCHW, all three inside the call (an NCHW model pays for
them). On CUDA each transpose block moves one tile through shared memory so that both
its loads and its stores are contiguous rows; on CPU (the C backend, what CI runs) a
tiled loop nest computes the same thing.
"""

# No `from __future__ import annotations`: TileLang resolves the prim_func's tensor
# annotations from the closure.

from typing import Callable

import torch

from ...results import Shape
from ...routing.calls import DERIVED
from .. import common as C
from .programs import Geometry, geometry, stream_problem

# A 64 x 64 tile: 8 KB of fp16 per block, rows of 128 bytes on both sides (whole
# 16-byte vectors and TMA boxes), and enough blocks to fill the GPU at ResNet sizes
# (56x56x64: 49 x 32 = 1568 blocks).
TILE = 64
THREADS = 128
CPU_TILE = 32


def transpose_program(B: int, R: int, Cc: int, dtype: str):
    """CUDA: Out[b] = In[b]^T, one TILE x TILE tile per block. The tile is loaded with
    row-contiguous vector loads into registers (a fragment), written transposed into
    shared memory, and stored as row-contiguous vectors (a TMA store where the rows are
    16-byte aligned). The copies are bounds-checked, so any R, Cc (60 channels, 28x28 or
    odd images) is correct; unaligned rows only get narrower vectors."""
    import tilelang.language as T

    @T.prim_func
    def batched_transpose(In: T.Tensor((B, R, Cc), dtype), Out: T.Tensor((B, Cc, R), dtype)):
        with T.Kernel(T.ceildiv(Cc, TILE), T.ceildiv(R, TILE), B, threads=THREADS) as (bx, by, bz):
            # Through registers rather than a second shared tile: one shared-memory pass,
            # and the column-wise shared reads of a shared-to-shared transpose conflicted
            # on every bank (rows of 128 bytes).
            F = T.alloc_fragment((TILE, TILE), dtype)
            S = T.alloc_shared((TILE, TILE), dtype)
            T.copy(In[bz, by * TILE, bx * TILE], F)
            for j, i in T.Parallel(TILE, TILE):
                S[j, i] = F[i, j]
            T.copy(S, Out[bz, bx * TILE, by * TILE])

    return batched_transpose


def cpu_transpose_program(B: int, R: int, Cc: int, dtype: str):
    """C backend: the same transpose as a tiled loop nest (what CI checks on CPU)."""
    import tilelang.cpu.language as T

    t = CPU_TILE

    @T.prim_func
    def batched_transpose_cpu(In: T.Tensor((B, R, Cc), dtype), Out: T.Tensor((B, Cc, R), dtype)):
        with T.Kernel(T.ceildiv(Cc, t), T.ceildiv(R, t), B) as (bx, by, bz):
            for j, i in T.grid(t, t):
                if (bx * t + j < Cc) and (by * t + i < R):
                    Out[bz, bx * t + j, by * t + i] = In[bz, by * t + i, bx * t + j]

    return batched_transpose_cpu


def transpose_program_for(B: int, R: int, Cc: int, dtype: str, target: str):
    return (cpu_transpose_program if C.is_cpu_target(target) else transpose_program)(B, R, Cc, dtype)


def transpose_launcher(B: int, R: int, Cc: int, dtype: str, target: str) -> C.Launcher:
    """The compiled transpose In[B, R, Cc] -> Out[B, Cc, R], once per process and key."""
    cfg = {"tile": CPU_TILE if C.is_cpu_target(target) else TILE, "threads": THREADS}
    return C.build_cached(
        "conv2d_transpose",
        (B, R, Cc),
        dtype,
        cfg,
        target,
        lambda: transpose_program_for(B, R, Cc, dtype, target),
        out_idx=[1],
        input_shapes=[(B, R, Cc)],
    )


def nchw_space(shape: Shape | Geometry, sms: int, tc_space: Callable[[Geometry], list[dict]]) -> list[dict]:
    """Tiles over (output channels, pixels of one image), ordered by an H200 sweep against
    cuDNN on NCHW tensors (benchmarks/kernel_sweep.py --only conv2d;
    reports/examples/kernels/h200-2026-12-01/kernel_sweep_conv2d_rows_attention.json):
    64-deep K chunks (2.75x at the 7x7 stem, 1.36x at a 14x14 1x1, against 1.05x and
    1.24x with 32), 128 output channels a tile where there are that many (1.78x at the
    stride-2 1x1), and for a memory-bound 1x1 over large images a 256-pixel tile
    (0.60-0.66x at 56x56, the best there). A k x k filter over 8 or more channels goes
    through the channels_last kernel first (see conv2d.NCHW_DEFAULTS; `tc_space` is that
    kernel's space). A 1x1 with at most 128 channels runs the stream schedule first (one
    wave of blocks on `sms` SMs walking the pixel tiles, the X loads pipelined under the
    gemm and the store): 0.95x and 0.90x cuDNN at 56x56 64->64 and 64->256, against
    0.66x and 0.61x for the best tiled config (kernel_sweep_views_conv2d_own.json, the
    same folder); two more configs on top of the ten. Over small images too: at 28x28
    128->512 (ResNet-50's layer2) the stream schedule with 128x128 tiles ran 1.05x cuDNN
    against 0.66x for the best tiled config (kernel_sweep_resnet50_llama.json, the same
    folder)."""
    g = geometry(shape)
    Cin, K, R, S = g.C, g.K, g.R, g.S
    P_, Q = g.P, g.Q
    raw = [  # (block_M, block_N, block_K, num_stages, threads)
        (64, 128, 64, 4, 128),
        (128, 64, 64, 4, 128),
        (64, 64, 64, 3, 128),
        (128, 128, 64, 4, 256),
        (64, 256, 32, 3, 256),
        (128, 256, 32, 3, 256),
        (64, 128, 32, 4, 128),
        (64, 64, 32, 4, 128),
    ]
    direct = R == S == g.sh == g.sw == 1 and g.ph == g.pw == 0
    if direct and P_ * Q >= 2048:
        raw.insert(0, raw.pop(5 if K > 64 else 4))
        if K <= 64:  # 56x56 256->64: four stages 0.90x cuDNN, three 0.83x (kernel_sweep_resnet50_llama.json)
            raw.insert(0, (64, 256, 32, 4, 256))
    elif K >= 128:
        raw.insert(0, raw.pop(1))
    pq = P_ * Q
    out = []
    for bM, bN, bK, stages, threads in raw:
        bM = min(bM, max(64, C.next_pow2(K)))
        bN = min(bN, max(64, C.next_pow2(pq)))
        threads = min(threads, 128 * max(1, (bM // 64) * (bN // 64)))
        out.append(
            {"block_M": bM, "block_N": bN, "block_K": bK, "num_stages": stages, "threads": threads, "swizzle": True}
        )
    if R * S > 1 and Cin >= 8:
        via = [{**c, "via_nhwc": True} for c in tc_space(g._replace(nchw=False))[:3]]
        out = via + out
    out = C.dedupe(out)[:10]
    if stream_problem(g) is None:
        large = pq >= 2048
        if K <= 64:
            tiles = ((64, 128, 4, 128), (64, 256, 3, 256)) if large else ((64, 128, 4, 128), (64, 64, 4, 128))
        else:
            # 56x56 64->256: 64x256 0.92x, 128x256 0.89x (kernel_sweep_resnet50_llama.json;
            # 0.896x in kernel_sweep_views_conv2d_own.json). Over
            # more than 64 channels three stages of a 256-pixel tile no longer fit in shared memory.
            tiles = (
                (((64, 256, 3, 256), (128, 256, 3, 256)) if Cin <= 64 else ((256, 128, 3, 256), (64, 128, 4, 128)))
                if large
                else ((128, 128, 3, 256), (64, 128, 4, 128))
            )
        stream = [
            {
                "block_M": bM,
                "block_N": bN,
                "block_K": 32,
                "num_stages": stages,
                "threads": threads,
                "swizzle": True,
                "stream": max(1, sms // C.ceildiv(K, bM)),
            }
            for bM, bN, stages, threads in tiles
        ]
        # First where the H200 measured it best (small images: 28x28 128->512); at 28x28
        # 100->100 the tiled kernel ran 1.77x cuDNN (kernel_sweep_views_conv2d_own.json) and stays first.
        at = 0 if large or K >= 256 else 1
        out[at:at] = stream
    return out


class ViaChannelsLast(C.LauncherWrapper):
    """An NCHW convolution run by the channels_last kernel `launcher` (built for the
    shape's channels_last twin): x transposed to NHWC and y back to NCHW by TileLang
    kernels inside the call, so both layout changes are in every time measured for it.
    The weight's KRSC copy is made once per weight tensor (swap.DERIVED), as a model's
    weights are constants."""

    def __init__(self, launcher: C.Launcher, shape: Shape | Geometry, target: str):
        super().__init__(launcher)
        g = geometry(shape)
        N, H, W, Cin, K = g[:5]
        P, Q = g.P, g.Q
        self._dims = (N, H, W, Cin, K, P, Q)
        self.to_nhwc = transpose_launcher(N, Cin, H * W, launcher.dtype, target)
        self.to_nchw = transpose_launcher(N, P * Q, K, launcher.dtype, target)
        self.compile_s = launcher.compile_s + self.to_nhwc.compile_s + self.to_nchw.compile_s

    @property
    def source(self) -> str:
        return "\n".join((self.launcher.source, self.to_nhwc.source, self.to_nchw.source))

    def __call__(self, x: torch.Tensor, w: torch.Tensor, w_krsc: torch.Tensor | None = None) -> torch.Tensor:
        """`w_krsc`: the weight's KRSC copy where the caller made it (a weight the model
        computes on every call, or one seen through a view made per call)."""
        N, H, W, Cin, K, P, Q = self._dims
        if w_krsc is None:
            w_krsc = DERIVED.get(w, "krsc", lambda t: t.permute(0, 2, 3, 1).contiguous())
        # Reshapes of contiguous tensors are views: the only copies are the two kernels.
        x_nhwc = self.to_nhwc(x.contiguous().view(N, Cin, H * W)).view(N, H, W, Cin)
        y = self.launcher(x_nhwc, w_krsc)
        return self.to_nchw(y.view(N, P * Q, K)).view(N, K, P, Q)
