"""The ping-pong GEMM program (config `pingpong`, sm_90+): y = act(x @ weight.T + bias).

In: shape (M, N, K), a dtype, a full gemm config with `pingpong` set (block_M x
block_N is one consumer warpgroup's tile; `persistent` is the block count, one per
SM) and the activation. Out: a TileLang PrimFunc; checking and compiling are gemm.py's.

Why: on the H200 our whole-K tiles reach 0.76-0.92x cuBLAS on the K = 768 shapes of
BERT, GPT-2 and ViT-B (12 k-steps of 64), and the lowered CUDA shows why. The two
consumer warpgroups of TileLang's automatic pipeline share one tile, so both run its
epilogue (bias, rounding, the store) while the tensor cores idle, and each k-step
waits for its own wgmma to finish (`warpgroup_wait<0>`) before the next is issued.
This is CUTLASS's ping-pong kernel written out in TileLang instead:
- one producer warpgroup walks the block's tiles and loads their k-steps by TMA into
  a ring of `num_stages` stages, one `full` barrier (bytes landed) and one `empty`
  barrier (stage read) per stage;
- two consumer warpgroups take the block's tiles in turn (even and odd), each with
  its own fp32 accumulator and its own output tile in shared memory, so while one
  runs its epilogue the other runs its k-loop;
- each k-step's wgmma is issued without waiting, and the stage of the step before is
  released once at most one wgmma is in flight (`wait_wgmma(1)`);
- an `order` barrier per consumer starts one consumer's k-loop only after the other
  finished the k-loop of the tile before. That keeps the two k-loops from sharing the
  tensor cores (the epilogue is what should overlap), and it is also what keeps the
  ring's parity waits exact: without it a consumer could wait on a stage two phases
  ahead of the barrier, which mbarrier parity cannot tell from the phase before.
Tiles are walked in groups of `panel` row-tiles, column by column, as the other
persistent schedule does, so neighbouring blocks share A and W panels in L2.
"""

# No `from __future__ import annotations`: TileLang evaluates the prim_func's tensor
# annotations through the names its body uses, and this body never names M.
import re
from typing import Any, Callable

from ..results import Shape

ACCUM = "float32"
PRODUCERS = 128  # one producer warpgroup
CONSUMERS = 2  # two consumer warpgroups of 128 threads, one tile each
# Registers per thread after setmaxnreg: 128 x 40 + 256 x 232 = 64,512 of the SM's 65,536.
PRODUCER_REGS, CONSUMER_REGS = 40, 232
# A consumer's fp32 accumulator (block_M x block_N over 128 threads) must leave room for
# addresses and the epilogue under that cap.
MAX_ACCUM_REGS = 192

# Ping-pong tiles (block_M, block_N, num_stages; block_K 64) for sm_90+, one consumer
# warpgroup's tile each; the H200 sweep's winners (kernel_sweep_pingpong.json). The first
# two lead the space where they won: 128x64 8 stages deep where its tiles fit one wave
# (1.03-1.12x cuBLAS at 1024x768x{768,3072} and llama's 512x2048x{2048,5632}, against
# 0.81-1.06x for the other schedules), 128x128 where its tiles fill three waves or more
# (3152x{2304,3072}x768, 8192^3: 0.84-1.04x against 0.75-1.00x). Between the two it lost
# (2048x2304x768 0.83x against 0.87x, 3152x768x768 0.71x against 0.87x).
TILES = ((128, 64, 8), (128, 128, 5), (128, 128, 4), (128, 160, 4), (64, 128, 6))


def space(M: int, N: int, K: int, hw: Any, defaults: dict[str, Any], fits: Callable[[dict], bool]
          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ping-pong configs of the gemm search space on Hopper (`hw` a
    Hardware; `defaults` the tensor-core config; `fits` whether a config's shared memory
    fits), one block per SM, and the one to lead the space with (or none)."""
    # wgmma is Hopper's alone (compute capability 9.x; Blackwell has tcgen05, AMD's
    # targets name a gfx arch here).
    if not re.fullmatch(r"9\.\d+", str(hw.compute_capability or "")) or M <= 64 or N % 8 or K % 8:
        return [], []
    sms = max(1, int(hw.cores or 1))
    out = [c for c in ({**defaults, "block_M": bM, "block_N": bN, "block_K": 64, "num_stages": st, "threads": 128,
                        "pingpong": 1, "persistent": sms} for bM, bN, st in TILES) if fits(c)]
    tiles = lambda bM, bN: -(-M // bM) * -(-N // bN)  # noqa: E731
    lead = out[:1] if out and tiles(128, 64) <= sms else out[1:2] if len(out) > 1 and tiles(128, 128) >= 3 * sms else []
    return lead, out


def threads_of(cfg: dict[str, Any]) -> int:
    """The block's thread count: two consumer warpgroups and the producer."""
    return CONSUMERS * 128 + PRODUCERS


def smem_bytes(cfg: dict[str, Any], dtype_bytes: int) -> int:
    """The K ring plus one output tile per consumer (they must not share one: each
    stores its tile while the other computes)."""
    ring = (cfg["block_M"] + cfg["block_N"]) * cfg["block_K"] * dtype_bytes * max(1, cfg["num_stages"])
    return ring + CONSUMERS * cfg["block_M"] * cfg["block_N"] * dtype_bytes


def full_parity(n: Any, stages: int) -> Any:
    """The parity a consumer waits for on ring use n's `full` barrier (its phase n // stages)."""
    return (n // stages) & 1


def empty_parity(n: Any, stages: int) -> Any:
    """The parity the producer waits for on use n's `empty` barrier: the release of use
    n - stages (the first pass through the ring waits on the phase before the first)."""
    return ((n // stages) & 1) ^ 1


def order_parity(i: Any) -> Any:
    """The parity tile i's consumer waits for on its `order` barrier: the other consumer's
    k-loop of tile i - 1, its ((i - 1) // 2)-th."""
    return ((i - 1) // CONSUMERS) & 1


def tile_coords(t: Any, tm: int, tn: int, panel: int, minimum: Any = min) -> tuple[Any, Any]:
    """Tile t's (row tile, column tile) in grouped order: `panel` row-tiles walked column
    by column, the last group shorter where `panel` does not divide tm. Plain arithmetic,
    so the program builds it from TileLang expressions (minimum = T.min) and a test
    checks it on ints."""
    group = panel * tn
    first = (t // group) * panel
    rows = minimum(tm - first, panel)
    return first + (t % group) % rows, (t % group) // rows


def pingpong_program(shape: Shape, dtype: str, cfg: dict[str, Any], act: str, act_fn: Any):
    import tilelang.language as T

    M, N, K = shape
    bM, bN, bK, stages = cfg["block_M"], cfg["block_N"], cfg["block_K"], cfg["num_stages"]
    panel = cfg["panel"]
    tm, tn = -(-M // bM), -(-N // bN)
    tiles, kt = tm * tn, -(-K // bK)
    blocks = min(cfg["persistent"], tiles)  # a block with no tile would only launch
    # The loops run a fixed count of rounds, each guarded by whether the block has that
    # tile. A loop of `mine // 2` rounds (mine = the block's tile count) lowered
    # to one unguarded round at 1024x3072x768 with 128x128 tiles (192 tiles, 132 blocks:
    # mine // 2 is 1 or 0), so consumer 1 of a one-tile block waited for a tile the
    # producer never loads, and the kernel hung on the H200.
    rounds = -(-(-(-tiles // blocks)) // CONSUMERS)

    def tile_of(t):
        return tile_coords(t, tm, tn, panel, T.min)

    @T.macro
    def consume(A_s, W_s, C_f, C_s, Bias, Y, full, empty, order, me, bid, i, N, K):
        # Tile i of this block (t = bid + i * blocks); its k-steps are ring uses i*kt ...
        by, bx = tile_of(bid + i * blocks)
        if i > 0:
            # The other consumer finished its k-loop of tile i-1 (its (i-1)//2-th tile).
            T.mbarrier_wait_parity(order[me], order_parity(i))
        T.clear(C_f)
        for ko in T.serial(T.ceildiv(K, bK)):
            n = i * kt + ko
            T.mbarrier_wait_parity(full[n % stages], full_parity(n, stages))
            T.wgmma_gemm(A_s[n % stages, :, :], W_s[n % stages, :, :], C_f, transpose_B=True)
            # At most this step's wgmma in flight: the step before has read its stage.
            T.wait_wgmma(1)
            if ko > 0:
                T.mbarrier_arrive(empty[(n - 1) % stages])
        T.wait_wgmma(0)
        T.mbarrier_arrive(empty[(i * kt + kt - 1) % stages])
        T.mbarrier_arrive(order[1 - me])
        for r, c in T.Parallel(bM, bN):
            C_f[r, c] = act_fn(C_f[r, c] + T.if_then_else(bx * bN + c < N, T.cast(Bias[bx * bN + c], ACCUM),
                                                          T.float32(0)), act, T)
        T.copy(C_f, C_s)
        T.copy(C_s, Y[by * bM, bx * bN])

    @T.prim_func
    def linear_tc_pingpong(
        A: T.Tensor((M, K), dtype),
        W: T.Tensor((N, K), dtype),
        Bias: T.Tensor((N,), dtype),
        Y: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(blocks, threads=CONSUMERS * 128 + PRODUCERS) as bid:
            A_s = T.alloc_shared((stages, bM, bK), dtype)
            W_s = T.alloc_shared((stages, bN, bK), dtype)
            C_f0 = T.alloc_fragment((bM, bN), ACCUM)
            C_f1 = T.alloc_fragment((bM, bN), ACCUM)
            C_s0 = T.alloc_shared((bM, bN), dtype)
            C_s1 = T.alloc_shared((bM, bN), dtype)
            full = T.alloc_barrier([PRODUCERS] * stages)
            empty = T.alloc_barrier([128] * stages)  # the one consumer of that use arrives
            order = T.alloc_barrier([128] * CONSUMERS)  # order[c]: consumer c may start its next k-loop
            tx = T.get_thread_binding()
            mine = T.ceildiv(tiles - bid, blocks)  # this block's tiles: bid, bid + blocks, ...
            if tx >= CONSUMERS * 128:
                T.set_max_nreg(PRODUCER_REGS, 0)
                for i in T.serial(rounds * CONSUMERS):
                    if i < mine:
                        by, bx = tile_of(bid + i * blocks)
                        for ko in T.serial(T.ceildiv(K, bK)):
                            n = i * kt + ko
                            s = n % stages
                            T.mbarrier_wait_parity(empty[s], empty_parity(n, stages))
                            T.tma_copy(A[by * bM:(by + 1) * bM, ko * bK:(ko + 1) * bK], A_s[s, :, :],
                                       barrier=full[s])
                            T.tma_copy(W[bx * bN:(bx + 1) * bN, ko * bK:(ko + 1) * bK], W_s[s, :, :],
                                       barrier=full[s])
                            T.barrier_arrive(full[s])
            elif tx < 128:
                T.set_max_nreg(CONSUMER_REGS, 1)
                for j in T.serial(rounds):
                    if j * CONSUMERS < mine:
                        consume(A_s, W_s, C_f0, C_s0, Bias, Y, full, empty, order, 0, bid, j * CONSUMERS, N, K)
            else:
                T.set_max_nreg(CONSUMER_REGS, 1)
                for j in T.serial(rounds):
                    if j * CONSUMERS + 1 < mine:
                        consume(A_s, W_s, C_f1, C_s1, Bias, Y, full, empty, order, 1, bid, j * CONSUMERS + 1, N, K)

    return linear_tc_pingpong
