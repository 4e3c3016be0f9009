"""The TileLang programs of the attention family (see attention.py for what they compute).

In: shape (B, H, Sq, Skv, D, causal[, q_pitch, k_pitch, v_pitch[, kv_heads[, mask,
mask_dims]]]), a dtype and a full config (the schedule's defaults and the kernel parameter
`scale` filled in). A pitch of 0 declares that operand
contiguous [B, heads, S, D]; a pitch p >= its heads declares it the transposed view a model
hands SDPA, heads of a row-major [B, S, p, D] buffer (strides S*p*D, D, p*D, 1): p = H for
`x.view(B, S, H, D).transpose(1, 2)`, 3H for timm's packed qkv. kv_heads (grouped-query
attention, SDPA's enable_gqa: llama 2/3's, Mistral's) gives k and v that many heads, a
divisor of H; query head h reads key/value head h // (H // kv_heads). The programs read such views in place
(TileLang strided buffers), and with a strided q write O as [B, Sq, H, D], which the
family hands back transposed, as PyTorch's flash SDPA does. Out: a TileLang PrimFunc: on CPU an online-softmax loop
over fp32 local
tiles, one (batch, head, query block) per kernel block; on CUDA FlashAttention with
tensor-core gemms for QK^T and PV, the K/V loop chosen by `overlap`: FlashAttention-2's
loop with synchronous `T.gemm` (warp-specialized by TileLang), or a hand-ordered
software pipeline with asynchronous WGMMA (FlashAttention-3's softmax/gemm overlap);
with `pingpong` the whole kernel is `attention/pingpong`'s (a TMA producer warpgroup and
two consumer warpgroups, FlashAttention-3's forward).
Both mask only the key blocks on the causal diagonal or at the Skv tail (`kv_blocks`), and
both carry `tl.enable_fast_math` unless `cfg["fast_math"]` is off (see `gpu_program`).
With a mask (`mask_kind`), every program takes it as one more input before O, at its
broadcast size (`mask_shape`, index 0 along the dims it does not vary along; a bool mask
as its bytes), and applies it to each score tile once the tile lands (`apply_mask`: q.k *
scale + mask, -inf where a bool mask hides the key); the softmax then runs on those
scores, and a row hidden from every key ends as 0. A program without a mask has none of
this in its source.
Checking configs and compiling are the family's (attention.py, base.py); nothing here
runs a kernel.
"""

# No `from __future__ import annotations`: TileLang resolves the prim_func's tensor
# annotations from the closure, and names used only there (B, ...) are not in it.

import math
from typing import Any

from ...errors import KernelError
from ...results import Shape
from . import pingpong as PPA
from .shapes import (  # noqa: F401  (the family and tests read them as the programs' too)
    MASK_BOOL,
    MASK_FLOAT,
    MASK_FP32,
    MASK_NONE,
    NEG_INF_BITS,
    NEG_INF_BITS_16,
    NEG_MAX_BITS,
    kv_head,
    kv_heads,
    mask_dims,
    mask_dtype,
    mask_kind,
    mask_shape,
    pitches,
)
from .. import common as C

ACCUM = "float32"
LOG2E = 1.4426950408889634
# A large finite "minus infinity" for the C backend: it is compiled with -ffast-math
# (finite-math-only), under which gcc may fold comparisons against a real -inf.
CPU_NEG = -1.0e30


def operand(T, pitch: int, B: int, H: int, S: int, D: int, dtype: str):
    """The TileLang parameter type of one [B, H, S, D] operand with this row pitch."""
    if not pitch:
        return T.Tensor((B, H, S, D), dtype)
    return T.StridedTensor((B, H, S, D), (S * pitch * D, D, pitch * D, 1), dtype)


def softmax_scale(shape: Shape, cfg: dict[str, Any]) -> float:
    """The kernel parameter `scale` (SDPA's scale=), 0 standing for SDPA's default 1/sqrt(D).
    Positive: the unmasked GPU softmax takes the row max of unscaled scores."""
    scale = float(cfg.get("scale") or 0.0)
    if scale < 0 or not math.isfinite(scale):
        raise KernelError(f"attention: scale must be positive and finite (0: 1/sqrt(D)), got {scale}")
    return scale or 1.0 / math.sqrt(shape[4])


def mask_at(Mask, shape: Shape, b, h, q, k):
    """Mask[b, h, q, k] with index 0 on the dims the mask broadcasts along."""
    full = mask_dims(shape)
    return Mask[tuple(i if f else 0 for i, f in zip((b, h, q, k), full))]


def output_shape(shape: Shape) -> tuple[int, int, int, int]:
    """The kernel's output tensor: [B, H, Sq, D], or [B, Sq, H, D] when q is a strided view."""
    B, H, Sq, _, D = shape[:5]
    return (B, Sq, H, D) if pitches(shape)[0] else (B, H, Sq, D)


def cpu_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    import tilelang.cpu.language as T

    B, H, Sq, Skv, D, causal = shape[:6]
    pq, pk, pv = pitches(shape)
    Hkv = kv_heads(shape)
    bshd_out = bool(pq)
    causal = bool(causal)
    bM, bN = cfg["block_M"], cfg["block_N"]
    scale = softmax_scale(shape, cfg)
    n_kv = C.ceildiv(Skv, bN)
    kv_tail = Skv % bN != 0
    kind = mask_kind(shape)
    masked = kind != MASK_NONE
    q_full = mask_dims(shape)[2]

    def readable(q, k):
        """Whether (q, k) lies inside the mask: keys past Skv never do, rows past Sq only
        where the mask has rows (they are computed, never stored)."""
        return T.And(k < Skv, q < Sq) if q_full else k < Skv

    def hidden(M, b, h, q, k):
        """Whether the mask hides key k from query q: False in a bool mask, -inf in an
        additive one (its bits compared: -ffast-math may fold a compare with -inf)."""
        if kind == MASK_BOOL:
            return mask_at(M, shape, b, h, q, k) == T.uint8(0)
        if mask_dtype(shape, dtype) == "float16":
            return T.reinterpret(mask_at(M, shape, b, h, q, k), "int16") == T.int16(NEG_INF_BITS_16)
        return T.reinterpret(mask_at(M, shape, b, h, q, k), "int32") == T.int32(NEG_INF_BITS)

    @T.macro
    def body(Q, K, V, M, O):
        with T.Kernel(T.ceildiv(Sq, bM), B * H) as (bx, bh):
            # fp32 tiles whatever the storage dtype: half.hpp arithmetic is scalar and slow.
            Q_l = T.alloc_local((bM, D), ACCUM)
            Kt_l = T.alloc_local((D, bN), ACCUM)
            V_l = T.alloc_local((bN, D), ACCUM)
            S_l = T.alloc_local((bM, bN), ACCUM)
            acc = T.alloc_local((bM, D), ACCUM)
            m_l = T.alloc_local((bM,), ACCUM)
            l_l = T.alloc_local((bM,), ACCUM)
            m_new = T.alloc_var(ACCUM)
            corr = T.alloc_var(ACCUM)
            row_sum = T.alloc_var(ACCUM)
            if masked:
                seen = T.alloc_local((bN,), "int32")  # the keys of this row that the mask lets through
                neg_max = T.alloc_var("int32")
                neg_max = T.int32(NEG_MAX_BITS)
            b = bh // H
            h = bh % H
            hk = kv_head(h, shape)
            q0 = bx * bM
            # The softmax scale is folded into Q once instead of into every score.
            for i, d in T.grid(bM, D):
                Q_l[i, d] = T.if_then_else(
                    q0 + i < Sq, T.cast(Q[b, h, q0 + i, d], ACCUM) * T.float32(scale), T.float32(0)
                )
            T.clear(acc)
            for i in T.serial(bM):
                # Masked: below every finite score, so that a row whose every score is an
                # additive mask's float min still averages its keys, as PyTorch's does.
                if masked:
                    m_l[i] = T.reinterpret(neg_max, ACCUM)
                else:
                    m_l[i] = T.float32(CPU_NEG)
                l_l[i] = T.float32(0)
            # Causal: key blocks entirely right of this query block's last row are skipped.
            n_blocks = T.min(n_kv, T.ceildiv(q0 + bM, bN)) if causal else n_kv
            for kb in T.serial(n_blocks):
                k0 = kb * bN
                # K transposed on the way in so the score loop streams rows of both tiles.
                for j, d in T.grid(bN, D):
                    Kt_l[d, j] = T.if_then_else(k0 + j < Skv, T.cast(K[b, hk, k0 + j, d], ACCUM), T.float32(0))
                for j, d in T.grid(bN, D):
                    V_l[j, d] = T.if_then_else(k0 + j < Skv, T.cast(V[b, hk, k0 + j, d], ACCUM), T.float32(0))
                T.clear(S_l)
                # i-d-j order: the j loop is unit-stride in S_l and Kt_l, which gcc vectorizes.
                for i, d in T.grid(bM, D):
                    for j in T.serial(bN):
                        S_l[i, j] += Q_l[i, d] * Kt_l[d, j]
                for i in T.serial(bM):
                    if masked:
                        # Rows past Sq are never stored; where the mask has rows, they are not read.
                        for j in T.serial(bN):
                            if readable(q0 + i, k0 + j):
                                seen[j] = T.if_then_else(hidden(M, b, h, q0 + i, k0 + j), 0, 1)
                            else:
                                seen[j] = 0
                        if kind != MASK_BOOL:
                            for j in T.serial(bN):
                                if seen[j] == 1:
                                    S_l[i, j] += T.cast(mask_at(M, shape, b, h, q0 + i, k0 + j), ACCUM)
                        # Hidden keys take no part in the max and weigh exactly 0.
                        m_new = m_l[i]
                        for j in T.serial(bN):
                            m_new = T.if_then_else(seen[j] == 1, T.max(m_new, S_l[i, j]), m_new)
                        corr = T.exp(m_l[i] - m_new)
                        row_sum = T.float32(0)
                        for j in T.serial(bN):
                            S_l[i, j] = T.if_then_else(seen[j] == 1, T.exp(S_l[i, j] - m_new), T.float32(0))
                            row_sum += S_l[i, j]
                    else:
                        if causal:
                            for j in T.serial(bN):
                                S_l[i, j] = T.if_then_else(
                                    (k0 + j <= q0 + i) and (k0 + j < Skv), S_l[i, j], T.float32(CPU_NEG)
                                )
                        elif kv_tail:
                            for j in T.serial(bN):
                                S_l[i, j] = T.if_then_else(k0 + j < Skv, S_l[i, j], T.float32(CPU_NEG))
                        m_new = m_l[i]
                        for j in T.serial(bN):
                            m_new = T.max(m_new, S_l[i, j])
                        # Rescale what was accumulated under the old running max.
                        corr = T.exp(m_l[i] - m_new)
                        row_sum = T.float32(0)
                        for j in T.serial(bN):
                            S_l[i, j] = T.exp(S_l[i, j] - m_new)
                            row_sum += S_l[i, j]
                    l_l[i] = l_l[i] * corr + row_sum
                    m_l[i] = m_new
                    for d in T.serial(D):
                        acc[i, d] *= corr
                    # i-j-d order: the d loop is unit-stride in acc and V_l.
                    for j in T.serial(bN):
                        for d in T.serial(D):
                            acc[i, d] += S_l[i, j] * V_l[j, d]
            if masked:
                # A row the mask hides entirely sums to 0 and gives 0, as PyTorch's SDPA does.
                for i in T.serial(bM):
                    l_l[i] = T.if_then_else(l_l[i] > T.float32(0), T.float32(1) / l_l[i], T.float32(0))
                for i, d in T.grid(bM, D):
                    if q0 + i < Sq:
                        if bshd_out:
                            O[b, q0 + i, h, d] = T.cast(acc[i, d] * l_l[i], dtype)
                        else:
                            O[b, h, q0 + i, d] = T.cast(acc[i, d] * l_l[i], dtype)
            else:
                for i, d in T.grid(bM, D):
                    if q0 + i < Sq:
                        if bshd_out:
                            O[b, q0 + i, h, d] = T.cast(acc[i, d] / l_l[i], dtype)
                        else:
                            O[b, h, q0 + i, d] = T.cast(acc[i, d] / l_l[i], dtype)

    if masked:

        @T.prim_func
        def attention_cpu_masked(
            Q: operand(T, pq, B, H, Sq, D, dtype),
            K: operand(T, pk, B, Hkv, Skv, D, dtype),
            V: operand(T, pv, B, Hkv, Skv, D, dtype),
            M: T.Tensor(mask_shape(shape), mask_dtype(shape, dtype)),
            O: T.Tensor(output_shape(shape), dtype),
        ):
            body(Q, K, V, M, O)

        return attention_cpu_masked

    @T.prim_func
    def attention_cpu(
        Q: operand(T, pq, B, H, Sq, D, dtype),
        K: operand(T, pk, B, Hkv, Skv, D, dtype),
        V: operand(T, pv, B, Hkv, Skv, D, dtype),
        O: T.Tensor(output_shape(shape), dtype),
    ):
        body(Q, K, V, None, O)

    return attention_cpu


def kv_blocks(bx, bM: int, bN: int, Skv: int, causal: bool, minimum=min):
    """(key blocks to visit, leading key blocks that need no mask) for query block bx,
    in ints or, with `minimum=T.min` and a TileLang bx, in TileLang expressions.
    Causal (top-left): query row i sees keys j <= i, so blocks past the diagonal of
    this query block contribute nothing and are never loaded. A block below the second
    count has every key < Skv and, causal, <= the block's first query row: only the
    diagonal block(s) and the Skv tail pay for the per-element mask."""
    if causal:
        return (minimum((Skv + bN - 1) // bN, ((bx + 1) * bM + bN - 1) // bN), minimum(Skv // bN, (bx * bM + 1) // bN))
    return (Skv + bN - 1) // bN, Skv // bN


def gpu_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    """FlashAttention forward for CUDA; `cfg["overlap"]` picks the K/V loop (see
    `_ws_loop` and `_overlap_loop`), everything around the loop is shared. With a mask
    the kernel takes it as a fifth input (`mask_shape`, `mask_dtype`) before O."""
    import tilelang.language as T

    B, H, Sq, Skv, D, causal = shape[:6]
    pq, pk, pv = pitches(shape)
    Hkv = kv_heads(shape)
    causal = bool(causal)
    masked = mask_kind(shape) != MASK_NONE
    bM, threads = cfg["block_M"], cfg["threads"]
    n_q = C.ceildiv(Sq, bM)
    if cfg.get("pingpong"):
        # The shared pieces on one consumer warpgroup's rows; the key blocks on the block's.
        rows = _gpu_parts(T, shape, dtype, {**cfg, "block_M": PPA.ROWS})
        program = PPA.pingpong_program(
            shape,
            dtype,
            cfg,
            rows,
            lambda bx: kv_blocks(bx, bM, cfg["block_N"], Skv, causal, T.min),
            operand,
            output_shape,
        )
        return C.with_fast_math(program, cfg["fast_math"])
    parts = _gpu_parts(T, shape, dtype, cfg)
    kv_loop = (_overlap_loop if cfg["overlap"] else _ws_loop)(T, shape, dtype, cfg, parts)
    finish = parts["finish"]

    @T.macro
    def body(Q, K, V, M, O):
        with T.Kernel(n_q, H, B, threads=threads) as (bq, by, bz):
            # Causal work grows with the query block; blocks launch in x order, so the
            # longest go first and the short ones fill the tail of the last wave.
            bx = n_q - 1 - bq if causal else bq
            Q_s = T.alloc_shared((bM, D), dtype)
            O_s = T.alloc_shared((bM, D), dtype)
            acc_o = T.alloc_fragment((bM, D), ACCUM)
            m_cur = T.alloc_fragment((bM,), ACCUM)
            l_sum = T.alloc_fragment((bM,), ACCUM)

            # Rows past Sq read as zeros (bounds-checked copy) and are never stored.
            T.copy(Q[bz, by, bx * bM : (bx + 1) * bM, :], Q_s)
            T.fill(acc_o, 0)
            T.fill(l_sum, 0)
            T.fill(m_cur, -T.infinity(ACCUM))
            kv_loop(K, V, M, Q_s, acc_o, m_cur, l_sum, bx, kv_head(by, shape), by, bz)
            finish(acc_o, l_sum)
            # Staged through shared memory so the global store is coalesced (TMA on sm_90).
            T.copy(acc_o, O_s)
            if pq:
                T.copy(O_s, O[bz, bx * bM : (bx + 1) * bM, by, :])
            else:
                T.copy(O_s, O[bz, by, bx * bM : (bx + 1) * bM, :])

    if masked:

        @T.prim_func
        def attention_fwd_masked(
            Q: operand(T, pq, B, H, Sq, D, dtype),
            K: operand(T, pk, B, Hkv, Skv, D, dtype),
            V: operand(T, pv, B, Hkv, Skv, D, dtype),
            M: T.Tensor(mask_shape(shape), mask_dtype(shape, dtype)),
            O: T.Tensor(output_shape(shape), dtype),
        ):
            body(Q, K, V, M, O)

        return C.with_fast_math(attention_fwd_masked, cfg["fast_math"])

    @T.prim_func
    def attention_fwd(
        Q: operand(T, pq, B, H, Sq, D, dtype),
        K: operand(T, pk, B, Hkv, Skv, D, dtype),
        V: operand(T, pv, B, Hkv, Skv, D, dtype),
        O: T.Tensor(output_shape(shape), dtype),
    ):
        body(Q, K, V, None, O)

    # nvcc --use_fast_math: each score's exp2f becomes one MUFU.EX2 (ftz) instead of MUFU.EX2
    # with a compare and two multiplies guarding denormal results, and the final 1/l_sum an
    # approximate division. The sm_90a build of GPT-2's causal config goes from 3832 SASS
    # instructions to 2488, the d128 first config from 2304 to 1120 (benchmarks/ptx_stats.py);
    # without it Nsight Compute counted 1.39x cuDNN's instructions at d64 causal on the H200.
    return C.with_fast_math(attention_fwd, cfg["fast_math"])


def _gpu_parts(T, shape: Shape, dtype: str, cfg: dict[str, Any]) -> dict[str, Any]:
    """The pieces every schedule shares, as TileLang macros: the loop bounds, the score
    tile's initial value (the causal and Skv-tail mask), the mask input applied to the
    scores (`apply_mask`, masked shapes only), the online-softmax update, the O rescale
    and the final division (`finish`)."""
    B, H, Sq, Skv, D, causal = shape[:6]
    causal = bool(causal)
    bM, bN = cfg["block_M"], cfg["block_N"]
    kind = mask_kind(shape)
    with_mask = kind != MASK_NONE
    if with_mask:
        # Scores are scaled and masked before the softmax (s = q.k * scale + mask, as
        # PyTorch adds it), so the softmax runs on natural-log units.
        scale = LOG2E
        sm_scale = softmax_scale(shape, cfg)
    elif cfg.get("scale"):
        scale = LOG2E * softmax_scale(shape, cfg)
    else:
        # exp(x / sqrt(D)) == exp2(x * log2(e) / sqrt(D)): one FFMA + MUFU.EX2 per score.
        scale = LOG2E / math.sqrt(D)
    # The mask input covers the Skv tail itself: the initial accumulator then masks nothing.
    masked = (causal or Skv % bN != 0) and not with_mask
    q_full = mask_dims(shape)[2] if with_mask else False

    def bounds(bx):
        return kv_blocks(bx, bM, bN, Skv, causal, T.min)

    def visible(q, k):
        return T.And(k <= q, k < Skv) if causal else k < Skv

    # Key rows past Skv are never read from the mask; query rows past Sq only where the
    # mask varies along the queries (they are computed, never stored).
    # (A ping-pong block's 128 rows go to two consumers of 64: its tail is the block's.)
    rows = PPA.CONSUMERS * PPA.ROWS if cfg.get("pingpong") else bM
    tail_q, tail_k = q_full and Sq % rows != 0, Skv % bN != 0
    guarded = tail_q or tail_k

    def readable(q, k):
        if tail_q and tail_k:
            return T.And(q < Sq, k < Skv)
        return q < Sq if tail_q else k < Skv

    def masked_score(M, s, b, h, q, k):
        if kind == MASK_BOOL:
            return T.if_then_else(
                mask_at(M, shape, b, h, q, k) != T.uint8(0), s * T.float32(sm_scale), -T.infinity(ACCUM)
            )
        return s * T.float32(sm_scale) + T.cast(mask_at(M, shape, b, h, q, k), ACCUM)

    @T.macro
    def init_scores(acc_s, kb, n_full, bx):
        # The mask is the QK gemm's initial accumulator: 0 where visible, -inf where not
        # (past the diagonal, or key rows past Skv). The branch is uniform across the
        # thread block, so unmasked blocks pay one compare.
        if masked and kb >= n_full:
            for i, j in T.Parallel(bM, bN):
                acc_s[i, j] = T.if_then_else(visible(bx * bM + i, kb * bN + j), 0, -T.infinity(ACCUM))
        else:
            T.clear(acc_s)

    @T.macro
    def apply_mask(acc_s, M, kb, bx, by, bz):
        # One statement (the overlap pipeline schedules it by position). `by` is the query
        # head, which the mask is indexed by; -inf where the mask hides a key, or past Skv.
        for i, j in T.Parallel(bM, bN):
            if not guarded:
                acc_s[i, j] = masked_score(M, acc_s[i, j], bz, by, bx * bM + i, kb * bN + j)
            else:
                acc_s[i, j] = T.if_then_else(
                    readable(bx * bM + i, kb * bN + j),
                    masked_score(M, acc_s[i, j], bz, by, bx * bM + i, kb * bN + j),
                    -T.infinity(ACCUM),
                )

    def shift(m):
        # A row that every key so far was hidden from has max -inf: exp2 of -inf minus 0
        # is then a clean 0 where -inf - (-inf) would be NaN.
        return T.if_then_else(m == -T.infinity(ACCUM), T.float32(0), m) if with_mask else m

    @T.macro
    def softmax(acc_s, m_cur, m_prev, r_scale, r_sum, l_sum):
        # Exactly eight statements: `_overlap_loop` schedules them by position.
        T.copy(m_cur, m_prev)
        T.fill(m_cur, -T.infinity(ACCUM))
        T.reduce_max(acc_s, m_cur, dim=1, clear=False)
        for i in T.Parallel(bM):
            m_cur[i] = T.max(m_cur[i], m_prev[i])
        if with_mask:
            # (s - max) before the scale: an additive mask's float min minus itself is 0
            # (a row of nothing else averages its keys, as PyTorch's does), not -inf.
            for i in T.Parallel(bM):
                r_scale[i] = T.exp2((m_prev[i] - shift(m_cur[i])) * scale)
            for i, j in T.Parallel(bM, bN):
                acc_s[i, j] = T.exp2((acc_s[i, j] - shift(m_cur[i])) * scale)
        else:
            # Every row sees key 0 in the first block, so m_cur is finite from then on and
            # exp2(-inf - finite) is a clean 0 for masked scores.
            for i in T.Parallel(bM):
                r_scale[i] = T.exp2(m_prev[i] * scale - m_cur[i] * scale)
            for i, j in T.Parallel(bM, bN):
                acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_cur[i] * scale)
        T.reduce_sum(acc_s, r_sum, dim=1)
        for i in T.Parallel(bM):
            l_sum[i] = l_sum[i] * r_scale[i] + r_sum[i]

    @T.macro
    def rescale(acc_o, r_scale):
        for i, j in T.Parallel(bM, D):
            acc_o[i, j] *= r_scale[i]

    @T.macro
    def finish(acc_o, l_sum):
        if with_mask:
            # A row the mask hides entirely has l_sum 0 and gives 0, as PyTorch's SDPA does.
            for i, j in T.Parallel(bM, D):
                acc_o[i, j] = T.if_then_else(l_sum[i] > 0, acc_o[i, j] / l_sum[i], T.float32(0))
        else:
            for i, j in T.Parallel(bM, D):
                acc_o[i, j] /= l_sum[i]

    return {
        "bounds": bounds,
        "init_scores": init_scores,
        "apply_mask": apply_mask,
        "softmax": softmax,
        "rescale": rescale,
        "finish": finish,
        "masked": with_mask,
    }


def _kv_buffers(T, bM: int, bN: int, D: int, dtype: str) -> tuple:
    """What both K/V loops allocate, called while their macro is parsed: the K and V
    tiles, the scores (fp32, then in the input dtype for the PV gemm) and the per-row
    previous max, rescale factor and block sum."""
    return (
        T.alloc_shared((bN, D), dtype),
        T.alloc_shared((bN, D), dtype),
        T.alloc_fragment((bM, bN), ACCUM),
        T.alloc_fragment((bM, bN), dtype),
        T.alloc_fragment((bM,), ACCUM),
        T.alloc_fragment((bM,), ACCUM),
        T.alloc_fragment((bM,), ACCUM),
    )


def _ws_loop(T, shape: Shape, dtype: str, cfg: dict[str, Any], parts: dict[str, Any]):
    """FlashAttention-2's loop in program order (QK^T, softmax, rescale, PV) with
    synchronous gemms. TileLang warp-specializes it on sm_90: a TMA producer warpgroup
    feeds K and V through `num_stages` buffers to the consumer warpgroups."""
    B, H, Sq, Skv, D, causal = shape[:6]
    bM, bN, stages = cfg["block_M"], cfg["block_N"], cfg["num_stages"]
    bounds, init_scores, softmax, rescale = parts["bounds"], parts["init_scores"], parts["softmax"], parts["rescale"]
    apply_mask, masked = parts["apply_mask"], parts["masked"]

    @T.macro
    def kv_loop(K, V, M, Q_s, acc_o, m_cur, l_sum, bx, by, hq, bz):
        # `by` is the key/value head (`kv_head`): the query head's own, or its group's;
        # `hq` the query head, which indexes the mask M (None without one).
        K_s, V_s, acc_s, acc_p, m_prev, r_scale, r_sum = _kv_buffers(T, bM, bN, D, dtype)
        n_blocks, n_full = bounds(bx)
        for kb in T.Pipelined(n_blocks, num_stages=stages):
            T.copy(K[bz, by, kb * bN : (kb + 1) * bN, :], K_s)
            init_scores(acc_s, kb, n_full, bx)
            T.gemm(Q_s, K_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
            if masked:
                apply_mask(acc_s, M, kb, bx, hq, bz)
            softmax(acc_s, m_cur, m_prev, r_scale, r_sum, l_sum)
            T.copy(acc_s, acc_p)
            rescale(acc_o, r_scale)
            # Key rows past Skv read as zeros (TMA fills them), and their P is 0.
            T.copy(V[bz, by, kb * bN : (kb + 1) * bN, :], V_s)
            T.gemm(acc_p, V_s, acc_o, policy=T.GemmWarpPolicy.FullRow)

    return kv_loop


# The overlap loop's statements in program order, as T.Pipelined counts them (one per
# top-level statement, macros expanded), with the software-pipeline stage of each.
# Stage 0 loads K one iteration ahead; stage 1 is block t's QK^T and softmax; stage 2
# is block t's rescale and PV, run one iteration later, inside block t+1's stage 1.
_OVERLAP_BODY = (
    [("copy_k", 0), ("init_s", 1), ("qk", 1), ("commit", 1), ("wait_qk", 1), ("fence_s", 1)]
    + [(f"softmax{i}", 1) for i in range(8)]
    + [
        ("wait_pv", 1),
        ("sync", 1),
        ("fence_o", 1),
        ("fence_p", 1),
        ("cast", 1),
        ("copy_v", 1),
        ("rescale", 2),
        ("pv", 2),
    ]
)
# The order each iteration issues them in: QK^T of block t+1 and PV of block t go to the
# tensor cores before the softmax of block t+1 runs, so that softmax overlaps the PV gemm
# (FlashAttention-3's intra-warpgroup pipelining).
_OVERLAP_ISSUE = (
    ["copy_k", "copy_v", "init_s", "qk", "commit", "rescale", "pv", "wait_qk", "fence_s"]
    + [f"softmax{i}" for i in range(8)]
    + ["wait_pv", "sync", "fence_o", "fence_p", "cast"]
)


def _overlap_schedule(masked: bool = False) -> tuple[list[int], list[int]]:
    """T.Pipelined's `order` and `stage` lists for `_overlap_loop`'s body. TileLang
    0.1.15 takes one entry per scheduled statement (no `group=`), every order distinct;
    it checks that a statement depending on another is in the same or a later stage.
    `masked`: the body applies the mask input to block t's scores (`apply_mask`) once
    they have landed, right before their softmax."""
    body, issue = list(_OVERLAP_BODY), list(_OVERLAP_ISSUE)
    if masked:
        body.insert(body.index(("fence_s", 1)) + 1, ("mask", 1))
        issue.insert(issue.index("fence_s") + 1, "mask")
    names = [name for name, _ in body]
    assert sorted(names) == sorted(issue)
    return [issue.index(n) for n in names], [stage for _, stage in body]


def _overlap_loop(T, shape: Shape, dtype: str, cfg: dict[str, Any], parts: dict[str, Any]):
    """The same arithmetic as `_ws_loop`, software-pipelined by hand so that the tensor
    cores and the softmax overlap (see `_overlap_pipeline`). Manual order/stage
    pipelines are not warp-specialized by TileLang (a `num_stages` would hand the loop
    to the warp-specialization pass, which drops order/stage): all threads load K and V
    with cp.async, two buffers each (`num_stages` = 2)."""
    B, H, Sq, Skv, D, causal = shape[:6]
    bM, bN = cfg["block_M"], cfg["block_N"]
    bounds, init_scores, softmax = parts["bounds"], parts["init_scores"], parts["softmax"]
    apply_mask, masked = parts["apply_mask"], parts["masked"]
    pipelined = _overlap_pipeline(T, shape, cfg, parts)
    single_block = not causal and Skv <= bN
    split_count = bool(cfg.get("split_count")) and causal

    @T.macro
    def one_block(
        K, V, M, Q_s, K_s, V_s, acc_s, acc_p, acc_o, m_cur, m_prev, r_scale, r_sum, l_sum, n_full, bx, by, hq, bz
    ):
        T.copy(K[bz, by, 0:bN, :], K_s)
        init_scores(acc_s, 0, n_full, bx)
        T.gemm(Q_s, K_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
        if masked:
            apply_mask(acc_s, M, 0, bx, hq, bz)
        softmax(acc_s, m_cur, m_prev, r_scale, r_sum, l_sum)
        T.copy(acc_s, acc_p)
        T.copy(V[bz, by, 0:bN, :], V_s)
        T.gemm(acc_p, V_s, acc_o, policy=T.GemmWarpPolicy.FullRow)

    @T.macro
    def kv_loop(K, V, M, Q_s, acc_o, m_cur, l_sum, bx, by, hq, bz):
        K_s, V_s, acc_s, acc_p, m_prev, r_scale, r_sum = _kv_buffers(T, bM, bN, D, dtype)
        n_blocks, n_full = bounds(bx)
        # TileLang 0.1.15's pipeline runs stage 1 twice (once in its prologue, once in
        # its epilogue) when the loop has a single iteration. A single key block is
        # computed without the pipeline; a causal query block whose diagonal is in the
        # first key block (a count known only at run time) visits one more, fully
        # masked block instead: its scores are -inf, so it changes no bit of the output.
        if single_block:
            one_block(
                K,
                V,
                M,
                Q_s,
                K_s,
                V_s,
                acc_s,
                acc_p,
                acc_o,
                m_cur,
                m_prev,
                r_scale,
                r_sum,
                l_sum,
                n_full,
                bx,
                by,
                hq,
                bz,
            )
        else:
            # At least two iterations. Written as T.max(n, 2), the pipeline's epilogue guards
            # on 64x128 tiles of one warpgroup come out as `a < b || a < 3`, which ptxas
            # cannot prove, and it serializes every wgmma of the kernel (warning C7514;
            # test_one_warpgroup_causal_overlap_is_serialized_without_split_count).
            # `split_count` runs the same count as two pipelines (n, or 2 where a query block
            # sees one key block): no warning, but two copies of the loop cost registers
            # (233 against 154 at head dim 64) and it ran slower on the H200 (2026-12-03 sweep),
            # so it is outside the search space.
            if split_count:
                if n_blocks >= 2:
                    pipelined(
                        K,
                        V,
                        M,
                        Q_s,
                        K_s,
                        V_s,
                        acc_s,
                        acc_p,
                        acc_o,
                        m_cur,
                        m_prev,
                        r_scale,
                        r_sum,
                        l_sum,
                        n_blocks,
                        n_full,
                        bx,
                        by,
                        hq,
                        bz,
                    )
                else:
                    pipelined(
                        K,
                        V,
                        M,
                        Q_s,
                        K_s,
                        V_s,
                        acc_s,
                        acc_p,
                        acc_o,
                        m_cur,
                        m_prev,
                        r_scale,
                        r_sum,
                        l_sum,
                        2,
                        n_full,
                        bx,
                        by,
                        hq,
                        bz,
                    )
            else:
                pipelined(
                    K,
                    V,
                    M,
                    Q_s,
                    K_s,
                    V_s,
                    acc_s,
                    acc_p,
                    acc_o,
                    m_cur,
                    m_prev,
                    r_scale,
                    r_sum,
                    l_sum,
                    T.max(n_blocks, 2) if causal else n_blocks,
                    n_full,
                    bx,
                    by,
                    hq,
                    bz,
                )

    return kv_loop


def _overlap_pipeline(T, shape: Shape, cfg: dict[str, Any], parts: dict[str, Any]):
    """The overlap K/V loop (at least two iterations): async WGMMA (`T.wgmma_gemm`, no
    implicit wait) with explicit waits, in the order `_overlap_schedule` gives. Steady
    state of iteration t: load K[t+1] and V[t]; issue S = QK^T of block t; rescale O and
    issue O += P V of block t-1; wait for S only (wgmma groups retire in order, so
    `wait_wgmma(1)` leaves PV in flight); softmax of block t while PV runs; wait for PV;
    P = fp16(S)."""
    B, H, Sq, Skv, D, causal = shape[:6]
    bN, threads = cfg["block_N"], cfg["threads"]
    init_scores, softmax, rescale = parts["init_scores"], parts["softmax"], parts["rescale"]
    apply_mask, masked = parts["apply_mask"], parts["masked"]
    order, stage = _overlap_schedule(masked)
    # 32-bit registers per thread of each fragment, for the register fences.
    s_regs, o_regs = cfg["block_M"] * bN // threads, cfg["block_M"] * D // threads

    @T.macro
    def pipelined(
        K,
        V,
        M,
        Q_s,
        K_s,
        V_s,
        acc_s,
        acc_p,
        acc_o,
        m_cur,
        m_prev,
        r_scale,
        r_sum,
        l_sum,
        n_blocks,
        n_full,
        bx,
        by,
        hq,
        bz,
    ):
        for kb in T.Pipelined(n_blocks, order=order, stage=stage):
            # cp.async rows past Skv are zero-filled; their scores are masked and P is 0.
            T.copy(K[bz, by, kb * bN : (kb + 1) * bN, :], K_s)
            init_scores(acc_s, kb, n_full, bx)
            T.wgmma_gemm(Q_s, K_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
            # An empty wgmma group after S: in the prologue, where no PV precedes the
            # wait, `wait_wgmma(1)` then still retires S.
            T.warpgroup_commit_batch()
            T.wait_wgmma(1)
            # Keep nvcc from reading wgmma accumulators before the wait (CUTLASS does the same).
            T.warpgroup_fence_operand(acc_s, num_regs=s_regs)
            if masked:
                apply_mask(acc_s, M, kb, bx, hq, bz)
            softmax(acc_s, m_cur, m_prev, r_scale, r_sum, l_sum)
            T.wait_wgmma(0)
            # Every warpgroup's gemms of this iteration have read K_s and V_s before any
            # thread's cp.async of the next iteration refills them: the pipeline's own
            # barriers assume gemms that are complete when issued.
            T.sync_threads()
            T.warpgroup_fence_operand(acc_o, num_regs=o_regs)
            T.warpgroup_fence_operand(acc_p, num_regs=s_regs // 2)
            T.copy(acc_s, acc_p)
            T.copy(V[bz, by, kb * bN : (kb + 1) * bN, :], V_s)
            rescale(acc_o, r_scale)
            T.wgmma_gemm(acc_p, V_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
        # The pipeline's epilogue issues the last PV without a wait.
        T.wait_wgmma(0)
        T.warpgroup_fence_operand(acc_o, num_regs=o_regs)

    return pipelined
