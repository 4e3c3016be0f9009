"""The TileLang programs of the attention family (see attention.py for what they compute).

In: shape (B, H, Sq, Skv, D, causal), a dtype and a full config (the schedule's defaults
filled in). Out: a TileLang PrimFunc: on CPU an online-softmax loop over fp32 local
tiles, one (batch, head, query block) per kernel block; on CUDA FlashAttention-2 with
tensor-core `T.gemm` for QK^T and PV. Checking configs and compiling are the family's
(attention.py, base.py); nothing here runs a kernel.
"""

# No `from __future__ import annotations`: TileLang resolves the prim_func's tensor
# annotations from the closure, and names used only there (B, ...) are not in it.

import math
from typing import Any

from ..results import Shape
from . import _common as C

ACCUM = "float32"
LOG2E = 1.4426950408889634
# A large finite "minus infinity" for the C backend: it is compiled with -ffast-math
# (finite-math-only), under which gcc may fold comparisons against a real -inf.
CPU_NEG = -1.0e30


def cpu_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    import tilelang.cpu.language as T

    B, H, Sq, Skv, D, causal = shape
    causal = bool(causal)
    bM, bN = cfg["block_M"], cfg["block_N"]
    scale = 1.0 / math.sqrt(D)
    n_kv = C.ceildiv(Skv, bN)
    kv_tail = Skv % bN != 0

    @T.prim_func
    def attention_cpu(
        Q: T.Tensor((B, H, Sq, D), dtype),
        K: T.Tensor((B, H, Skv, D), dtype),
        V: T.Tensor((B, H, Skv, D), dtype),
        O: T.Tensor((B, H, Sq, D), dtype),
    ):
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
            b = bh // H
            h = bh % H
            q0 = bx * bM
            # The softmax scale is folded into Q once instead of into every score.
            for i, d in T.grid(bM, D):
                Q_l[i, d] = T.if_then_else(q0 + i < Sq, T.cast(Q[b, h, q0 + i, d], ACCUM) * T.float32(scale),
                                           T.float32(0))
            T.clear(acc)
            for i in T.serial(bM):
                m_l[i] = T.float32(CPU_NEG)
                l_l[i] = T.float32(0)
            # Causal: key blocks entirely right of this query block's last row are skipped.
            n_blocks = T.min(n_kv, T.ceildiv(q0 + bM, bN)) if causal else n_kv
            for kb in T.serial(n_blocks):
                k0 = kb * bN
                # K transposed on the way in so the score loop streams rows of both tiles.
                for j, d in T.grid(bN, D):
                    Kt_l[d, j] = T.if_then_else(k0 + j < Skv, T.cast(K[b, h, k0 + j, d], ACCUM), T.float32(0))
                for j, d in T.grid(bN, D):
                    V_l[j, d] = T.if_then_else(k0 + j < Skv, T.cast(V[b, h, k0 + j, d], ACCUM), T.float32(0))
                T.clear(S_l)
                # i-d-j order: the j loop is unit-stride in S_l and Kt_l, which gcc vectorizes.
                for i, d in T.grid(bM, D):
                    for j in T.serial(bN):
                        S_l[i, j] += Q_l[i, d] * Kt_l[d, j]
                for i in T.serial(bM):
                    if causal:
                        for j in T.serial(bN):
                            S_l[i, j] = T.if_then_else((k0 + j <= q0 + i) and (k0 + j < Skv), S_l[i, j],
                                                       T.float32(CPU_NEG))
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
            for i, d in T.grid(bM, D):
                if q0 + i < Sq:
                    O[b, h, q0 + i, d] = T.cast(acc[i, d] / l_l[i], dtype)

    return attention_cpu


def gpu_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    import tilelang.language as T

    B, H, Sq, Skv, D, causal = shape
    causal = bool(causal)
    bM, bN = cfg["block_M"], cfg["block_N"]
    stages, threads = cfg["num_stages"], cfg["threads"]
    # exp(x / sqrt(D)) == exp2(x * log2(e) / sqrt(D)): one FFMA + MUFU.EX2 per score.
    scale = LOG2E / math.sqrt(D)
    kv_tail = Skv % bN != 0
    n_q = C.ceildiv(Sq, bM)

    @T.prim_func
    def attention_fwd(
        Q: T.Tensor((B, H, Sq, D), dtype),
        K: T.Tensor((B, H, Skv, D), dtype),
        V: T.Tensor((B, H, Skv, D), dtype),
        O: T.Tensor((B, H, Sq, D), dtype),
    ):
        with T.Kernel(n_q, H, B, threads=threads) as (bq, by, bz):
            # Causal work grows with the query block; blocks launch in x order, so the
            # longest go first and the short ones fill the tail of the last wave.
            bx = n_q - 1 - bq if causal else bq
            Q_s = T.alloc_shared((bM, D), dtype)
            K_s = T.alloc_shared((bN, D), dtype)
            V_s = T.alloc_shared((bN, D), dtype)
            O_s = T.alloc_shared((bM, D), dtype)
            acc_s = T.alloc_fragment((bM, bN), ACCUM)
            acc_p = T.alloc_fragment((bM, bN), dtype)
            acc_o = T.alloc_fragment((bM, D), ACCUM)
            m_cur = T.alloc_fragment((bM,), ACCUM)
            m_prev = T.alloc_fragment((bM,), ACCUM)
            r_scale = T.alloc_fragment((bM,), ACCUM)
            r_sum = T.alloc_fragment((bM,), ACCUM)
            l_sum = T.alloc_fragment((bM,), ACCUM)

            # Rows past Sq read as zeros (bounds-checked copy) and are never stored.
            T.copy(Q[bz, by, bx * bM:(bx + 1) * bM, :], Q_s)
            T.fill(acc_o, 0)
            T.fill(l_sum, 0)
            T.fill(m_cur, -T.infinity(ACCUM))

            # Causal (top-left): query row i sees keys j <= i, so blocks past the
            # diagonal of this query block contribute nothing and are never loaded.
            n_blocks = (T.min(T.ceildiv(Skv, bN), T.ceildiv((bx + 1) * bM, bN)) if causal
                        else T.ceildiv(Skv, bN))

            for kb in T.Pipelined(n_blocks, num_stages=stages):
                T.copy(K[bz, by, kb * bN:(kb + 1) * bN, :], K_s)
                # The mask is the gemm's initial accumulator: 0 where visible, -inf where
                # not (past the diagonal, or key rows past Skv in the tail block).
                if causal:
                    for i, j in T.Parallel(bM, bN):
                        acc_s[i, j] = T.if_then_else(
                            (kb * bN + j <= bx * bM + i) and (kb * bN + j < Skv), 0, -T.infinity(ACCUM))
                elif kv_tail:
                    for i, j in T.Parallel(bM, bN):
                        acc_s[i, j] = T.if_then_else(kb * bN + j < Skv, 0, -T.infinity(ACCUM))
                else:
                    T.clear(acc_s)
                T.gemm(Q_s, K_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)

                T.copy(m_cur, m_prev)
                T.fill(m_cur, -T.infinity(ACCUM))
                T.reduce_max(acc_s, m_cur, dim=1, clear=False)
                for i in T.Parallel(bM):
                    m_cur[i] = T.max(m_cur[i], m_prev[i])
                # Every row sees key 0 in the first block, so m_cur is finite from then
                # on and exp2(-inf - finite) is a clean 0 for masked scores.
                for i in T.Parallel(bM):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m_cur[i] * scale)
                for i, j in T.Parallel(bM, bN):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_cur[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(bM):
                    l_sum[i] = l_sum[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_p)
                for i, j in T.Parallel(bM, D):
                    acc_o[i, j] *= r_scale[i]
                # Key rows past Skv read as zeros, and their P is 0: no NaN can leak in.
                T.copy(V[bz, by, kb * bN:(kb + 1) * bN, :], V_s)
                T.gemm(acc_p, V_s, acc_o, policy=T.GemmWarpPolicy.FullRow)

            for i, j in T.Parallel(bM, D):
                acc_o[i, j] /= l_sum[i]
            # Staged through shared memory so the global store is coalesced (TMA on sm_90).
            T.copy(acc_o, O_s)
            T.copy(O_s, O[bz, by, bx * bM:(bx + 1) * bM, :])

    return attention_fwd
