"""Attention forward (FlashAttention): o = softmax(q k^T * scale + mask) v.

In: shape (B, H, Sq, Skv, D, causal[, q_pitch, k_pitch, v_pitch[, kv_heads[, mask,
mask_dims]]]); inputs q[B, H, Sq, D], k[B, Hkv, Skv, D], v[B, Hkv, Skv, D] and, with a
mask, the mask. Hkv is H or, with grouped-query attention (SDPA's enable_gqa, as
transformers calls it for llama 2/3, Mistral and Qwen), `kv_heads`, a divisor of H (query
head h reads key/value head h // (H // Hkv)); causal is 0 or 1 and follows PyTorch's
top-left alignment (query i sees keys j <= i). Each operand is either contiguous (pitch
0, the default, six ints) or, as Hugging Face, timm and llama-style blocks hand it to
SDPA, the transposed view of a row-major [B, S, pitch, D] projection (`x.view(B, S, H,
D).transpose(1, 2)` has pitch H, timm's packed qkv 3H): the kernel reads such views in
place, as PyTorch's flash SDPA does, instead of copying them (`row_pitch`).
The mask is SDPA's attn_mask as models pass it. `mask` is its kind: 1 bool (True =
attend: BERT's padding, Mistral's sliding window, transformers' masks in general), 2
additive in the inputs' dtype, 3 additive float32 beside float16/bfloat16 inputs (T5's
and Swin's relative-position biases, ALiBi). `mask_dims` says in four binary digits for
[B, H, Sq, Skv] along which dims it varies: 1011 is BERT's [B, 1, Sq, Skv], 1001 a
key-padding [B, 1, 1, Skv], 11 a [1, 1, Sq, Skv] window, 1111 a per-head bias. It
broadcasts (size 1 or stride 0) along the others, and the kernel reads it as that
smaller tensor (`mask_shape`), index 0 on broadcast dims. A masked shape writes all
twelve fields (pitches 0 when contiguous, kv_heads 0 when H) and is not causal.
The softmax scale is a kernel parameter (`params`, like LayerNorm's eps), not part of the
shape: one tuned shape serves every scale= a model passes (OPT's and Whisper's 1.0 on
pre-scaled queries, T5's 1.0, the default); 0 stands for SDPA's default 1/sqrt(D).
Out: o[B, H, Sq, D] in the input dtype (a transposed [B, Sq, H, D] view when q is
strided), compared against `torch.nn.functional.scaled_dot_product_attention(q, k, v,
attn_mask=mask, is_causal=causal, enable_gqa=Hkv != H)`. A query row the mask hides from
every key (all False, or all -inf) gives 0, as PyTorch's SDPA does on the CPU (math and
flash backends alike); a row of nothing but an additive mask's float min averages its
keys, as PyTorch's does.
Schedules: on CUDA (fp16/bf16), FlashAttention-2: a block owns block_M query rows of one
(batch, head), keeps its Q tile in shared memory and streams K/V tiles through a
pipelined loop; QK^T and PV run on tensor cores (`T.gemm`) into fp32 fragments with an
online softmax (exp2 on log2(e)-prescaled scores) in between; causal blocks stop at the
diagonal, and only the key blocks that straddle it (or hold the Skv tail) build the
per-element mask. With a mask input each score tile is scaled and masked once it lands
(`apply_mask`: q.k * scale + mask, or -inf where a bool mask hides the key), and the
softmax runs on those scores. Config keys: block_M, block_N, num_stages (K/V buffers),
threads, and `overlap`: False is the loop above, warp-specialized by TileLang on sm_90 (a
TMA producer warpgroup); True is FlashAttention-3's intra-warpgroup overlap, a
hand-ordered software pipeline with asynchronous WGMMA in which block t's softmax runs
while block t-1's PV gemm is on the tensor cores (sm_90 only, num_stages 2, cp.async
loads, no producer warpgroup); `pingpong` (sm_90 only; 128 query rows, 256 consumer
threads) is FlashAttention-3's forward written out (`attention/pingpong`): a TMA
producer warpgroup feeds two consumer warpgroups of 64 rows each, which overlap softmax
and gemms within and across warpgroups. All three take a mask. fp32 is refused on CUDA
(T.gemm on fp32 is TF32, which would not match PyTorch's fp32). On CPU (the C backend),
the same online-softmax loop over fp32 local tiles, one (batch, head, query block) per
kernel block. The programs themselves are in `kernels/attention/programs.py`; this module
sizes, checks, searches and routes them.

The causal flag is not recoverable from q, k and v, so `make_inputs` tags q with it and
`reference` reads it back (see `CAUSAL_ATTR`).
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F

from ...errors import KernelError
from ...results import Hardware, KernelConfig, Shape
from ...routing.calls import arg, dtype_mismatch
from ...routing.router import Route
from . import pingpong as PPA
from . import programs as P
from .. import common as C
from ..base import KernelFamily, Schedule

SDPA = "aten::scaled_dot_product_attention"
# The attribute make_inputs sets on q so that reference(q, k, v) knows the mask.
CAUSAL_ATTR = "attention_causal"

CPU_DEFAULTS = {"block_M": 32, "block_N": 64}
# split_count: with overlap and causal, the loop count max(n, 2) as two pipelines (see
# `attention/programs._overlap_loop`), where ptxas otherwise serializes the wgmmas; measured
# slower on the H200 (2026-12-03 sweep), so outside the search space.
# fast_math: the CUDA build with nvcc --use_fast_math (see `attention/programs.gpu_program`).
GPU_DEFAULTS = {
    "block_M": 128,
    "block_N": 128,
    "num_stages": 2,
    "threads": 256,
    "overlap": False,
    "split_count": False,
    "fast_math": True,
    "pingpong": False,
}

# Local tiles become stack arrays in the generated C; keep them well inside a thread's stack.
CPU_LOCAL_LIMIT_BYTES = 192 * 1024
# Accumulator registers per thread (acc_s, its 16-bit copy, acc_o) above which the GPU
# schedule spills. Checked with ptxas -v on the sm_90a build: every config of the space
# (<= 160) has no spills; 128x128 tiles at D=128 with 128 threads (256) spill 848 bytes.
# The overlap configs (no producer warpgroup, up to 255 registers a thread) use 250 at
# 128x128, D=128, without spills at s4096; ViT's s197 (no loop left) spills 48 bytes.
GPU_ACC_REGS_LIMIT = 168
# Where one key block covers every key (Skv <= block_N) there is no K/V loop to pipeline:
# ViT's s197 in one 64x208 block (188) built without spills at 240-251 registers on one
# warpgroup, 168 with the producer (benchmarks/ptx_stats.py); 64x256 (224) spilled 48 bytes.
GPU_ONE_BLOCK_REGS_LIMIT = 192
GPU_MAX_HEAD_DIM = 256
GPU_SMEM_SLACK = 1024  # bytes: mbarriers and the 1 KB alignment of the dynamic buffer
# aten::scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
# scale, enable_gqa): positions of the scalars in the profiler's concrete_inputs.
ARG_MASK, ARG_DROPOUT, ARG_CAUSAL, ARG_SCALE = 3, 4, 5, 6


# ---------------------------------------------------------------- sizing


def _cpu_local_bytes(cfg: dict[str, Any], D: int) -> int:
    bM, bN = cfg["block_M"], cfg["block_N"]
    return (2 * bM * D + 2 * bN * D + bM * bN + 2 * bM) * 4


def _gpu_smem(cfg: dict[str, Any], D: int, dtype: str) -> int:
    """The Q tile, K and V tiles once per pipeline stage, and slack for barriers and
    alignment. The O staging tile is not counted: TileLang's shared-memory planner puts
    it on Q's bytes, whose lifetime has ended (seen in the sm_90a source)."""
    b = C.dtype_bytes(dtype)
    if cfg.get("pingpong"):
        return PPA.smem_bytes(cfg, D, b)
    return (cfg["block_M"] * D + 2 * cfg["block_N"] * D * max(1, cfg["num_stages"])) * b + GPU_SMEM_SLACK


def _gpu_acc_regs(cfg: dict[str, Any], D: int) -> float:
    """fp32 registers per thread for acc_s, its half-precision copy and acc_o."""
    if cfg.get("pingpong"):
        return PPA.acc_regs(cfg, D)
    bM, bN = cfg["block_M"], cfg["block_N"]
    return (bM * bN * 1.5 + bM * D) / cfg["threads"]


def _gpu_config_error(cfg: dict[str, Any], D: int, Skv: int) -> str | None:
    bM, bN, threads = cfg["block_M"], cfg["block_N"], cfg["threads"]
    if threads % 32 or not 32 <= threads <= 1024:
        return f"threads must be a multiple of 32 in 32..1024, got {threads}"
    if bM <= 0 or bN <= 0 or bM % 16 or bN % 16:
        return f"block_M and block_N must be positive multiples of 16, got {bM}x{bN}"
    # FullRow gives each warp whole rows of the score tile, at least one 16-row MMA tile.
    warps = threads // 32
    if bM % (16 * warps):
        return f"block_M={bM} must be a multiple of 16 x {warps} warps (threads={threads})"
    if D % 16 or D > GPU_MAX_HEAD_DIM:
        return f"head dim D={D} must be a multiple of 16 up to {GPU_MAX_HEAD_DIM} for the tensor-core schedule"
    regs, limit = _gpu_acc_regs(cfg, D), GPU_ONE_BLOCK_REGS_LIMIT if Skv <= bN else GPU_ACC_REGS_LIMIT
    if cfg.get("pingpong"):  # 240 registers a consumer thread, not 168 (setmaxnreg)
        limit = PPA.ACC_REGS_LIMIT
    if regs > limit:
        return (
            f"{regs:.0f} accumulator registers per thread (block {bM}x{bN}, D={D}, {threads} threads) "
            f"would spill; limit {limit}"
        )
    if cfg.get("pingpong"):
        if cfg["overlap"] or cfg.get("split_count"):
            return "pingpong is its own pipeline: not with overlap or split_count"
        if (bM, threads) != (PPA.CONSUMERS * PPA.ROWS, PPA.CONSUMERS * 128):
            return (
                f"pingpong gives each of its two consumer warpgroups {PPA.ROWS} query rows: block_M must be "
                f"{PPA.CONSUMERS * PPA.ROWS} and threads {PPA.CONSUMERS * 128} (the producer comes on top), "
                f"got {bM} and {threads}"
            )
        if cfg["num_stages"] < 2:
            # A consumer holds block t-1's stage for its PV while it waits for block t's.
            return f"pingpong keeps two key blocks in flight: num_stages must be at least 2, got {cfg['num_stages']}"
    elif cfg["overlap"]:
        # The overlap pipeline's three stages keep two K and two V buffers, and its
        # asynchronous gemms are WGMMA, issued per warpgroup of 128 threads.
        if cfg["num_stages"] != 2:
            return f"overlap double-buffers K and V: num_stages must be 2, got {cfg['num_stages']}"
        if threads % 128:
            return f"overlap issues WGMMA per warpgroup: threads must be a multiple of 128, got {threads}"
    elif cfg.get("split_count"):
        return "split_count splits the overlap schedule's causal loop: set overlap = True"
    return None


# ---------------------------------------------------------------- family


def _whole_keys(Skv: int) -> int | None:
    """The width of one key block holding every key, where that beats 64-wide blocks:
    Skv <= 256 and not a multiple of 64 (ViT's 197 in 208: 6% padding instead of 30% at 64
    or 256, and no online-softmax rescale); else None."""
    return C.round_up(Skv, 16) if Skv % 64 and Skv <= 256 else None


def _measured_first(D: int, causal: bool, Skv: int, one_wave: bool = False) -> KernelConfig:
    """The config measured fastest on the H200 for this kind of shape, fp16, against SDPA
    (python3 benchmarks/kernel_sweep.py --only attention;
    reports/examples/kernels/h200-2026-12-01/kernel_sweep_conv2d_rows_attention.json):
    at head dim 128 the warp-specialized 128x128 tile with one K/V stage (0.93x
    non-causal, 0.83x causal at 4x32x4096²); at head dim 64 the overlap schedule on one
    warpgroup when causal (1.02x at GPT-2's s512, 0.83x at s4096) or when the keys end
    in a partial block (0.91x at ViT's s197), and 128x64 tiles otherwise (1.25x at
    BERT's s128, where the 64-row tiles that give every SM a block reached 0.86x).
    Causal at head dim 64 with no more 128-row query blocks than SMs (`one_wave`:
    llama's 1x32 heads at s512) the 128x128 warp-specialized tile again: 1.08x against
    0.88x for the overlap schedule (kernel_sweep_views_conv2d_own.json, the same
    folder). Where one block a multiple of 16 wide holds every key (Skv <= 256, not a
    multiple of 64) the overlap schedule on that block: 1.12x at ViT's s197 in 64x208,
    against 1.07x for 64x64 (with fast math;
    reports/examples/kernels/h200-2026-12-03/kernel_sweep_attention_views_rows.json)."""
    if D > 64 or (causal and one_wave):
        return {"block_M": 128, "block_N": 128, "num_stages": 1, "threads": 256}
    if causal:
        return {"block_M": 64, "block_N": 128, "num_stages": 2, "threads": 128, "overlap": True}
    if _whole_keys(Skv):
        return {"block_M": 64, "block_N": _whole_keys(Skv), "num_stages": 2, "threads": 128, "overlap": True}
    if Skv % 64:
        return {"block_M": 64, "block_N": 64, "num_stages": 2, "threads": 128, "overlap": True}
    return {"block_M": 128, "block_N": 64, "num_stages": 1, "threads": 256}


class AttentionFamily(KernelFamily):
    name = "attention"
    title = "Attention forward (flash)"
    aten_ops = frozenset({SDPA})
    shape_names = (
        "B",
        "H",
        "Sq",
        "Skv",
        "D",
        "causal",
        "q_pitch",
        "k_pitch",
        "v_pitch",
        "kv_heads",
        "mask",
        "mask_dims",
    )
    optional_dims = 6  # contiguous q, k, v with a head each, no mask
    # SDPA's scale= (0: its default 1/sqrt(D)); a call's own scale builds the tuned config again.
    params = MappingProxyType({"scale": 0.0})
    # The dims `awkward_shape` moves off tile multiples: D stays (it is the tensor-core
    # K and N, a multiple of 16 on GPU), causal is a flag.
    awkward_dims = ("Sq", "Skv")

    # ------------------------------------------------------------ shapes

    def check(self, shape: Sequence[int]) -> Shape:
        """The shape as ints, or KernelError: five positive sizes, causal 0 or 1, and
        optionally three row pitches, each 0 or at least its operand's heads, the
        key/value heads (0 or H: as many as the queries'; else a divisor of H), and a
        mask kind (0-3) with its mask_dims (four binary digits; 0 without a mask; a
        masked shape is not causal). What says nothing is dropped (all-zero pitches,
        kv_heads 0 or H, no mask), so a call has one key whichever way it was written."""
        try:
            dims = tuple(int(s) for s in shape)
        except (TypeError, ValueError):
            dims = ()
        ok = len(dims) in (6, 9, 10, 12) and dims[5] in (0, 1) and all(d > 0 for d in dims[:5])
        kv = (dims[9] or dims[1]) if ok and len(dims) >= 10 else dims[1] if ok else 0
        kind, spread = dims[10:12] if ok and len(dims) == 12 else (0, 0)
        mask_ok = (
            kind in (P.MASK_NONE, P.MASK_BOOL, P.MASK_FLOAT, P.MASK_FP32)
            and 0 <= spread <= 1111
            and set(str(spread)) <= {"0", "1"}
            and (kind or not spread)
            and not (kind and dims[5])
        )
        if (
            not ok
            or kv <= 0
            or dims[1] % kv
            or not mask_ok
            or any(p != 0 and p < heads for p, heads in zip(dims[6:9], (dims[1], kv, kv)))
        ):
            raise KernelError(
                f"attention: shape must be (B, H, Sq, Skv, D, causal[, q_pitch, k_pitch, v_pitch"
                f"[, kv_heads[, mask, mask_dims]]]): five positive ints, causal 0 or 1, pitches 0 "
                f"(contiguous) or at least the operand's heads, kv_heads a divisor of H, mask 0 (none), "
                f"1 (bool), 2 (additive, the inputs' dtype) or 3 (additive float32) with mask_dims four "
                f"binary digits for [B, H, Sq, Skv] (1 where the mask varies), and no mask when causal, "
                f"got {tuple(shape)}"
            )
        # A one-head operand's view of pitch 1 is that operand contiguous (as row_pitch reads it).
        found = tuple(0 if p == heads == 1 else p for p, heads in zip(dims[6:9], (dims[1], kv, kv)))
        if kind:
            return tuple(dims[:6]) + (found or (0, 0, 0)) + (0 if kv == dims[1] else kv, kind, spread)
        if kv != dims[1]:
            return tuple(dims[:6]) + (found or (0, 0, 0)) + (kv,)
        return dims[:6] if not any(found) else dims[:6] + found

    def problem_shape(
        self,
        op: str,
        input_shapes: Sequence[Sequence[int]],
        concrete_inputs: Sequence[Any] | None = None,
        input_strides: Sequence[Sequence[int]] | None = None,
        input_dtypes: Sequence[str] | None = None,
    ) -> Shape | None:
        """The shape of one profiled aten::scaled_dot_product_attention.

        Input shapes alone cannot say whether the call was causal (is_causal is a
        scalar): pass the event's `concrete_inputs` (torch.profiler with
        record_shapes=True fills them: [None, None, None, mask, dropout_p, is_causal,
        scale, enable_gqa]). Without them the call is taken as non-causal. The scale is
        a kernel parameter, not part of the shape. A mask's broadcast dims come from
        its size and, where recorded, its strides (stride 0: expanded); its kind from
        `input_dtypes` (the event's, as torch.profiler names them: 'bool', 'float',
        'c10::Half'), else bool, the kind transformers passes; `layout_free` leaves
        both out, so the route's shape of the same call replaces a guess. Calls the
        kernel does not compute (dropout, a mask with is_causal, key/value heads that
        do not divide the query's, a value head dim different from D) map to None."""
        if op != SDPA:
            return None
        try:
            q, k, v = ([int(d) for d in s] for s in input_shapes[:3])
            if len(q) != 4 or len(k) != 4 or len(v) != 4:
                return None
            B, H, Sq, D = q
            Hkv = k[1]
            if k[0] != B or k[:2] != v[:2] or Hkv <= 0 or H % Hkv or k[3] != D or v[3] != D or k[2] != v[2]:
                return None
            strides = list(input_strides or []) + [None] * 4
            shapes = list(input_shapes) + [None] * 4
            names = list(input_dtypes or []) + [""] * 4
            mask = ()
            # No mask records as []; so does a 0-d one, which only its dtype tells apart.
            if shapes[ARG_MASK] or names[ARG_MASK]:
                spread = mask_dims_of(shapes[ARG_MASK], strides[ARG_MASK] or None, (B, H, Sq, k[2]))
                kind = _mask_kind_named(names[ARG_MASK], names[0])
                if spread is None or kind is None:
                    return None
                mask = (kind, spread)
            # The layouts the routed call will run: strided views in place, others copied.
            found = [row_pitch(s, st) if st else 0 for s, st in zip((q, k, v), strides[:3])]
            layout = tuple(p or 0 for p in found)
            causal = 0
            if concrete_inputs is not None:
                args = list(concrete_inputs) + [None] * 8
                if args[ARG_DROPOUT] not in (None, 0, 0.0):
                    return None
                causal = 1 if args[ARG_CAUSAL] else 0
            if mask and causal:
                return None
            tail = ((Hkv if Hkv != H else 0,) + mask) if mask else ((Hkv,) if Hkv != H else ())
            return self.check((B, H, Sq, k[2], D, causal) + layout + tail)
        except (IndexError, TypeError, ValueError, KernelError):
            return None

    def layout_free(self, shape: Shape) -> Shape:
        """The shape without what a profile cannot see: the row pitches, and a mask's
        kind and broadcast dims (bool or float and a stride-0 expand are not in its
        recorded sizes); the mask itself stays (kind 1, dims 0), so a masked call never
        matches an unmasked one."""
        shape = tuple(shape)
        if len(shape) > 10:
            return shape[:6] + (0, 0, 0, shape[9], P.MASK_BOOL if shape[10] else 0, 0)
        return shape[:6] + ((0, 0, 0) + shape[9:] if len(shape) > 9 else ())

    def standard_shapes(self, device: str) -> list[Shape]:
        if device == "cpu":
            # Each stays well under 50 ms per TileLang call on one core.
            return [
                (1, 2, 128, 128, 64, 0),
                (1, 2, 128, 128, 64, 1),
                (1, 4, 256, 256, 64, 1),
                self.awkward_shape((1, 2, 128, 128, 64, 1)),
            ]
        return [
            (8, 12, 128, 128, 64, 0),
            (4, 32, 4096, 4096, 64, 0),
            (4, 32, 4096, 4096, 128, 0),
            (4, 32, 4096, 4096, 128, 1),
            self.awkward_shape((1, 32, 4096, 4096, 128, 1)),
        ]

    # ------------------------------------------------------------ data

    def make_inputs(self, shape: Shape, dtype: str, device: str, seed: int) -> tuple[torch.Tensor, ...]:
        shape = self.check(shape)
        B, H, Sq, Skv, D, causal = shape[:6]
        pq, pk, pv = P.pitches(shape)
        Hkv = P.kv_heads(shape)
        dtype = C.canonical_dtype(dtype)
        g = C.generator(seed)
        # Unit-variance q, k give unit-variance scores after 1/sqrt(D): softmax rows
        # neither collapse to one key nor flatten to a plain average.
        if pq == pk == pv >= 3 * H and Sq == Skv and Hkv == H:
            # timm's packed qkv: three head ranges of one [B, S, pitch, D] projection.
            qkv = C.randn((B, Sq, pq, D), dtype, device, g)
            q, k, v = (qkv[:, :, i * H : (i + 1) * H].transpose(1, 2) for i in range(3))
        else:
            q, k, v = (
                C.randn((B, S, p, D), dtype, device, g)[:, :, :n].transpose(1, 2)
                if p
                else C.randn((B, n, S, D), dtype, device, g)
                for S, p, n in ((Sq, pq, H), (Skv, pk, Hkv), (Skv, pv, Hkv))
            )
        setattr(q, CAUSAL_ATTR, bool(causal))
        if P.mask_kind(shape) == P.MASK_NONE:
            return q, k, v
        return q, k, v, _make_mask(shape, dtype, device, g)

    def reference(self, *inputs: torch.Tensor) -> torch.Tensor:
        """F.scaled_dot_product_attention with the causal flag `make_inputs` put on q
        (a plain tensor attribute: it does not survive .to() or .clone()) and the mask,
        where the inputs have one, as attn_mask."""
        q, k, v = inputs[:3]
        causal = getattr(q, CAUSAL_ATTR, None)
        if causal is None:
            raise KernelError(
                f"attention: reference needs q from make_inputs (tagged with .{CAUSAL_ATTR}); "
                f"set q.{CAUSAL_ATTR} = True/False on other tensors"
            )
        extra = {"attn_mask": inputs[3]} if len(inputs) > 3 else {}
        if k.shape[1] != q.shape[1]:  # grouped-query heads
            extra["enable_gqa"] = True
        mask = extra.get("attn_mask")
        if mask is not None and mask.dtype not in (torch.bool, q.dtype):
            # A float32 mask beside 16-bit q, k, v: on CUDA the memory-efficient backend
            # rejects it and cuDNN's (Hopper's default) reads it as 16-bit values
            # (pytorch/pytorch#191612), so the reference is taken in float32.
            out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=bool(causal), **extra)
            return out.to(q.dtype)
        return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), **extra)

    def input_shapes(self, shape: Shape) -> list[tuple[int, ...]]:
        B, H, Sq, Skv, D = shape[:5]
        Hkv = P.kv_heads(shape)
        mask = [P.mask_shape(shape)] if P.mask_kind(shape) else []
        return [(B, H, Sq, D), (B, Hkv, Skv, D), (B, Hkv, Skv, D)] + mask

    # ------------------------------------------------------------ metrics

    def flops(self, shape: Shape) -> float:
        """Two matmuls of 2*Sq*Skv*D each per head; causal counts half, as
        FlashAttention's own benchmarks do."""
        B, H, Sq, Skv, D, causal = self.check(shape)[:6]
        f = 4.0 * B * H * Sq * Skv * D
        return f / 2 if causal else f

    def bytes(self, shape: Shape, dtype: str) -> float:
        """q, k, v and o once, and the mask once at the size it has (its broadcast dims 1)."""
        shape = self.check(shape)
        B, H, Sq, Skv, D = shape[:5]
        dtype = C.canonical_dtype(dtype)
        mask = 0.0
        if P.mask_kind(shape):
            per = {"uint8": 1, "float32": 4}.get(P.mask_dtype(shape, dtype)) or C.dtype_bytes(dtype)
            mask = float(math.prod(P.mask_shape(shape)) * per)
        return float(B * (2 * H * Sq + 2 * P.kv_heads(shape) * Skv) * D * C.dtype_bytes(dtype)) + mask

    def tolerance(self, dtype: str, shape: Shape | None = None) -> tuple[float, float]:
        """Outputs are softmax-weighted means of N(0, 1) values; with unit-variance
        scores their RMS is about sqrt(e / Skv) (0.026 at Skv = 4096), so atol is
        relative to that scale: a flat atol of 1e-2 would pass an all-zero output.
        fp32: summation order and expf differ (~1e-6 relative). fp16 (10-bit
        mantissa): each side rounds the output once (<= 1e-3 relative) and the GPU
        rounds P to fp16 before PV as FlashAttention does. bf16 (7-bit mantissa): the
        same with 8x coarser rounding. Without a shape, Skv = 1024 is assumed.
        Causal rows near the top average only a few keys: their probabilities are
        O(1), so rounding P costs up to one output ulp at magnitude 1 (2^-10 in fp16,
        2^-7 in bf16, measured on the H200: 9.8e-4 against SDPA at 4096 keys). That
        ulp floors the fp16/bf16 atol; it still fails an all-zero or misplaced output."""
        dtype = C.canonical_dtype(dtype)
        skv = int(shape[3]) if shape is not None else 1024
        rms = math.sqrt(math.e / max(1, skv))
        rel = {"float32": 2e-5, "float16": 5e-3, "bfloat16": 4e-2}[dtype]
        ulp_at_one = {"float32": 0.0, "float16": 2.0**-10, "bfloat16": 2.0**-7}[dtype]
        return (max(rel * rms, ulp_at_one), rel)

    # ------------------------------------------------------------ tuning

    def search_space(self, shape: Shape, dtype: str, hardware: Hardware) -> list[KernelConfig]:
        B, H, Sq, Skv, D, causal = self.check(shape)[:6]
        dtype = C.canonical_dtype(dtype)
        if C.is_cpu_target(hardware.target) or hardware.device == "cpu":
            return self._cpu_space(Sq, Skv, D)
        if dtype == "float32":
            # One candidate, so the tuner records why fp32 has no kernel on this device.
            return [dict(GPU_DEFAULTS)]
        return self._gpu_space(shape, dtype, hardware)

    def _cpu_space(self, Sq: int, Skv: int, D: int) -> list[KernelConfig]:
        def fitting(tiles):
            out = []
            for bM, bN in tiles:
                # Tiles much larger than the problem only add padding work.
                cfg = {"block_M": min(bM, C.round_up(Sq, 8)), "block_N": min(bN, C.round_up(Skv, 8))}
                if _cpu_local_bytes(cfg, D) <= CPU_LOCAL_LIMIT_BYTES:
                    out.append(cfg)
            return C.dedupe(out)

        # Small tiles only where a large head dim leaves no room for the usual ones.
        return fitting(((32, 64), (64, 64), (16, 128), (32, 32))) or fitting(((16, 16), (8, 8)))

    def _gpu_space(self, shape: Shape, dtype: str, hw: Hardware) -> list[KernelConfig]:
        B, H, Sq, Skv, D, causal = shape[:6]
        raw = [
            # (block_M, block_N, num_stages, threads): 128x128 with two consumer warpgroups
            # is what reaches peak on Hopper; smaller tiles serve short sequences (more
            # blocks) and tight shared memory. One K/V stage first: on the H200 it beat
            # two and three on every shape of benchmarks/kernel_sweep.py but GPT-2's s512
            # causal, where two led by 2% (reports/examples/kernels/h200-2026-12-01/
            # kernel_sweep_gemm_skinny_attention_rows.json).
            (128, 128, 1, 256),
            # FlashAttention-3's forward (`pingpong`, attention/pingpong): it verifies and
            # runs on the H100 and trails the family's other configs at every shape there
            # (reports/examples/kernels/h100-2026-12-05/), so it stays behind the measured
            # first config; 176 keys a block is FlashAttention-3's own tile at head dim 128.
            (128, 128, 2, 256, "pingpong"),
            (128, 176, 2, 256, "pingpong"),
            # FlashAttention-3-style overlap (see `overlap` in the module docstring):
            # untested on the H200 when added, so behind the measured first config.
            (128, 128, 2, 256, True),
            (128, 64, 2, 256, True),
            (128, 64, 1, 256),
            (128, 128, 2, 256),
            (128, 64, 2, 256),
            (128, 64, 3, 256),
            (128, 128, 3, 256),
            (64, 128, 2, 128),
            (64, 64, 2, 128),
            (64, 128, 2, 128, True),
            (64, 64, 2, 128, True),
            # Fits 48 KB of shared memory per block (older GPUs) even at D = 128.
            (64, 32, 1, 128),
        ]
        whole = _whole_keys(Skv)
        if whole:  # every key in one block
            raw[1:1] = [(64, whole, 2, 128, True), (128, whole, 1, 256), (64, whole, 1, 128)]
        extra = {True: {"overlap": True}, "pingpong": {"pingpong": True}}
        cands = [
            {"block_M": m, "block_N": n, "num_stages": s, "threads": t, **(extra[rest[0]] if rest else {})}
            for m, n, s, t, *rest in raw
        ]
        # FlashAttention-3's 176-key tile is its non-causal one, and only pays past one block.
        cands = [c for c in cands if not (c.get("pingpong") and c["block_N"] > 128 and (causal or Skv <= c["block_N"]))]
        fitting = [c for c in cands if self.reject_reason(shape, dtype, c, hw) is None]
        one_wave = B * H * C.ceildiv(Sq, 128) <= max(1, int(hw.cores or 1))
        best = _measured_first(D, bool(causal), Skv, one_wave)
        if best in fitting:
            fitting.remove(best)
            # Not `split_count`: it keeps ptxas from serializing the causal one-warpgroup
            # 64x128 tile's wgmmas (C7514), and on the H200 ran slower all the same, 0.61x
            # SDPA against 0.83x at 4x32x4096²x64 causal and 0.81x against 1.02x at GPT-2's
            # s512 (reports/examples/kernels/h200-2026-12-03/kernel_sweep_swap_attention.json).
            return [best] + fitting
        # Elsewhere (no sm_90, little shared memory): the largest query tile that still
        # gives every SM a block, from the warp-specialized schedules.
        sms = max(1, int(hw.cores or 1))
        blocks = lambda c: B * H * C.ceildiv(Sq, c["block_M"])  # noqa: E731
        measured = [c for c in fitting if not c.get("overlap") and not c.get("pingpong")]
        full = [c for c in measured if blocks(c) >= sms]
        if full and full[0] is not fitting[0]:
            fitting.remove(full[0])
            fitting.insert(0, full[0])
        elif not full and measured:
            first = max(measured, key=lambda c: (blocks(c), -fitting.index(c)))
            fitting.remove(first)
            fitting.insert(0, first)
        return fitting

    def limits_error(self, shape: Shape, dtype: str, cfg: dict, hardware: Hardware) -> str | None:
        D = shape[4]
        if C.targets_cpu(hardware):
            local = _cpu_local_bytes(cfg, D)
            return (
                None
                if local <= CPU_LOCAL_LIMIT_BYTES
                else (f"local tiles need {local} bytes of stack, limit {CPU_LOCAL_LIMIT_BYTES}")
            )
        smem = _gpu_smem(cfg, D, dtype)
        if not C.smem_fits(smem, hardware):
            return f"needs {smem} bytes of shared memory, the device allows {hardware.smem_per_block} per block"
        return None

    def needs(self, shape: Shape, dtype: str, cfg: dict) -> tuple[tuple[str, tuple[str, ...]], ...]:
        # Both issue asynchronous wgmma; pingpong's producer loads by TMA and splits the
        # registers with setmaxnreg, overlap loads by cp.async.
        if cfg.get("pingpong"):
            return (("pingpong", ("wgmma", "tma", "setmaxnreg")),)
        return (("overlap", ("wgmma", "cp_async")),) if cfg.get("overlap") else ()

    # ------------------------------------------------------------ build

    cpu_schedule = Schedule(CPU_DEFAULTS, P.cpu_program)
    gpu_schedule = Schedule(GPU_DEFAULTS, P.gpu_program)

    def schedule(self, shape: Shape, dtype: str, target: str) -> Schedule:
        if not C.is_cpu_target(target) and dtype == "float32":
            raise KernelError(_FP32_GPU)
        return super().schedule(shape, dtype, target)

    def config_error(self, shape: Shape, dtype: str, cfg: dict, target: str) -> str | None:
        if C.is_cpu_target(target):
            if cfg["block_M"] <= 0 or cfg["block_N"] <= 0:
                return f"block_M and block_N must be positive, got {cfg}"
            return None
        return _gpu_config_error(cfg, shape[4], shape[3])

    def compile(self, resolved: Any, target: str) -> Callable[..., torch.Tensor]:
        launcher = super().compile(resolved, target)
        if P.mask_kind(resolved.shape):
            return MaskedAttention(launcher)
        return StridedAttention(launcher) if any(P.pitches(resolved.shape)) else launcher

    # ------------------------------------------------------------ swap-in (at the operator)

    functions = (F.scaled_dot_product_attention,)

    def route(self, func: Callable, args: tuple, kwargs: dict, dtype: str) -> Route | str:
        """One SDPA call, from any call site, as its shape and scale, or why not."""
        q, k, v = (arg(args, kwargs, i, n) for i, n in enumerate(("query", "key", "value")))
        mask = arg(args, kwargs, 3, "attn_mask")
        dropout = arg(args, kwargs, 4, "dropout_p", 0.0)
        causal = bool(arg(args, kwargs, 5, "is_causal", False))
        scale = arg(args, kwargs, 6, "scale")
        if dropout:
            return "dropout"
        if mask is not None and causal:
            return "explicit attention mask with is_causal"
        if mask is not None and not isinstance(mask, torch.Tensor):
            return "attention mask not a tensor"
        gqa = bool(arg(args, kwargs, 7, "enable_gqa", False))
        if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
            return "not [batch, heads, seq, head_dim]"
        B, H, Sq, D = (int(s) for s in q.shape)
        Skv, Hkv = int(k.shape[2]), int(k.shape[1])
        if int(k.shape[0]) != B or int(k.shape[3]) != D:
            return "the key's batch or head dim differs from the query's"
        if tuple(k.shape[:3]) == tuple(v.shape[:3]) and int(v.shape[3]) != D:
            # DeepSeek's latent attention: q and k carry the rotary part, v does not
            return f"value head dim {int(v.shape[3])}, not the query's {D}: the kernel reads one head dim"
        if tuple(k.shape) != tuple(v.shape):
            return "key and value shapes differ"
        if Hkv != H and not (gqa and Hkv > 0 and H % Hkv == 0):
            return "key/value heads differ from the query's" + ("" if gqa else " without enable_gqa")
        params = {}
        if scale is not None:
            scale = float(scale)
            if not (scale > 0 and math.isfinite(scale)):
                return "softmax scale not positive and finite"
            if abs(scale * math.sqrt(D) - 1.0) > 1e-6:  # SDPA's default, written out: the tuned kernel
                params = {"scale": scale}
        bad = dtype_mismatch(dtype, q, k, v)
        if bad:
            return bad
        if min(B, H, Sq, Skv, D) <= 0:
            return "empty input"
        masking: tuple[int, ...] = ()
        if mask is not None:
            kind = mask_kind_of(mask, q)
            if kind is None:
                return f"attention mask of dtype {str(mask.dtype).removeprefix('torch.')}"
            spread = mask_dims_of(mask.shape, mask.stride(), (B, H, Sq, Skv))
            if spread is None or mask.device != q.device:
                return "attention mask not broadcastable to [B, H, Sq, Skv] on the query's device"
            masking = (Hkv if Hkv != H else 0, kind, spread)
        # Hugging Face and timm blocks hand SDPA transposed views of their projections: the
        # kernel reads those in place. Any other layout is copied, in the measured time.
        found = [row_pitch(t.shape, t.stride()) if t.data_ptr() % 16 == 0 else None for t in (q, k, v)]
        layout = tuple(p or 0 for p in found)
        copied = any(p is None for p in found)

        notes = ("q/k/v copied to contiguous",) if copied else ()
        shape = self.check((B, H, Sq, Skv, D, int(causal)) + layout + (masking or ((Hkv,) if Hkv != H else ())))
        # The mask as the kernel reads it: index 0 on its broadcast dims, so an expanded
        # mask (stride 0) is not materialized; another layout is copied.
        m = broadcast_mask(mask, P.mask_shape(shape)) if masking else None
        copy_mask = m is not None and (not m.is_contiguous() or m.data_ptr() % 16 != 0)
        notes += ("mask copied to contiguous",) if copy_mask else ()

        def launch(kernel: Callable[..., torch.Tensor]) -> torch.Tensor:
            operands = [t if p is not None else t.contiguous() for t, p in zip((q, k, v), found)]
            if m is not None:
                operands.append(m.clone(memory_format=torch.contiguous_format) if copy_mask else m)
            return kernel(*operands)

        return Route(shape, launch, params=params, notes=notes)


def _make_mask(shape: Shape, dtype: str, device: str, g: torch.Generator) -> torch.Tensor:
    """A mask of the shape's kind at its broadcast size, as models make them: a bool
    mask keeps about 3 keys in 4; an additive one is an N(0, 1) bias (a relative-position
    bias's scale) with about 1 key in 5 at the dtype's float min (transformers' padding).
    Every query row keeps at least one key: a fully masked row is a test of its own
    (its reference differs between PyTorch's backends)."""
    size = P.mask_shape(shape)
    kind = P.mask_kind(shape)
    keep = torch.rand(size, generator=g) < 0.75
    if size[3] > 1:
        one = torch.randint(0, size[3], size[:3] + (1,), generator=g)
        keep.scatter_(3, one, True)
    else:  # one key value for every key: a row keeps all of them
        keep.fill_(True)
    if kind == P.MASK_BOOL:
        return keep.to(device)
    mdtype = C.torch_dtype(P.mask_dtype(shape, dtype))
    bias = torch.randn(size, generator=g).to(mdtype)
    return bias.masked_fill(~keep, torch.finfo(mdtype).min).to(device).contiguous()


def mask_dims_of(size: Sequence[int], strides: Sequence[int] | None, target: Sequence[int]) -> int | None:
    """`mask_dims` of a mask of this size (and strides, where known) as SDPA broadcasts
    it to target [B, H, Sq, Skv]: a digit 1 for each dim along which it varies (not
    size 1, not stride 0), right-aligned as PyTorch broadcasts; None when it does not
    broadcast to target."""
    size = [int(n) for n in size]
    if len(size) > 4 or (strides is not None and len(strides) != len(size)):
        return None
    pad = 4 - len(size)
    size = [1] * pad + size
    strides = [0] * pad + [int(n) for n in strides] if strides is not None else [None] * 4
    if any(n not in (1, t) for n, t in zip(size, target)):
        return None
    return int("".join("1" if n > 1 and st != 0 else "0" for n, st in zip(size, strides)))


# torch.profiler's names of a mask's dtype, and of the query's beside an fp32 mask.
_BOOL_NAMES, _FP32_NAMES = ("bool",), ("float",)


def _mask_kind_named(mask: str, query: str) -> int | None:
    """The mask kind of a profiled call from its recorded dtypes: bool when unknown (the
    kind transformers passes), None for a dtype SDPA refuses."""
    if not mask or mask in _BOOL_NAMES:
        return P.MASK_BOOL
    if mask == query:
        return P.MASK_FLOAT
    return P.MASK_FP32 if mask in _FP32_NAMES else None


def mask_kind_of(mask: torch.Tensor, query: torch.Tensor) -> int | None:
    """The mask kind of a mask tensor beside this query, or None for a dtype SDPA refuses."""
    if mask.dtype == torch.bool:
        return P.MASK_BOOL
    if mask.dtype == query.dtype:
        return P.MASK_FLOAT
    return P.MASK_FP32 if mask.dtype == torch.float32 else None


def row_pitch(shape: Sequence[int], strides: Sequence[int]) -> int | None:
    """How one [B, H, S, D] operand lies in memory: 0 when contiguous, p when it is heads
    of a row-major [B, S, p, D] buffer (strides S*p*D, D, p*D, 1 with p >= H), None for
    anything else (the route copies it). Size-1 dims may have any stride, as in PyTorch."""
    try:
        B, H, S, D = (int(n) for n in shape)
        sB, sH, sS, sD = (int(n) for n in strides)
    except (TypeError, ValueError):
        return None

    def fits(size: int, stride: int, want: int) -> bool:
        return size == 1 or stride == want

    if not fits(D, sD, 1):
        return None
    if fits(S, sS, D) and fits(H, sH, S * D) and fits(B, sB, H * S * D):
        return 0
    pitch = sS // D if S > 1 else H
    if fits(H, sH, D) and S > 1 and sS % D == 0 and pitch >= H and fits(B, sB, S * pitch * D):
        return pitch
    return None


class StridedAttention(C.LauncherWrapper):
    """The kernel of a shape with row pitches: q, k and v reach it as the views they are
    (TileLang checks their strides against the pitches the kernel was built for), and a
    strided q's output, written as [B, Sq, H, D], comes back as its [B, H, Sq, D] view,
    the layout PyTorch's flash SDPA returns for such a q."""

    def __init__(self, launcher: C.Launcher):
        super().__init__(launcher)
        self.pitches = P.pitches(launcher.shape)

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        self.check_pitches(q, k, v)
        args = self.launcher.check_inputs((q, k, v), keep_strides=[bool(p) for p in self.pitches])
        return self.output(self.launcher.kernel(*args))

    def check_pitches(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        for i, (t, p) in enumerate(zip((q, k, v), self.pitches)):
            got = row_pitch(t.shape, t.stride())
            if p and got != p:
                raise KernelError(
                    f"attention: input {i} has strides {tuple(t.stride())} (row pitch {got}); "
                    f"the kernel was built for row pitch {p}"
                )

    def output(self, out: torch.Tensor) -> torch.Tensor:
        return out.transpose(1, 2) if self.pitches[0] else out


def broadcast_mask(mask: torch.Tensor, size: Sequence[int]) -> torch.Tensor:
    """A view of `mask` (broadcastable to [B, H, Sq, Skv]) at `size`, the kernel's mask
    tensor: leading dims added, and each dim of size 1 in `size` narrowed to its first
    index (where the mask is expanded along it, that index holds every value)."""
    m = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape)) if mask.dim() < 4 else mask
    for d, n in enumerate(size):
        if n == 1 and m.shape[d] != 1:
            m = m.narrow(d, 0, 1)
    return m.expand(*size)


class MaskedAttention(C.LauncherWrapper):
    """The kernel of a masked shape: q, k, v as `StridedAttention` takes them, and the
    mask at the kernel's size (`attention/programs.mask_shape`): a bool mask goes to
    the kernel as its bytes, an additive one in its own dtype (the inputs', or float32)."""

    def __init__(self, launcher: C.Launcher):
        super().__init__(launcher)
        self.strided = StridedAttention(launcher)
        shape = launcher.shape
        self.mask_size = P.mask_shape(shape)
        self.mask_dtype = (
            torch.bool if P.mask_kind(shape) == P.MASK_BOOL else C.torch_dtype(P.mask_dtype(shape, launcher.dtype))
        )

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if tuple(mask.shape) != self.mask_size or mask.dtype != self.mask_dtype:
            raise KernelError(
                f"attention: the mask is {tuple(mask.shape)} {mask.dtype}; the kernel was built "
                f"for {self.mask_size} {self.mask_dtype}"
            )
        self.strided.check_pitches(q, k, v)
        want, args = C.torch_dtype(self.launcher.dtype), []
        for i, (t, size, p) in enumerate(zip((q, k, v), self.launcher.input_shapes, self.strided.pitches)):
            if tuple(t.shape) != size or t.dtype != want:
                raise KernelError(
                    f"attention: input {i} is {tuple(t.shape)} {t.dtype}; the kernel was built for {size} {want}"
                )
            args.append(t.detach() if p else t.detach().contiguous())
        m = mask.detach().contiguous()
        args.append(m.view(torch.uint8) if m.dtype == torch.bool else m)
        return self.strided.output(self.launcher.kernel(*args))


_FP32_GPU = (
    "attention: float32 has no GPU schedule (T.gemm on fp32 runs as TF32 and would not match "
    "PyTorch's fp32); use float16 or bfloat16 on CUDA"
)


FAMILY = AttentionFamily()


# The registry (evaluator.kernels) registers these, in this order.
FAMILIES = (FAMILY,)
