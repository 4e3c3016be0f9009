"""GEMM / linear with a fused bias and optional activation: y = act(x @ weight.T + bias),
exactly nn.Linear's layout.

In: shape (M, N, K); inputs x[M, K], weight[N, K], bias[N] (as nn.Linear stores them).
Out: y[M, N] in the input dtype, compared against `torch.nn.functional.linear` followed
by the activation. Six registered families share this module: `gemm` (no activation,
what profiling maps nn.Linear to) and `gemm_relu`, `gemm_gelu` (exact erf form, as
nn.GELU), `gemm_silu` and `gemm_gelu_tanh` (GPT-2's gelu_new), whose activation runs on
the fp32 accumulator in the epilogue before the single rounding to the output dtype, and
`gemm_mul`, y = (x @ weight.T + bias) * g for a fourth input g[M, N]: a gated MLP's up
projection times its activated gate (llama's `down(silu(gate(x)) * up(x))`: gemm_silu
makes the gate, gemm_mul the product, and the elementwise multiply's kernel, which reads
two [M, N] tensors and writes a third, is gone). Whole-K schedules only for it.
Schedules: on CUDA, fp16/bf16 use shared-memory tiles, a pipelined K loop, tensor-core
`T.gemm` into a fp32 fragment, block rasterization and the epilogue on the fragment;
when M*N gives too few tiles to fill the GPU and K is long, a split-K variant has
`split_k` blocks share one output tile and add fp32 partials atomically, and the bias,
activation and rounding follow in PyTorch. On Hopper (sm_90), `pingpong` = 1 runs
persistent tiles taken in turn by two consumer warpgroups, one's epilogue under the
other's k-loop; it leads the search space where the H200 sweep measured it ahead.
Experimental and outside the search space (measured slower): `cluster` = 2 launches
whole-K tiles as block pairs along N that load their shared A tile once, by TMA
multicast (sm_90+). fp32 uses a register-blocked SIMT (FFMA) schedule, because `T.gemm` on fp32 lowers to TF32
tensor cores, which would not match
PyTorch's full-fp32 reference. On CPU (the C backend), a blocked loop nest over fp32
local tiles that gcc vectorizes. The programs themselves are in `kernels/gemm/programs.py`;
this module sizes, checks, searches, builds (split-K's PyTorch epilogue) and routes them.
A grouped GEMM (F.grouped_mm: a mixture of experts' layers) is the grouped_gemm family's.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F

from ...device import arch as A
from ...errors import KernelError
from ...results import Hardware, KernelConfig, Shape
from ...routing.calls import DERIVED, arg, dtype_mismatch
from ...routing.router import Route, Start
from .. import common as C
from . import checks as K
from . import pingpong as PP
from . import programs as P
from ..einsum import as_matmul
from .calls import TORCH_ACTS, FusedSplitKLinear, SplitKLinear, StreamKLinear
from ..base import KernelFamily, Resolved, Schedule

ACTIVATIONS = ("none", "relu", "gelu", "silu", "gelu_tanh")
# Epilogue cost per output element, for the FLOP count.
ACT_FLOPS = {"none": 0, "relu": 1, "gelu": 8, "silu": 4, "gelu_tanh": 9}
# The torch calls that may be a matrix product by a weight: `x @ W` arrives as Tensor.matmul.
# The family takes those whose second operand is a 2-D weight (`owns`); a batched product
# of two activations (attention written out) is another family's.
# torch.linalg.matmul is torch.matmul under another name, a function object of its own.
MATMUL_CALLS = (torch.matmul, torch.Tensor.matmul, torch.linalg.matmul, torch.einsum)
# addmm and mm as functions and as Tensor methods (`b.addmm(x, W)`, `x.mm(W)`): the same
# arguments in the same places, the method's self first.
ADDMM_CALLS = (torch.addmm, torch.Tensor.addmm)
MM_CALLS = (torch.mm, torch.Tensor.mm)
# The torch calls that are a linear layer: the plain family routes them, a fused one holds them.
LINEAR_CALLS = (F.linear, *ADDMM_CALLS, *MM_CALLS, *MATMUL_CALLS)
# A product of two tensors as the router sees it: `a * b` and a.mul(b) arrive as Tensor.mul.
MUL_CALLS = (torch.Tensor.mul, torch.mul)

CPU_DEFAULTS = {"block_M": 128, "block_N": 64, "block_K": 32, "unroll": 1}  # no factor named: the K loop as written
# Tensor-core schedule (fp16/bf16).
TC_DEFAULTS = {
    "block_M": 128,
    "block_N": 128,
    "block_K": 64,
    "num_stages": 3,
    "threads": 128,
    "swizzle": True,
    "panel": 10,
    "policy": "square",
    "split_k": 1,
    "splitk_fused": False,
    "persistent": 0,
    # Experimental, never in the search space (0.78-0.80x against 0.86-0.87x without
    # on the H200: reports/examples/kernels/h200-2026-12-01/kernel_sweep_llama.json):
    # blocks per thread-block cluster sharing A by TMA multicast (0 = off;
    # see gemm/programs._cluster_program).
    "cluster": 0,
    # 1 = persistent tiles taken in turn by two consumer warpgroups, so one's
    # epilogue runs under the other's k-loop (sm_90 only; gemm/pingpong.space).
    "pingpong": 0,
    # With pingpong, the last partial wave's k-steps dealt out over every block
    # (stream-K; gemm/pingpong's docstring says why). In the space only for long
    # K over many rounds, where the H200 measured it ahead (gemm/pingpong.space).
    "stream_k": 0,
    # With pingpong: tiles of y's transpose, tokens as wgmma's N (1), and the
    # epilogue's store straight from registers (1); gemm/pingpong's docstring.
    "swap_ab": 0,
    "direct": 0,
}
# Decode-like shapes (M <= 64): narrow tiles so enough blocks stream the weight, on the
# mma path (wgmma needs 64 rows a warpgroup). Measured on the H200 (kernel_sweep.py):
# 16x32x256 and 16x64x256 with 4 stages reach 1.08-1.19x cuBLAS at 16x4096x4096,
# 1x4096x11008 and 32x1000x2048, where the 64-row tiles reached 0.63-0.83x.
SKINNY_TILES = (
    (16, 32, 256, 4),
    (16, 64, 256, 4),
    (16, 32, 256, 3),
    (16, 64, 256, 3),
    (16, 32, 128, 4),
    (32, 64, 256, 3),
    (32, 32, 256, 4),
    (64, 64, 128, 4),
)
# The K rings a wave tile is tried with, deepest first per K width: Hopper's 227 KB of
# shared memory holds 3-5 stages of 64-deep slices or 2-3 of 128-deep ones; a gfx9
# workgroup's 64 KiB of LDS holds a 128x128 tile's C tile and one 64-deep or two 32-deep
# stages (_tc_smem).
WGMMA_RINGS = (((64, 5), (64, 4), (64, 3)), ((128, 3), (128, 2)))
CDNA_RINGS = (((64, 2), (64, 1)), ((32, 2), (32, 1)))
# SIMT schedule (fp32): each thread owns a thread_M x thread_N register tile.
SIMT_DEFAULTS = {
    "block_M": 128,
    "block_N": 128,
    "block_K": 16,
    "thread_M": 8,
    "thread_N": 8,
    "num_stages": 2,
    "swizzle": True,
    "unroll": 0,  # the K loop fully unrolled (C.accumulation_loop)
}

# Local tiles become stack arrays in the generated C; keep them well inside a thread's stack.
CPU_LOCAL_LIMIT_BYTES = 128 * 1024


def _tc_smem(cfg: dict[str, Any], dtype: str) -> int:
    b = C.dtype_bytes(dtype)
    if cfg.get("pingpong"):
        return PP.smem_bytes(cfg, b)
    tiles = (cfg["block_M"] + cfg["block_N"]) * cfg["block_K"] * b * max(1, cfg["num_stages"])
    # The atomic split-K variant adds its fragment to global memory directly, without a C tile.
    atomic = cfg.get("split_k", 1) > 1 and not cfg.get("splitk_fused", False)
    return tiles + (0 if atomic else cfg["block_M"] * cfg["block_N"] * b)


def _simt_smem(cfg: dict[str, Any]) -> int:
    return (cfg["block_M"] + cfg["block_N"] + 8) * cfg["block_K"] * 4 * max(1, cfg["num_stages"])


def _simt_threads(cfg: dict[str, Any]) -> int:
    return (cfg["block_M"] // cfg["thread_M"]) * (cfg["block_N"] // cfg["thread_N"])


def _cpu_local(cfg: dict[str, Any]) -> int:
    return (cfg["block_M"] * cfg["block_K"] + cfg["block_K"] * cfg["block_N"] + cfg["block_M"] * cfg["block_N"]) * 4


def _is_linear_matmul(input_shapes: Sequence[Sequence[int]]) -> bool:
    """aten::matmul with a 2-D second operand is a linear layer without bias; with two
    batched operands it is attention-style bmm, which this family does not compute."""
    dims = [len(s) for s in input_shapes[:2] if isinstance(s, (list, tuple))]
    return len(dims) == 2 and dims[1] == 2


class GemmFamily(KernelFamily):
    shape_names = ("M", "N", "K")
    awkward_align = 8  # the pingpong and cluster programs load rows by TMA
    # Profiling sees nn.Linear as one op whatever follows it: every variant takes its
    # shapes from the plain family's profiled calls.
    profile_family = "gemm"
    # The ping-pong program's switches (pingpong.py): y's transpose, the direct store and
    # stream-K; a fine step turns each on or off around the best ping-pong tile.
    fine_flags = ("swap_ab", "direct", "stream_k")

    def __init__(self, activation: str = "none", gate: bool = False):
        if activation not in ACTIVATIONS:
            raise KernelError(f"gemm: unknown activation '{activation}'; use one of {', '.join(ACTIVATIONS)}")
        if gate and activation != "none":
            raise KernelError("gemm: a gated GEMM multiplies the linear's own result; it takes no activation")
        self.activation = activation
        # gemm_mul: the epilogue multiplies by a fourth input, g[M, N] (the module docstring).
        self.gate = gate
        self.name = "gemm_mul" if gate else "gemm" if activation == "none" else f"gemm_{activation}"
        self.title = (
            "GEMM / linear (+bias) x a tensor (a gated MLP's multiply)"
            if gate
            else "GEMM / linear (+bias)"
            if activation == "none"
            else f"GEMM / linear (+bias, {activation.upper()})"
        )
        plain = activation == "none" and not gate
        # the activation or the multiply; an activation written out as several calls
        # (GPT-2's tanh GELU) is credited as one, an underestimate
        self.absorbs = () if plain else ("elementwise",)
        self.aten_ops = frozenset({"aten::linear", "aten::addmm", "aten::mm"}) if plain else frozenset()

    # ------------------------------------------------------------ shapes

    def covers(self, op: str, input_shapes: Sequence[Sequence[int]] = ()) -> bool:
        # A matmul by a weight (a 2-D second operand) is gemm's: the router takes x @ W and
        # torch.matmul(x, W.T) as it takes F.linear.
        return op in self.aten_ops or (bool(self.aten_ops) and op == "aten::matmul" and _is_linear_matmul(input_shapes))

    def problem_shape(
        self,
        op: str,
        input_shapes: Sequence[Sequence[int]],
        concrete_inputs: Sequence[Any] | None = None,
        input_strides: Sequence[Sequence[int]] | None = None,
    ) -> Shape | None:
        try:
            shapes = [list(s) for s in input_shapes]
            if op == "aten::linear":
                x, w = shapes[0], shapes[1]
                if len(x) < 1 or len(w) != 2 or x[-1] != w[1]:
                    return None
                return (math.prod(x[:-1]) if len(x) > 1 else 1, int(w[0]), int(w[1]))
            if op == "aten::mm":
                a, b = shapes[0], shapes[1]
                if len(a) != 2 or len(b) != 2 or a[1] != b[0]:
                    return None
                return (int(a[0]), int(b[1]), int(a[1]))
            if op == "aten::matmul":  # by a 2-D weight (covers): x[..., K] @ W[K, N], W.T included
                a, b = shapes[0], shapes[1]
                if len(a) < 2 or len(b) != 2 or a[-1] != b[0]:
                    return None
                return (math.prod(a[:-1]), int(b[1]), int(a[-1]))
            if op == "aten::addmm":
                a, b = shapes[1], shapes[2]
                if len(a) != 2 or len(b) != 2 or a[1] != b[0]:
                    return None
                return (int(a[0]), int(b[1]), int(a[1]))
        except (IndexError, TypeError, ValueError):
            return None
        return None

    def standard_shapes(self, device: str) -> list[Shape]:
        if device == "cpu":
            # Each stays well under 50 ms per TileLang call on one core.
            medium = (256, 512, 128)
            return [(128, 128, 64), medium, (512, 1024, 256), self.awkward_shape(medium)]
        medium = (4096, 4096, 4096)
        return [(1024, 1024, 1024), medium, (8192, 8192, 8192), (16384, 1024, 4096), self.awkward_shape(medium)]

    # ------------------------------------------------------------ data

    def make_inputs(self, shape: Shape, dtype: str, device: str, seed: int) -> tuple[torch.Tensor, ...]:
        M, N, K = C.check_shape(shape, self.shape_names, self.name)
        dtype = C.canonical_dtype(dtype)
        g = C.generator(seed)
        # nn.Linear-like scaling keeps outputs O(1) for every K, so one tolerance fits all.
        x = C.randn((M, K), dtype, device, g)
        w = C.randn((N, K), dtype, device, g, scale=1.0 / math.sqrt(K))
        b = C.randn((N,), dtype, device, g, scale=0.1)
        if self.gate:  # the gate's values, O(1) as a SiLU's are
            return x, w, b, C.randn((M, N), dtype, device, g)
        return x, w, b

    def reference(self, *inputs: torch.Tensor) -> torch.Tensor:
        if self.gate:
            x, w, b, gate = inputs
            return F.linear(x, w, b) * gate
        x, w, b = inputs
        return TORCH_ACTS[self.activation](F.linear(x, w, b))

    def input_shapes(self, shape: Shape) -> list[tuple[int, ...]]:
        M, N, K = shape
        return [(M, K), (N, K), (N,)] + ([(M, N)] if self.gate else [])

    # ------------------------------------------------------------ metrics

    def flops(self, shape: Shape) -> float:
        M, N, K = shape
        return 2.0 * M * N * K + M * N * (1 + ACT_FLOPS[self.activation] + self.gate)

    def bytes(self, shape: Shape, dtype: str) -> float:
        M, N, K = shape
        return float((M * K + N * K + N + M * N * (1 + self.gate)) * C.dtype_bytes(C.canonical_dtype(dtype)))

    def tolerance(self, dtype: str, shape: Shape | None = None) -> tuple[float, float]:
        """Both sides accumulate in fp32; the difference is summation order (grows
        ~sqrt(K)) plus one output rounding. Without a shape, K = 1024 is assumed."""
        dtype = C.canonical_dtype(dtype)
        k = int(shape[2]) if shape is not None else 1024
        grow = max(1.0, math.sqrt(k / 256.0))
        base = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
        if self.gate:
            # PyTorch rounds the linear's result, then the product: the kernel rounds once.
            # The linear's error is scaled by |g| (make_inputs' g reaches 4-5), hence atol x4.
            return (4 * base * grow, 2 * base * grow)
        return (base * grow, base * grow)

    # ------------------------------------------------------------ tuning

    def search_space(self, shape: Shape, dtype: str, hardware: Hardware) -> list[KernelConfig]:
        M, N, K = C.check_shape(shape, self.shape_names, self.name)
        dtype = C.canonical_dtype(dtype)
        if C.is_cpu_target(hardware.target) or hardware.device == "cpu":
            return self._cpu_space(M, N, K)
        if dtype == "float32":
            return self._simt_space(M, N, K, hardware)
        space = self._tc_space(M, N, K, dtype, hardware)
        # The gated product has whole-K programs only (gemm/programs); its epilogue is a
        # load and a multiply, not an erf or exp, so the ping-pong tiles stay in.
        return [c for c in space if not _split(c)] if self.gate else space

    def _cpu_space(self, M: int, N: int, K: int) -> list[KernelConfig]:
        out = []
        for bM, bN, bK in ((128, 64, 32), (64, 64, 32), (64, 128, 64), (32, 64, 128)):
            # Tiles much larger than the problem only add zero padding work.
            cfg = {
                "block_M": min(bM, C.round_up(M, 8)),
                "block_N": min(bN, C.round_up(N, 8)),
                "block_K": min(bK, C.round_up(K, 8)),
            }
            cfg["unroll"] = C.cpu_unroll(cfg["block_K"])  # the K loop split by hand (C.CPU_UNROLL)
            if _cpu_local(cfg) <= CPU_LOCAL_LIMIT_BYTES:
                out.append(cfg)
        return C.dedupe(out)

    def _tc_space(self, M: int, N: int, K: int, dtype: str, hw: Hardware) -> list[KernelConfig]:
        skinny = self._skinny_space(M, dtype, hw) if M <= 64 else self._wave_space(M, N, dtype, hw)
        # The ping-pong tiles go first where they won, else right after the first pick, so a
        # short tuning budget tries them.
        sms = max(1, int(hw.cores or 1))
        lead, ping = PP.space(M, N, K, hw, TC_DEFAULTS, lambda c: C.smem_fits(_tc_smem(c, dtype), hw))
        if self.activation in ("gelu", "silu", "gelu_tanh"):
            # Left out: in the model a ping-pong tile with an erf or exp epilogue runs far
            # slower than its op benchmark says, so a tuner that reached it would pick it
            # and lose. ViT-B's gemm_gelu at 3152x3072x768 on the H200 (2026-12-02):
            # ping-pong 36.1 us in the op sweep (1.02x the unfused pair, the wave tile
            # 0.92x) and 48.7 us inside the model, where the wave tile 128x208 ran 39.4 us
            # in both; the model ran 1.033x with the first and 1.107x with the second
            # (graph_gaps.py; reports/examples/benchmarks/h200-2026-12-02/). Nsight Compute,
            # caches flushed, also reads 48.4 us, against 28.7 us for the plain ping-pong GEMM
            # (reports/examples/kernels/h200-2026-12-02/ncu-gelu/). The cause is code size:
            # each of the two consumers carries its own fully unrolled epilogue, fetched cold
            # on every SM when other kernels ran in between; benchmarks/in_sequence.py reads
            # it 1.38x slower right after PyTorch's reference and 1.13x after an L2 flush.
            # kernel_sweep --only fused still times these tiles.
            lead, ping = [], []
        skinny = skinny[:1] + ping + skinny[1:]
        raw = [
            # (block_M, block_N, block_K, num_stages, threads)
            (128, 128, 64, 3, 128),
            (128, 256, 64, 3, 256),
            (256, 128, 64, 3, 256),
            (128, 128, 32, 4, 128),
            (128, 64, 64, 4, 128),
            (64, 128, 64, 4, 128),
            (64, 64, 64, 4, 128),
            (128, 128, 64, 2, 256),
            (64, 256, 64, 3, 128),
            # Small-footprint entries for devices with 48 KB of shared memory per block.
            (64, 128, 32, 2, 128),
            (64, 64, 32, 2, 128),
        ]
        base = {k: v for k, v in TC_DEFAULTS.items()}
        cands = [
            {**base, "block_M": a, "block_N": b, "block_K": k, "num_stages": s, "threads": t} for a, b, k, s, t in raw
        ]
        cands.append({**cands[0], "swizzle": False})
        # Warp partition and panel width matter most for the big tiles of large problems.
        cands += [{**cands[1], "policy": "fullrow"}, {**cands[1], "panel": 4}]
        fitting = [c for c in cands if C.smem_fits(_tc_smem(c, dtype), hw)]
        ordered = self._order_by_waves(fitting, M, N, hw)
        big = {**cands[1], "panel": 4}
        if big in fitting and C.ceildiv(M, 128) * C.ceildiv(N, 256) >= 8 * sms:
            # Eight waves or more: the last wave's idle SMs cost little, and the
            # power-of-two 128x256 tile on narrow panels won (8192³: 1.10x cuBLAS against
            # 0.97-0.98x for the wave-sized tiles;
            # reports/examples/kernels/h200-2026-12-01/kernel_sweep_conv2d_rows_attention.json).
            skinny = [big] + skinny
        return C.dedupe(lead + skinny + ordered + self._splitk_space(M, N, K, dtype, hw))

    @staticmethod
    def _wave_space(M: int, N: int, dtype: str, hw: Hardware) -> list[KernelConfig]:
        """Tiles sized for the SMs. Power-of-two tiles on model shapes leave SMs idle:
        ViT-B's 3152x768 output is 75 tiles of 128x256 on 132 SMs, and Nsight Compute
        showed our kernel at 47% SM throughput beside cuBLAS's 74%, which ran 128x144
        tiles on one persistent block per SM
        (reports/examples/kernels/h200-2026-12-01/ncu_gemm_3152x768x3072.txt).
        wgmma takes any N that is a multiple of 8, so block_N steps by 16 from 64 to 256.
        A tile is scored by the share of SM time its grid does useful work (useful area
        / SM-waves x tile area) times its arithmetic intensity (bM*bN / (bM+bN): larger
        tiles load less per FLOP). On the H200 this score put first the measured best of
        every model shape in benchmarks/kernel_sweep.py
        (reports/examples/kernels/h200-2026-12-01/kernel_sweep_wave_tiles.json)."""
        sms = max(1, int(hw.cores or 1))
        # On AMD's CDNA (gfx9) matrix cores MFMA covers 32-wide blocks, and the 64 KiB of
        # LDS a workgroup has holds a 128x128 tile with its C tile at one or two stages,
        # so block_N steps by 32 and the K rings are shallow there.
        cdna = A.is_cdna(hw)
        step, rings = (A.MFMA_BLOCK, CDNA_RINGS) if cdna else (16, WGMMA_RINGS)
        scored = []
        for bM, threads in ((128, 256), (64, 128)):
            for bN in range(64, 257, step):
                tiles = C.ceildiv(M, bM) * C.ceildiv(N, bN)
                useful = M * N / (C.ceildiv(tiles, sms) * sms * bM * bN)
                scored.append((useful * bM * bN / (bM + bN), bM, bN, threads))
        out = []
        for _, bM, bN, threads in sorted(scored, reverse=True)[:4]:
            policy = "fullrow" if bM == 128 else "square"
            # Per tile: the deepest ring of each K width that fits.
            for ring in rings:
                for bK, stages in ring:
                    cfg = {
                        **TC_DEFAULTS,
                        "block_M": bM,
                        "block_N": bN,
                        "block_K": bK,
                        "num_stages": stages,
                        "threads": threads,
                        "policy": policy,
                    }
                    if C.smem_fits(_tc_smem(cfg, dtype), hw):
                        out.append(cfg)
                        break
        # The two best tiles again as one persistent block per SM (see _tc_program).
        return out + [{**cfg, "persistent": sms} for cfg in out[:2]]

    @staticmethod
    def _skinny_space(M: int, dtype: str, hw: Hardware) -> list[KernelConfig]:
        rows = max(16, C.next_pow2(M))
        out = [
            {
                **TC_DEFAULTS,
                "block_M": a,
                "block_N": b,
                "block_K": k,
                "num_stages": s,
                "threads": 128,
                "policy": "fullcol",
            }
            for a, b, k, s in SKINNY_TILES
            if a <= rows
        ]
        return [c for c in out if C.smem_fits(_tc_smem(c, dtype), hw)]

    @staticmethod
    def _splitk_space(M: int, N: int, K: int, dtype: str, hw: Hardware) -> list[KernelConfig]:
        """Split-K only where the output has fewer 64x128 tiles than the GPU has SMs
        and K is long enough that each split still runs a pipelined loop."""
        sms = max(1, int(hw.cores or 1))
        out = []
        for bM, bN, bK, stages in ((64, 128, 64, 4), (128, 128, 64, 3)):
            tiles = C.ceildiv(M, bM) * C.ceildiv(N, bN)
            if tiles >= sms:
                continue
            for splits in (2, 3, 4, 8):
                if K // splits < 4 * bK or tiles * splits > 4 * sms:
                    continue
                for fused in (True, False):
                    cfg = {
                        **TC_DEFAULTS,
                        "block_M": bM,
                        "block_N": bN,
                        "block_K": bK,
                        "num_stages": stages,
                        "threads": 128,
                        "split_k": splits,
                        "splitk_fused": fused,
                    }
                    if C.smem_fits(_tc_smem(cfg, dtype), hw):
                        out.append(cfg)
        return out[:8]

    def limits_error(self, shape: Shape, dtype: str, cfg: dict, hw: Hardware) -> str | None:
        if C.targets_cpu(hw):
            local = _cpu_local(cfg)
            return None if local <= CPU_LOCAL_LIMIT_BYTES else f"local tiles need {local} B of stack"
        smem = _simt_smem(cfg) if dtype == "float32" else _tc_smem(cfg, dtype)
        if not C.smem_fits(smem, hw):
            return f"needs {smem} B of shared memory, the device allows {hw.smem_per_block} B per block"
        if dtype != "float32":
            threads = cfg["threads"]
            if threads % 128 or not 128 <= threads <= 512:
                return f"tensor-core tiles need 128, 256 or 384 threads (whole warpgroups), got {threads}"
            # wgmma takes any N that is a multiple of 8, but ping-pong tiles of 120 and 152
            # columns ran 3x slower than 128 on the H200 at 3152x3072x768 (84-85 us against
            # 28 us; Nsight Compute: 3.4x the instructions, L1/shared 89% busy against 57%;
            # reports/examples/kernels/h200-2026-12-02/ncu-width/), so tiles keep steps of 16.
            # The cause, in the PTX (test_gemm_pingpong): TileLang issues 152 columns as 64x8
            # wgmmas.
            if cfg["block_M"] % 16 or cfg["block_N"] % 16 or cfg["block_K"] % 16:
                return "tensor-core tiles must be multiples of 16"
            warps = threads // 32
            if cfg["block_M"] < 64:
                # Fewer rows than a warpgroup's wgmma: the mma path, warps side by side
                # along N (FullCol), each at least 8 columns wide.
                if cfg["policy"] != "fullcol" or cfg["block_N"] % (8 * warps):
                    return (
                        f"a {cfg['block_M']}-row tile runs on mma with the warps along N: it needs policy "
                        f"fullcol and block_N a multiple of {8 * warps}"
                    )
            # A warpgroup's wgmma covers 64 rows; a 128x? tile cannot feed four warpgroups.
            elif cfg["block_M"] * cfg["block_N"] < 64 * 16 * warps:
                return f"a {cfg['block_M']}x{cfg['block_N']} tile is too small for {threads} threads"
        return None

    def _simt_space(self, M: int, N: int, K: int, hw: Hardware) -> list[KernelConfig]:
        raw = [
            # (block_M, block_N, block_K, thread_M, thread_N, num_stages)
            (128, 128, 16, 8, 8, 2),
            (128, 128, 8, 8, 8, 3),
            (128, 64, 16, 8, 8, 2),
            (64, 128, 16, 8, 8, 2),
            (64, 64, 16, 4, 8, 2),
            (128, 128, 32, 8, 8, 2),
            (64, 64, 32, 4, 4, 2),
            (128, 128, 16, 8, 8, 0),
        ]
        cands = [
            {"block_M": a, "block_N": b, "block_K": k, "thread_M": tm, "thread_N": tn, "num_stages": s, "swizzle": True}
            for a, b, k, tm, tn, s in raw
        ]
        fitting = [c for c in cands if C.smem_fits(_simt_smem(c), hw) and 32 <= _simt_threads(c) <= 1024]
        ordered = self._order_by_waves(fitting, M, N, hw)
        return ordered[:1] + C.unroll_variants(ordered[0], hw) + ordered[1:] if ordered else []

    @staticmethod
    def _order_by_waves(cands: list[KernelConfig], M: int, N: int, hw: Hardware) -> list[KernelConfig]:
        """Put first the largest tile that still gives every SM a block; the tuner
        tries the rest. A small problem thus starts from a small tile."""
        sms = max(1, int(hw.cores or 1))
        if not cands:
            return []

        def tiles(c: KernelConfig) -> int:
            return C.ceildiv(M, c["block_M"]) * C.ceildiv(N, c["block_N"])

        full = [c for c in cands if tiles(c) >= sms]
        if full:
            first = max(full, key=lambda c: (c["block_M"] * c["block_N"], -cands.index(c)))
        else:
            first = max(cands, key=lambda c: (tiles(c), -cands.index(c)))
        return [first] + [c for c in cands if c is not first]

    # ------------------------------------------------------------ build

    def schedule(self, shape: Shape, dtype: str, target: str) -> Schedule:
        # fp32 on the GPU runs FFMA (SIMT): T.gemm on fp32 would be TF32, not PyTorch's fp32.
        act, gate = self.activation, self.gate
        if C.is_cpu_target(target):
            return Schedule(CPU_DEFAULTS, functools.partial(P.cpu_program, act=act, gate=gate))
        fast = target.split()[0] == "cuda"  # MUFU intrinsics in the epilogue: CUDA's only
        if dtype == "float32":
            return Schedule(SIMT_DEFAULTS, functools.partial(P.simt_program, act=act, fast=fast, gate=gate))
        return Schedule(TC_DEFAULTS, functools.partial(P.tensor_core_program, act=act, fast=fast, gate=gate))

    def config_error(self, shape: Shape, dtype: str, cfg: dict, target: str) -> str | None:
        for key in ("block_M", "block_N", "block_K"):
            if cfg[key] <= 0:
                return f"{key} must be positive, got {cfg[key]}"
        if C.is_cpu_target(target):
            return C.unroll_error(cfg, cpu=True)
        if self.gate and dtype != "float32" and _split(cfg):
            return "the gated product runs whole-K tiles: not with split_k, cluster or stream_k"
        if dtype == "float32":
            if cfg["block_M"] % cfg["thread_M"] or cfg["block_N"] % cfg["thread_N"]:
                return f"block_M/block_N must be multiples of thread_M/thread_N, got {cfg}"
            if not 32 <= _simt_threads(cfg) <= 1024:
                return f"SIMT config needs 32..1024 threads, got {_simt_threads(cfg)}"
            return C.unroll_error(cfg, cpu=False)
        if cfg["policy"] not in P.POLICIES:
            return f"policy must be one of {', '.join(P.POLICIES)}, got {cfg['policy']!r}"
        if cfg["split_k"] < 1:
            return f"split_k must be >= 1, got {cfg['split_k']}"
        if cfg["persistent"] < 0 or (cfg["persistent"] and cfg["split_k"] > 1):
            return f"persistent must be 0 (off) or a block count, and whole-K only, got {cfg['persistent']}"
        bad = K.stream_k_error(cfg)
        if bad:
            return bad
        for key in ("swap_ab", "direct"):
            if cfg.get(key, 0) not in (0, 1, True, False):
                return f"{key} must be 0 (off) or 1, got {cfg[key]!r}"
        if cfg.get("direct") and not cfg["pingpong"]:
            return "direct is an option of the ping-pong schedule: set pingpong = 1"
        if cfg.get("swap_ab") and (cfg["split_k"] > 1 or cfg["cluster"]):
            return "swap_ab is built for whole-K tiles: not with split_k or cluster"
        if cfg["pingpong"]:
            return K.pingpong_error(shape, cfg)
        return K.cluster_error(shape, cfg) if cfg["cluster"] else None

    def needs(self, shape: Shape, dtype: str, cfg: dict) -> tuple[tuple[str, tuple[str, ...]], ...]:
        if dtype == "float32" or "pingpong" not in cfg:  # the SIMT and CPU schedules use none
            return ()
        if cfg["pingpong"]:
            return (("pingpong", K.PINGPONG_NEEDS),)
        return (("cluster", K.CLUSTER_NEEDS),) if cfg["cluster"] else ()

    def compile(self, resolved: Resolved, target: str) -> Callable[..., torch.Tensor]:
        if resolved.config.get("pingpong") and PP.sk_splits(resolved.shape, resolved.config):
            M, N, K = resolved.shape
            ws, cnt = PP.sk_workspace(resolved.shape, resolved.config)
            inner = C.build_cached(
                self.name,
                resolved.shape,
                resolved.dtype,
                resolved.config,
                target,
                resolved.program,
                out_idx=[5],
                input_shapes=[(M, K), (N, K), (N,)],
            )
            return StreamKLinear(inner, ws, cnt)
        if resolved.config.get("split_k", 1) > 1 and resolved.config.get("splitk_fused"):
            M, N, K = resolved.shape
            inner = C.build_cached(
                self.name,
                resolved.shape,
                resolved.dtype,
                resolved.config,
                target,
                resolved.program,
                out_idx=[5],
                input_shapes=[(M, K), (N, K), (N,)],
            )
            return FusedSplitKLinear(inner, resolved.shape)
        if resolved.config.get("split_k", 1) > 1:
            # One compiled kernel serves every activation: the epilogue runs in PyTorch.
            M, N, K = resolved.shape
            inner = C.build_cached(
                "gemm_splitk",
                resolved.shape,
                resolved.dtype,
                resolved.config,
                target,
                resolved.program,
                out_idx=None,
                input_shapes=[(M, K), (N, K)],
            )
            return SplitKLinear(inner, resolved.shape, self.activation)
        return super().compile(resolved, target)

    # ------------------------------------------------------------ swap-in (at the operator)

    @property
    def fused(self) -> bool:
        return self.activation != "none" or self.gate

    @property
    def functions(self) -> tuple:
        # A fused variant has no torch function of its own: its pattern is a linear and
        # then the activation on its result (or the product with it), which the router
        # holds back (`fuses`).
        return () if self.fused else LINEAR_CALLS

    @property
    def fuses(self) -> tuple:
        return LINEAR_CALLS if self.fused else ()

    @property
    def chains(self) -> bool:
        return self.activation != "none"

    @property
    def fused_op(self) -> str:
        if self.gate:
            return "aten::mul"
        return "" if self.activation == "none" else f"aten::{self.activation.removesuffix('_tanh')}"

    # A fused variant's first() is the linear's route, whatever the epilogue; only fused
    # variants start patterns, so the router may give all of them one answer per call.
    first_by_class = True

    def first(self, func: Callable, args: tuple, kwargs: dict, dtype: str) -> Any:
        if not self.fused:
            return super().first(func, args, kwargs, dtype)
        route = self.route(func, args, kwargs, dtype)
        return route if isinstance(route, str) else Start(route.shape, route.out, route, route=route)

    def second(self, func: Callable, args: tuple, kwargs: dict, start: Any, held: torch.Tensor) -> Any:
        """This family's activation on the held linear's result and nothing else: F.gelu
        in its exact (erf) form for gemm_gelu (nn.GELU(), transformers' "gelu"), F.relu /
        torch.relu / Tensor.relu out of place, F.silu out of place (nn.SiLU, llama's act).
        For gemm_mul, the held result times one other tensor of its size and dtype, in
        either order (`act(gate) * up`, `up * act(gate)`); a broadcast factor, a number or
        the result times itself is not this family's."""
        if self.gate:
            return self._product(func, args, kwargs, start, held)
        if len(args) != 1 or args[0] is not held:
            return None
        if func not in _SECOND.get(self.activation, ()):
            return None
        if kwargs.get("approximate", "none") != ("tanh" if self.activation == "gelu_tanh" else "none"):
            return None
        if any(k not in ("approximate", "inplace") for k in kwargs) or kwargs.get("inplace"):
            return None
        first: Route = start.state
        return Route(first.shape, first.launch, notes=first.notes)

    @staticmethod
    def _product(func: Callable, args: tuple, kwargs: dict, start: Any, held: torch.Tensor) -> Route | None:
        if func not in MUL_CALLS or kwargs or len(args) != 2:
            return None
        a, b = args
        other = b if a is held else a if b is held else None
        if (
            not isinstance(other, torch.Tensor)
            or other is held
            or other.shape != held.shape
            or other.dtype != held.dtype
            or other.device != held.device
        ):
            return None
        first: Route = start.state
        M, N, _ = first.shape
        notes = first.notes + (() if other.is_contiguous() else ("gate copied to contiguous",))
        return Route(first.shape, lambda kernel: first.launch(kernel, other.reshape(M, N)), notes=notes)

    def ends_chain(self, probe: torch.Tensor, result: torch.Tensor, start: Any) -> Any:
        """This family's activation written out as elementwise calls (GPT-2's gelu_new,
        `0.5 * x * (1 + tanh(...))`; `x * sigmoid(x)`), recognised by what the chain
        computes on `probe`: the fused kernel's route, or None."""
        if self.activation == "none" or not torch.allclose(
            result, TORCH_ACTS[self.activation](probe), rtol=1e-4, atol=1e-5
        ):
            return None
        first: Route = start.state
        return Route(first.shape, first.launch, notes=first.notes)

    def owns(self, func: Callable, args: tuple, kwargs: dict) -> bool:
        """A matmul or einsum is this family's where its second operand is a 2-D matrix and
        its first has rows: a linear layer written `x @ W`, `torch.matmul(x, W.T)` or
        `einsum("bsk,nk->bsn", x, W)`. Every F.linear, addmm and mm is."""
        if func not in MATMUL_CALLS:
            return True
        if func is torch.einsum:
            eq, ops = _einsum_args(args)
            found = as_matmul(eq, ops[0].dim(), ops[1].dim()) if eq is not None else None
            return found is not None and found.weight
        a, b = arg(args, kwargs, 0, "input"), arg(args, kwargs, 1, "other")
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and b.dim() == 2 and a.dim() >= 2

    def route(self, func: Callable, args: tuple, kwargs: dict, dtype: str) -> Route | str:
        """One F.linear / torch.addmm / torch.mm call, or a matmul or einsum by a weight,
        as (M, N, K) and a launch, or why not."""
        nk, tail = 1, None  # x's last dims that are K, the output's that are N: an einsum's may be several
        if func is F.linear:
            x, w, b = arg(args, kwargs, 0, "input"), arg(args, kwargs, 1, "weight"), arg(args, kwargs, 2, "bias")
            if w.dim() != 2 or x.dim() < 1 or x.shape[-1] != w.shape[1]:
                return "unsupported operand ranks"
            w_nk = w
        elif func in MATMUL_CALLS:
            got = self._matmul_operands(func, args, kwargs)
            if isinstance(got, str):
                return got
            x, w, w_nk, tail, nk = got
            b = None
        else:
            if func in ADDMM_CALLS:
                b, x, w = arg(args, kwargs, 0, "input"), arg(args, kwargs, 1, "mat1"), arg(args, kwargs, 2, "mat2")
                if kwargs.get("beta", 1) != 1 or kwargs.get("alpha", 1) != 1 or kwargs.get("out") is not None:
                    return "addmm with alpha/beta/out"
                if b.dim() != 1:
                    return "addmm bias is not a vector"
            else:
                x, w, b = arg(args, kwargs, 0, "input"), arg(args, kwargs, 1, "mat2"), None
                if kwargs.get("out") is not None:
                    return "mm with out="
            if x.dim() != 2 or w.dim() != 2 or x.shape[1] != w.shape[0]:
                return "unsupported operand ranks"
            # x @ W with W (K, N), as transformers' Conv1D stores it: the kernel wants
            # nn.Linear's (N, K). A weight that is already a transposed view is free;
            # a parameter is transposed once and cached; an activation is not a weight.
            w_nk = _weight_nk(w, kn=True)
            if isinstance(w_nk, str):
                return w_nk
        bad = dtype_mismatch(dtype, x, w, b)
        if bad:
            return bad
        K = math.prod(x.shape[-nk:])
        N = int(w.numel() // K) if K else 0  # the 2-D weight's other dim, whichever way it lies
        if b is not None and tuple(b.shape) != (N,):
            return "bias shape"
        M = x.numel() // K if K else 0
        if M <= 0:
            return "empty input"
        notes = () if x.is_contiguous() else ("input copied to contiguous",)
        lead = x.shape[:-nk]
        tail = tail or (N,)

        def launch(kernel: Callable[..., torch.Tensor], *more: torch.Tensor) -> torch.Tensor:
            # `more`: a fused variant's further inputs (gemm_mul's g[M, N]). The weight in
            # the kernel's layout is made here, once per weight (DERIVED), not when a call
            # is only counted.
            weight = w_nk() if callable(w_nk) else w_nk
            weight = weight if weight.is_contiguous() else DERIVED.get(weight, "c", lambda t: t.contiguous())
            bias = b if b is not None else DERIVED.constant("zero_bias", N, weight.dtype, weight.device, 0.0)
            return kernel(x.reshape(M, K).contiguous(), weight, bias, *more).reshape(*lead, *tail)

        return Route((M, N, K), launch, notes=notes, out=((*lead, *tail), x.dtype, x.device))

    @staticmethod
    def _matmul_operands(func: Callable, args: tuple, kwargs: dict) -> tuple | str:
        """(x, the weight as given, the weight as (N, K) or a callable that makes it, the
        output's last dims) of a matmul or einsum by a weight, or why the call is not one.
        An einsum's weight may hold its N columns, or its K rows, over several letters
        (XLNet's "ibh,hnd->ibnd" and "ibnd,hnd->ibh"): read as the 2-D matrix it is in
        memory, x's last `nk` dims as one (the last value), the output keeps the free
        letters' dims."""
        nk = 1  # the weight's dims that are K
        if func is torch.einsum:
            eq, ops = _einsum_args(args)
            if eq is None or len(ops) != 2 or kwargs:
                return "einsum of other than two operands"
            x, w = ops
            found = as_matmul(eq, x.dim(), w.dim())
            if found is None or not found.weight:
                return "einsum that is not a product by a weight"
            kn, nk = found.b_kn, len(found.k)
        else:
            if kwargs.get("out") is not None:
                return "matmul with out="
            x, w = arg(args, kwargs, 0, "input"), arg(args, kwargs, 1, "other")
            if not (isinstance(x, torch.Tensor) and isinstance(w, torch.Tensor)):
                return "unsupported operand ranks"
            if w.dim() != 2 or x.dim() < 2:
                return f"operand ranks {x.dim()}-D @ {w.dim()}-D: not a product by a 2-D weight"
            kn = True
        kdims = tuple(w.shape[:nk] if kn else w.shape[-nk:])
        tail = tuple(w.shape[nk:] if kn else w.shape[:-nk])
        if tuple(x.shape[-nk:]) != kdims:
            return "unsupported operand ranks"
        if w.dim() == 2:
            w_nk = _weight_nk(w, kn=kn)
            return w_nk if isinstance(w_nk, str) else (x, w, w_nk, tail, nk)
        if not w.is_contiguous():
            return "weight over several dims, not contiguous"
        K, N = math.prod(kdims), math.prod(tail)
        if not kn:
            return x, w, w.view(N, K), tail, nk
        if not isinstance(w, torch.nn.Parameter):
            return "second operand is not a weight"
        return x, w, lambda: DERIVED.get(w, "flat t", lambda t: t.reshape(K, N).t().contiguous()), tail, nk


def _weight_nk(w: torch.Tensor, *, kn: bool) -> Any:
    """A 2-D weight as the kernel's (N, K): itself where it lies so, a free transposed view
    where it is one (`x @ W.T`), else a callable that transposes a parameter once
    (`DERIVED`) when a launch needs it; an activation is no weight (why, as a string)."""
    if not kn:
        return w
    if w.t().is_contiguous():
        return w.t()
    if isinstance(w, torch.nn.Parameter):
        return lambda: DERIVED.get(w, "t", lambda t: t.t().contiguous())
    return "second operand is not a weight"


def _einsum_args(args: tuple) -> tuple[str | None, tuple]:
    """(equation, operands) of a torch.einsum call, operands given loose or as one list."""
    if not args or not isinstance(args[0], str):
        return None, ()
    ops = tuple(args[1]) if len(args) == 2 and isinstance(args[1], (list, tuple)) else tuple(args[1:])
    if not all(isinstance(t, torch.Tensor) for t in ops):
        return None, ()
    return args[0], ops


# The torch functions that apply each fused activation (`GemmFamily.second`).
_SECOND = {
    "gelu": (F.gelu,),
    "relu": (F.relu, torch.relu, torch.Tensor.relu),
    "silu": (F.silu,),
    "gelu_tanh": (F.gelu,),
}


def _split(cfg: KernelConfig) -> bool:
    """Whether a config splits K or pairs blocks: the programs with no gated form."""
    return cfg.get("split_k", 1) > 1 or bool(cfg.get("cluster")) or bool(cfg.get("stream_k"))


FAMILY = GemmFamily()
FUSED = tuple(GemmFamily(act) for act in ACTIVATIONS if act != "none") + (GemmFamily(gate=True),)


# The registry (evaluator.kernels) registers these, in this order.
FAMILIES = (FAMILY, *FUSED)
