"""The ping-pong attention program (config `pingpong`, sm_90 only): FlashAttention-3's
forward, written out in TileLang.

In: shape (B, H, Sq, Skv, D, causal[, pitches]), a dtype, a full attention config with
`pingpong` set (block_M = 128 query rows, 64 to each of two consumer warpgroups; block_N
keys a block; num_stages K/V buffers) and the pieces `attention/programs` shares (the
mask, the online softmax, the rescale, built for one warpgroup's 64 rows). Out: a
TileLang PrimFunc; checking and compiling are attention.py's.

Why: at 4x32x4096² the family's best schedules reach 0.89-0.92x cuDNN's SDPA on the H200
(reports/examples/kernels/h200-2026-12-03/). Nsight Compute at head dim 64, causal: our
kernel waits 6.66 warp cycles per issued instruction against cuDNN's 4.49, its tensor pipe
is 42% busy against 47%, and each SM runs three one-warpgroup blocks that issue their own
cp.async loads, where cuDNN runs one block of a TMA producer warpgroup and two consumer
warpgroups. TileLang's own warp specialization (`overlap` False) has the producer but runs
each k-block's QK^T, softmax and PV in program order, so the tensor cores idle during
every softmax; the `overlap` schedule overlaps them inside one warpgroup but loads with
every thread. This program has both, as FlashAttention-3 does:
- a producer warpgroup loads the block's Q once and then each key block's K and V by TMA
  into a ring of `num_stages` stages, one `full` barrier (bytes landed) and one `empty`
  barrier (both consumers done with the stage) per stage;
- two consumer warpgroups each own 64 query rows and read every stage; each issues key
  block t's QK^T and block t-1's PV back to back without waiting, waits for QK^T only,
  and runs block t's softmax while PV is still on the tensor cores (intra-warpgroup
  overlap), then releases block t-1's stage;
- an `order` barrier per consumer lets a consumer issue its gemms of a round only after
  the other issued its own of the round before, so the two take turns on the tensor
  cores and one's softmax runs under the other's gemms (inter-warpgroup ping-pong). It
  also bounds how far apart they run: one round, within what the ring's parity waits can
  tell apart.
Both consumers visit the same key blocks, those the block's 128 rows need; a consumer's
rows that see none of a block's keys get -inf scores there, which change no bit of its
output. Register budget after setmaxnreg: 128 x 24 for the producer, 256 x 240 for the
consumers (FlashAttention-3's split), 64,512 of the SM's 65,536.
"""

# No `from __future__ import annotations`: TileLang resolves the prim_func's tensor
# annotations from the closure, and names used only there (B, ...) are not in it.

from typing import Any

from ...results import Shape
from .. import common as C
from .shapes import kv_head, kv_heads, mask_dtype, mask_shape, pitches

ACCUM = "float32"
PRODUCERS = 128  # one producer warpgroup
CONSUMERS = 2  # two consumer warpgroups
ROWS = 64  # query rows a consumer warpgroup owns: one wgmma M
PRODUCER_REGS, CONSUMER_REGS = 24, 240
# Accumulator registers a consumer thread may hold (`acc_regs`) under that cap: ptxas builds
# 128x192 at head dim 128 (208) and 128x64 at 256 (176) without spills; 128x208 at 128 (220)
# spills 192 bytes and serializes its wgmmas (C7512; benchmarks/ptx_stats.py).
ACC_REGS_LIMIT = 208


def full_parity(n: Any, stages: int) -> Any:
    """The parity a consumer waits for on key block n's `full` barrier (its phase n // stages)."""
    return (n // stages) & 1


def empty_parity(n: Any, stages: int) -> Any:
    """The parity the producer waits for before loading key block n: both consumers'
    release of block n - stages (the first pass through the ring waits on the phase
    before the first)."""
    return ((n // stages) & 1) ^ 1


def order_parity(me: int, r: Any) -> Any:
    """The parity consumer `me` waits for on its `order` barrier before issuing its gemms
    of round r (key block r's QK^T, and block r-1's PV); the other consumer's rounds
    complete that barrier's phases. Consumer 0 goes first: its round r waits for consumer
    1's round r - 1, and its round 0 waits for nothing (`order_waits`); consumer 1's round
    r waits for consumer 0's round r."""
    return (r - 1) & 1 if me == 0 else r & 1


def order_waits(me: int, r: int) -> bool:
    """Whether consumer `me` waits at all before round r (a round known when the program
    is written: the loop's rounds are all past 0)."""
    return me == 1 or r > 0


def smem_bytes(cfg: dict[str, Any], D: int, dtype_bytes: int) -> int:
    """Q (block_M rows, whose tiles each consumer reuses for its output), and K and V per
    stage, plus TileLang's static 1 KB (the barriers)."""
    return (cfg["block_M"] * D + 2 * cfg["block_N"] * D * cfg["num_stages"]) * dtype_bytes + 1024


def acc_regs(cfg: dict[str, Any], D: int) -> float:
    """fp32 registers per consumer thread for its scores, their 16-bit copy and its O."""
    return (ROWS * cfg["block_N"] * 1.5 + ROWS * D) / 128


def pingpong_program(
    shape: Shape, dtype: str, cfg: dict[str, Any], parts: dict[str, Any], bounds: Any, operand: Any, output_shape: Any
):
    """`parts` are `attention/programs._gpu_parts` built for ROWS-row tiles; `bounds(bx)`
    gives the (key blocks, unmasked key blocks) of the block's 128 rows; `operand` and
    `output_shape` are `attention/programs`' (strided q, k, v and the output's layout)."""
    import tilelang.language as T

    B, H, Sq, Skv, D, causal = shape[:6]
    pq, pk, pv = pitches(shape)
    Hkv = kv_heads(shape)
    causal = bool(causal)
    bM, bN, stages = cfg["block_M"], cfg["block_N"], cfg["num_stages"]
    n_q = C.ceildiv(Sq, bM)
    init_scores, softmax, rescale = parts["init_scores"], parts["softmax"], parts["rescale"]
    apply_mask, finish, masked = parts["apply_mask"], parts["finish"], parts["masked"]
    s_regs, o_regs = ROWS * bN // 128, ROWS * D // 128  # 32-bit registers a thread, for the fences

    def rows_bounds(bx, me):
        # The unmasked key blocks of consumer me's 64 rows: its rows' own diagonal.
        return parts["bounds"](bx * CONSUMERS + me)[1]

    @T.macro
    def issue(Q_s, K_s, acc_s, kb, st, n_full, row_tile, order, me, first):
        # Round kb's QK^T, issued after the other consumer's round before (`order_parity`).
        if order_waits(me, 0 if first else 1):
            T.mbarrier_wait_parity(order[me], order_parity(me, kb))
        init_scores(acc_s, kb, n_full, row_tile)
        T.wgmma_gemm(Q_s, K_s[st, :, :], acc_s, transpose_B=True)

    @T.macro
    def consume(
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
        full,
        empty,
        order,
        q_full,
        me,
        bx,
        n_blocks,
        M,
        by,
        bz,
    ):
        row_tile = bx * CONSUMERS + me
        n_full = rows_bounds(bx, me)
        T.fill(acc_o, 0)
        T.fill(l_sum, 0)
        T.fill(m_cur, -T.infinity(ACCUM))
        T.mbarrier_wait_parity(q_full, 0)
        # Key block 0: its scores, then their softmax (no PV before it to overlap).
        T.mbarrier_wait_parity(full[0], 0)
        issue(Q_s, K_s, acc_s, 0, 0, n_full, row_tile, order, me, True)
        T.mbarrier_arrive(order[1 - me])
        T.wait_wgmma(0)
        T.warpgroup_fence_operand(acc_s, num_regs=s_regs)
        if masked:  # the mask input on this consumer's rows (`by`: the query head)
            apply_mask(acc_s, M, 0, row_tile, by, bz)
        softmax(acc_s, m_cur, m_prev, r_scale, r_sum, l_sum)
        T.copy(acc_s, acc_p)
        for t in T.serial(n_blocks - 1):
            kb = t + 1
            st = kb % stages
            prev = (kb - 1) % stages
            T.mbarrier_wait_parity(full[st], full_parity(kb, stages))
            issue(Q_s, K_s, acc_s, kb, st, n_full, row_tile, order, me, False)
            # O is rescaled by block kb-1's factor before its P V lands in it.
            T.warpgroup_fence_operand(acc_o, num_regs=o_regs)
            rescale(acc_o, r_scale)
            T.wgmma_gemm(acc_p, V_s[prev, :, :], acc_o)
            T.mbarrier_arrive(order[1 - me])
            # wgmma groups retire in order: this waits for QK^T and leaves PV in flight.
            T.wait_wgmma(1)
            T.warpgroup_fence_operand(acc_s, num_regs=s_regs)
            if masked:
                apply_mask(acc_s, M, kb, row_tile, by, bz)
            softmax(acc_s, m_cur, m_prev, r_scale, r_sum, l_sum)
            T.wait_wgmma(0)
            T.warpgroup_fence_operand(acc_o, num_regs=o_regs)
            T.warpgroup_fence_operand(acc_p, num_regs=s_regs // 2)
            T.mbarrier_arrive(empty[prev])  # both gemms of block kb-1 have read its stage
            T.copy(acc_s, acc_p)
        last = (n_blocks - 1) % stages
        T.warpgroup_fence_operand(acc_o, num_regs=o_regs)
        rescale(acc_o, r_scale)
        T.wgmma_gemm(acc_p, V_s[last, :, :], acc_o)
        T.wait_wgmma(0)
        T.warpgroup_fence_operand(acc_o, num_regs=o_regs)
        T.mbarrier_arrive(empty[last])
        finish(acc_o, l_sum)

    @T.macro
    def store(acc_o, O_s, O, bz, by, r0):
        # Q's rows are this consumer's alone and read for the last time: O goes out through them.
        T.copy(acc_o, O_s)
        if pq:
            T.copy(O_s, O[bz, r0 : r0 + ROWS, by, :])
        else:
            T.copy(O_s, O[bz, by, r0 : r0 + ROWS, :])

    @T.macro
    def body(Q, K, V, M, O):
        with T.Kernel(n_q, H, B, threads=CONSUMERS * 128 + PRODUCERS) as (bq, by, bz):
            # Causal work grows with the query block: the longest launch first.
            bx = n_q - 1 - bq if causal else bq
            Q_s0 = T.alloc_shared((ROWS, D), dtype)
            Q_s1 = T.alloc_shared((ROWS, D), dtype)
            K_s = T.alloc_shared((stages, bN, D), dtype)
            V_s = T.alloc_shared((stages, bN, D), dtype)
            acc_s0 = T.alloc_fragment((ROWS, bN), ACCUM)
            acc_s1 = T.alloc_fragment((ROWS, bN), ACCUM)
            acc_p0 = T.alloc_fragment((ROWS, bN), dtype)
            acc_p1 = T.alloc_fragment((ROWS, bN), dtype)
            acc_o0 = T.alloc_fragment((ROWS, D), ACCUM)
            acc_o1 = T.alloc_fragment((ROWS, D), ACCUM)
            m_cur0 = T.alloc_fragment((ROWS,), ACCUM)
            m_cur1 = T.alloc_fragment((ROWS,), ACCUM)
            m_prev0 = T.alloc_fragment((ROWS,), ACCUM)
            m_prev1 = T.alloc_fragment((ROWS,), ACCUM)
            r_scale0 = T.alloc_fragment((ROWS,), ACCUM)
            r_scale1 = T.alloc_fragment((ROWS,), ACCUM)
            r_sum0 = T.alloc_fragment((ROWS,), ACCUM)
            r_sum1 = T.alloc_fragment((ROWS,), ACCUM)
            l_sum0 = T.alloc_fragment((ROWS,), ACCUM)
            l_sum1 = T.alloc_fragment((ROWS,), ACCUM)
            q_full = T.alloc_barrier([PRODUCERS])
            full = T.alloc_barrier([PRODUCERS] * stages)
            empty = T.alloc_barrier([CONSUMERS * 128] * stages)  # both consumers release each stage
            order = T.alloc_barrier([128] * CONSUMERS)  # order[c]: consumer c may issue its next round
            tx = T.get_thread_binding()
            n_blocks = bounds(bx)[0]
            r0 = bx * bM
            if tx >= CONSUMERS * 128:
                T.set_max_nreg(PRODUCER_REGS, 0)
                # Rows past Sq and keys past Skv load as zeros (TMA bounds); the mask and the
                # clipped store keep them out of the output.
                T.tma_copy(Q[bz, by, r0 : r0 + ROWS, :], Q_s0, barrier=q_full)
                T.tma_copy(Q[bz, by, r0 + ROWS : r0 + bM, :], Q_s1, barrier=q_full)
                T.barrier_arrive(q_full)
                for kb in T.serial(n_blocks):
                    st = kb % stages
                    T.mbarrier_wait_parity(empty[st], empty_parity(kb, stages))
                    T.tma_copy(K[bz, kv_head(by, shape), kb * bN : (kb + 1) * bN, :], K_s[st, :, :], barrier=full[st])
                    T.tma_copy(V[bz, kv_head(by, shape), kb * bN : (kb + 1) * bN, :], V_s[st, :, :], barrier=full[st])
                    T.barrier_arrive(full[st])
            elif tx < 128:
                T.set_max_nreg(CONSUMER_REGS, 1)
                consume(
                    Q_s0,
                    K_s,
                    V_s,
                    acc_s0,
                    acc_p0,
                    acc_o0,
                    m_cur0,
                    m_prev0,
                    r_scale0,
                    r_sum0,
                    l_sum0,
                    full,
                    empty,
                    order,
                    q_full,
                    0,
                    bx,
                    n_blocks,
                    M,
                    by,
                    bz,
                )
                store(acc_o0, Q_s0, O, bz, by, r0)
            else:
                T.set_max_nreg(CONSUMER_REGS, 1)
                consume(
                    Q_s1,
                    K_s,
                    V_s,
                    acc_s1,
                    acc_p1,
                    acc_o1,
                    m_cur1,
                    m_prev1,
                    r_scale1,
                    r_sum1,
                    l_sum1,
                    full,
                    empty,
                    order,
                    q_full,
                    1,
                    bx,
                    n_blocks,
                    M,
                    by,
                    bz,
                )
                store(acc_o1, Q_s1, O, bz, by, r0 + ROWS)

    if masked:

        @T.prim_func
        def attention_fwd_pingpong_masked(
            Q: operand(T, pq, B, H, Sq, D, dtype),
            K: operand(T, pk, B, Hkv, Skv, D, dtype),
            V: operand(T, pv, B, Hkv, Skv, D, dtype),
            M: T.Tensor(mask_shape(shape), mask_dtype(shape, dtype)),
            O: T.Tensor(output_shape(shape), dtype),
        ):
            body(Q, K, V, M, O)

        return attention_fwd_pingpong_masked

    @T.prim_func
    def attention_fwd_pingpong(
        Q: operand(T, pq, B, H, Sq, D, dtype),
        K: operand(T, pk, B, Hkv, Skv, D, dtype),
        V: operand(T, pv, B, Hkv, Skv, D, dtype),
        O: T.Tensor(output_shape(shape), dtype),
    ):
        body(Q, K, V, None, O)

    return attention_fwd_pingpong
