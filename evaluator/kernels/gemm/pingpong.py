"""The ping-pong GEMM program (config `pingpong`, sm_90+): y = act(x @ weight.T + bias).

In: shape (M, N, K), a dtype, a full gemm config with `pingpong` set (block_M x
block_N is one consumer warpgroup's tile; `persistent` is the block count, one per
SM) and the epilogue (gemm's `bias_act`, activation bound). Out: a TileLang PrimFunc; checking and compiling are
gemm.py's.

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

`stream_k` = 1 (in the search space only for long K and many rounds, where it measured
ahead: 1.089x cuBLAS at 8192^3; slower at every model shape:
reports/examples/kernels/h200-2026-12-02/kernel_sweep_streamk.json) splits the last,
partial wave by K instead of leaving SMs idle. Nsight Compute at ViT-B's 3152x3072x768
(reports/examples/kernels/h200-2026-12-02/ncu-gemm/) showed our SMs active 81% of the
time against cuBLAS's 90%, with the same active cycles: 600 tiles on 132 blocks is 4.55 a
block, so 60 blocks sit out the fifth round. With `stream_k` every block takes
W = tiles // blocks whole tiles, and the k-steps of the R = tiles - W * blocks tiles left
are dealt out evenly, I = ceil(R * kt / blocks) to a block (at 3152x3072x768: 7 of each
tail tile's 12 k-steps, so a block runs 55 k-steps instead of 60). A block's share spans
at most two tail tiles (I < kt), its two segments, which go to its two consumers as the
units after its whole tiles. A segment's fp32 partial goes to its own slot of a
workspace; the contributor that counts itself in last on the tile's counter adds the
other slots, runs the epilogue and resets the counter (the one-kernel split-K's
serial reduction, `gemm/programs._splitk_fused_program`). `sk_plan` and `sk_segments`
are that arithmetic on ints; the program builds the same from TileLang expressions.

`swap_ab` = 1 computes y's transpose: the tile's block_M rows are output features (the
weight is wgmma's A) and its block_N columns are tokens (x is wgmma's B), stored back
transposed through the output tile in shared memory, the bias running down the rows.
Why: wgmma's M is 64 rows a warpgroup but its N any multiple of 8, so only the token side
can take the tile widths that divide ViT-B's 3152 tokens into whole waves. At
3152x3072x768, 128 features x 144 tokens makes 24 x 22 = 528 tiles, four full rounds of
132 SMs (99.5% useful), where 128x128 makes 600 (4.55 rounds, 91%); at 3152x768x768,
6 x 22 = 132 tiles, one round. cuBLAS runs 256x144 tiles there (the same ncu-gemm profile).
`direct` = 1 stores the accumulator from registers to global memory, without the
output tiles in shared memory, which frees 2 x block_M x block_N x 2 bytes for a deeper
ring (128x144 fits 4 stages with the tiles, 6 without).
"""

# No `from __future__ import annotations`: TileLang evaluates the prim_func's tensor
# annotations through the names its body uses, and this body never names M.
from typing import Any, Callable

from ...device import arch as A
from ...results import Shape
from .prim import linear_program

# What the program uses: wgmma without waits between k-steps, TMA loads into a ring of
# mbarrier-guarded stages, and setmaxnreg's register split between producer and consumers.
NEEDS = ("wgmma", "tma", "setmaxnreg")

ACCUM = "float32"
PRODUCERS = 128  # one producer warpgroup
CONSUMERS = 2  # two consumer warpgroups of 128 threads, one tile each
# Registers per thread after setmaxnreg: 128 x 40 + 256 x 232 = 64,512 of the SM's 65,536.
PRODUCER_REGS, CONSUMER_REGS = 40, 232
# A consumer's fp32 accumulator (block_M x block_N over 128 threads) must leave room for
# addresses and the epilogue under that cap.
MAX_ACCUM_REGS = 192

# Ping-pong tiles (block_M, block_N, num_stages; block_K 64) for sm_90+, one consumer
# warpgroup's tile each, the deepest ring that fits; the H200 sweeps' winners
# (kernel_sweep_pingpong.json of 2026-12-01, kernel_sweep_pingwave.json of 2026-12-02,
# under reports/examples/kernels/). `_lead` says
# where one of them leads the space.
TILES = ((128, 64, 8), (128, 96, 6), (128, 128, 5), (128, 128, 4), (128, 160, 4), (64, 128, 6))
# The tiles of y's transpose (`swap_ab`: block_M features x block_N tokens), offered where
# there are more tokens than features (M > N), the only shapes where the sweep of y's
# transpose (kernel_sweep --only swap,
# reports/examples/kernels/h200-2026-12-03/kernel_sweep_swap.json) measured them ahead.
SWAP_TILES = ((128, 64, 8), (128, 96, 6), (128, 112, 5), (128, 144, 4), (128, 160, 4))
# 48 tokens: offered, and leading, only where its tiles fit one round and K is short
# (bert-base's 1024x768x768 in 22 x 6 = 132 tiles: 1.18x cuBLAS against 1.12x for 128x64;
# at 1024x768x3072 it ran 0.93x against 0.97x;
# reports/examples/kernels/h200-2026-12-03/kernel_sweep_swap_attention.json).
SWAP_NARROW, NARROW_MAX_K = (128, 48, 8), 1024
# stream-K joins the space only past both (see `space`).
SK_MIN_KSTEPS, SK_MIN_ROUNDS = 64, 8
# Shared memory ptxas gives the kernel beside the dynamic buffers (its barriers): "used
# 1024 bytes smem" for every tile. 64x152 with 7 stages asked for the whole 232,448 B as
# dynamic memory and failed to launch on the H200
# (reports/examples/kernels/h200-2026-12-02/kernel_sweep_pingwave.log).
STATIC_SMEM = 1024
# A swapped lead: of the widest two tiles within this much of the best-filled rounds, the narrower first.
SWAP_SLACK = 0.04


def space(
    M: int, N: int, K: int, hw: Any, defaults: dict[str, Any], fits: Callable[[dict], bool]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ping-pong configs of the gemm search space on Hopper (`hw` a
    Hardware; `defaults` the tensor-core config; `fits` whether a config's shared memory
    fits), one block per SM, and the ones to lead the space with (or none)."""
    # wgmma is sm_90a's alone (Blackwell has tcgen05; AMD and MetaX targets have neither).
    if not A.offers(hw, NEEDS) or M <= 64 or N % 8 or K % 8:
        return [], []
    sms = max(1, int(hw.cores or 1))
    tiles = [(bM, bN, st, 0) for bM, bN, st in TILES] + [(bM, bN, st, 1) for bM, bN, st in SWAP_TILES if M > N]
    if _narrow_fits(M, N, K, sms):
        tiles.append((*SWAP_NARROW, 1))
    out = [
        c
        for c in (
            {
                **defaults,
                "block_M": bM,
                "block_N": bN,
                "block_K": 64,
                "num_stages": st,
                "threads": 128,
                "pingpong": 1,
                "persistent": sms,
                "swap_ab": sw,
            }
            for bM, bN, st, sw in tiles
        )
        if fits(c)
    ]
    by_tile: dict[tuple[int, int, int], dict[str, Any]] = {}
    for c in out:  # the first (deepest) ring of each tile
        by_tile.setdefault((c["block_M"], c["block_N"], c["swap_ab"]), c)
    # stream-K where it measured ahead: many rounds of long-K tiles, the last one partial.
    # kernel_sweep --only streamk on the H200 (reports/examples/kernels/h200-2026-12-02/):
    # 8192^3 with 128x128x5 1.089x cuBLAS against 1.047x for the best without it; at every
    # model shape (12-48 k-steps, 1-5 rounds) it was slower than the same tile without it,
    # the tail's partial sums costing more than the idle SMs they save.
    if K // 64 >= SK_MIN_KSTEPS and -(-M // 128) * -(-N // 128) >= SK_MIN_ROUNDS * sms and (128, 128, 0) in by_tile:
        plain = by_tile[(128, 128, 0)]
        split = {**plain, "stream_k": 1}
        if sk_splits((M, N, K), split):
            return [split, plain], [split, *out]
        return [plain], out
    return [by_tile[t] for t in _lead(M, N, K, sms) if t in by_tile], out


def _narrow_fits(M: int, N: int, K: int, sms: int) -> bool:
    """Whether the 48-token tiles of y's transpose cover the output in one round, at short K."""
    bM, bN, _ = SWAP_NARROW
    return M > N and K <= NARROW_MAX_K and -(-N // bM) * -(-M // bN) <= sms


def useful(M: int, N: int, bM: int, bN: int, sms: int) -> float:
    """The share of the longest block's time spent on real output: a block runs its tiles
    one after another (its two consumers share the tensor cores), so the kernel lasts
    ceil(tiles / SMs) tiles, of which M * N / (SMs * tile area) would be the even share."""
    rounds = -(-(-(-M // bM) * -(-N // bN)) // sms)
    return M * N / (rounds * sms * bM * bN)


def _lead(M: int, N: int, K: int, sms: int) -> list[tuple[int, int, int]]:
    """The ping-pong tiles (block_M, block_N, swap_ab) to lead the space with, best first;
    none where another schedule measured ahead. From the H200's sweeps, every model shape:
    - more tokens than features (M > N): tiles of y's transpose (kernel_sweep --only swap,
      2026-12-03). 128x48 then 128x64 where 48-token tiles fit one round at K <= 1024
      (`_narrow_fits`: 1.18x and 1.12x at 1024x768x768, 2026-12-03); 128x64 where its
      tiles fit one round (0.97x at 1024x768x3072, level with y's own); else the two
      widest tiles whose rounds are filled within SWAP_SLACK of the best, the narrower
      first: 128x144 at ViT-B's 3152x768x{768,3072} (1.00x, one full round), 128x96 at
      GPT-2's 2048x768x{768,3072} (1.17x, 1.04x, one); 128x96 and 128x144 at 3152x3072x768
      (0.92x in six rounds, 0.93x in four), and 128x112 and 128x144 at 3152x2304x768,
      where 144 filled three rounds 99.5% and ran 0.73x, 112 0.90x (Nsight Compute: 26.7
      against 22.7 us, SM active cycles 42k against 33k, L1 hit rate 29% against 50%; not
      understood). The narrower costs 2% where the wider won, 19% the other way round, and
      the tuner times both;
    - else y's own tiles (kernel_sweep --only pingwave, 2026-12-02): 128x64 where its tiles
      fit one round (1.06-1.11x at 512x2048x2048); else 128x96 where its tiles fill one
      to three rounds at least 95%: 1.05x at 1024x3072x768 and 0.96x at 2048x2304x768,
      against 0.99x and 0.87x for the wider 128x192 and 128x144; else 128x128 over three
      rounds or more, or filling its rounds at least 95% (0.98x at 2048x3072x768: 384
      tiles, 97%); else none: at 512x5632x2048 the wave schedule's 128x176 ran 0.97x, the
      best ping-pong tile 0.91x.
    Widths that are not multiples of 16 ran 3x slower (see gemm's config check). The
    sweeps are under reports/examples/kernels/h200-<date>/."""
    if _narrow_fits(M, N, K, sms):
        return [SWAP_NARROW[:2] + (1,), (128, 64, 1)]
    if M > N:
        if -(-N // 128) * -(-M // 64) <= sms:
            return [(128, 64, 1)]
        fill = {bN: useful(N, M, bM, bN, sms) for bM, bN, _ in SWAP_TILES}
        near = sorted((bN for bN, u in fill.items() if u >= max(fill.values()) - SWAP_SLACK), reverse=True)
        if max(fill.values()) >= 0.9:
            return [(128, bN, 1) for bN in sorted(near[:2])]
    if -(-M // 128) * -(-N // 64) <= sms:
        return [(128, 64, 0)]
    if -(-M // 128) * -(-N // 96) <= 3 * sms and useful(M, N, 128, 96, sms) >= 0.95:
        return [(128, 96, 0)]
    if -(-M // 128) * -(-N // 128) >= 3 * sms or useful(M, N, 128, 128, sms) >= 0.95:
        return [(128, 128, 0)]
    return []


def threads_of(cfg: dict[str, Any]) -> int:
    """The block's thread count: two consumer warpgroups and the producer."""
    return CONSUMERS * 128 + PRODUCERS


def smem_bytes(cfg: dict[str, Any], dtype_bytes: int) -> int:
    """The K ring plus one output tile per consumer (they must not share one: each
    stores its tile while the other computes), none with `direct`."""
    ring = (cfg["block_M"] + cfg["block_N"]) * cfg["block_K"] * dtype_bytes * max(1, cfg["num_stages"])
    out = 0 if cfg.get("direct") else CONSUMERS * cfg["block_M"] * cfg["block_N"] * dtype_bytes
    return ring + out + STATIC_SMEM


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


def sk_plan(tiles: int, blocks: int, kt: int) -> tuple[int, int, int]:
    """(W, R, I): whole tiles per block, tail tiles, tail k-steps per block (0 when the
    tiles fill whole rounds: nothing to split)."""
    W = tiles // blocks
    R = tiles - W * blocks
    return W, R, -(-(R * kt) // blocks) if R else 0


def sk_segments(b: Any, R: int, kt: int, I: int, minimum: Any = min) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
    """Block b's two tail segments as (first, stop) tail k-step indices (tail tile s holds
    steps s * kt ... s * kt + kt - 1); a segment with first >= stop is empty. The second
    is non-empty only where the first is and the block's share crosses a tile's end."""
    total = R * kt
    lo = minimum(b * I, total)
    hi = minimum(lo + I, total)
    end0 = minimum((lo // kt + 1) * kt, hi)
    return (lo, end0), (end0, hi)


def sk_contributors(s: Any, kt: int, I: int) -> tuple[Any, Any]:
    """(first block, count) of the blocks whose shares cover tail tile s."""
    first = (s * kt) // I
    return first, ((s + 1) * kt - 1) // I - first + 1


def tile_grid(shape: Shape, cfg: dict[str, Any]) -> tuple[int, int]:
    """(row tiles, column tiles) of the output the program walks: y's, or with `swap_ab`
    its transpose's (rows over N, columns over M)."""
    M, N, _ = shape
    rows, cols = (N, M) if cfg.get("swap_ab") else (M, N)
    return -(-rows // cfg["block_M"]), -(-cols // cfg["block_N"])


def _geometry(shape: Shape, cfg: dict[str, Any]) -> tuple[int, int, int]:
    """(output tiles, persistent blocks, k-steps a tile): a block with no tile would only
    launch, so there are never more blocks than tiles."""
    tm, tn = tile_grid(shape, cfg)
    tiles = tm * tn
    return tiles, min(cfg["persistent"], tiles), -(-shape[2] // cfg["block_K"])


def sk_workspace(shape: Shape, cfg: dict[str, Any]) -> tuple[tuple[int, int, int], int]:
    """The fp32 partials [tail tiles x slots, block_M, block_N] (a slot per contributor)
    and the tail tiles' counters, at least one row of each where nothing is split."""
    tiles, blocks, kt = _geometry(shape, cfg)
    _, R, I = sk_plan(tiles, blocks, kt)
    return (max(1, R * _sk_slots(R, kt, I)), cfg["block_M"], cfg["block_N"]), max(1, R)


def sk_splits(shape: Shape, cfg: dict[str, Any]) -> bool:
    """Whether `stream_k` has a tail to split at this shape (else it is plain ping-pong)."""
    tiles, blocks, _ = _geometry(shape, cfg)
    return bool(cfg.get("stream_k")) and tiles % blocks != 0


def _sk_slots(R: int, kt: int, I: int) -> int:
    """The most contributors any tail tile has: the workspace's slots per tile."""
    return max((sk_contributors(s, kt, I)[1] for s in range(R)), default=1)


def pingpong_program(shape: Shape, dtype: str, cfg: dict[str, Any], bias_act: Any, mul_macro: Any = None):
    """`bias_act(T, bM, bN)` is the epilogue's bias-and-activation macro (gemm's); with
    `mul_macro` (gemm's, for gemm_mul) the program takes G[M, N] after the bias and the
    epilogue multiplies each tile by G's (never with stream-K: _gemm_checks refuses it)."""
    import tilelang.language as T

    M, N, K = shape
    bM, bN, bK, stages = cfg["block_M"], cfg["block_N"], cfg["block_K"], cfg["num_stages"]
    panel = cfg["panel"]
    swap, direct = bool(cfg.get("swap_ab")), bool(cfg.get("direct"))
    add_bias_act = bias_act(T, bM, bN, by_row=swap)
    gate = mul_macro is not None
    mul = mul_macro(T, bM, bN, by_row=swap) if gate else None
    tm, tn = tile_grid(shape, cfg)
    tiles, blocks, kt = _geometry(shape, cfg)
    Wr, R, I = sk_plan(tiles, blocks, kt) if cfg.get("stream_k") else (0, 0, 0)
    # With a tail to split, the whole tiles are the first Wr * blocks, Wr to every block.
    whole = Wr * blocks if R else tiles
    slots = _sk_slots(R, kt, I) if R else 1
    # The loops run a fixed count of rounds, each guarded by whether the block has that
    # tile. A loop of `mine // 2` rounds (mine = the block's tile count) lowered
    # to one unguarded round at 1024x3072x768 with 128x128 tiles (192 tiles, 132 blocks:
    # mine // 2 is 1 or 0), so consumer 1 of a one-tile block waited for a tile the
    # producer never loads, and the kernel hung on the H200.
    rounds = -(-(-(-whole // blocks)) // CONSUMERS)

    def tile_of(t):
        return tile_coords(t, tm, tn, panel, T.min)

    def segment(bid, q):
        # Tail segment q of block bid: (first, stop, ring use of its first k-step). A
        # plain function: TileLang rewrites a conditional expression inside a macro.
        (lo, end0), (_, hi) = sk_segments(bid, R, kt, I, T.min)
        first, stop = [(lo, end0), (end0, hi)][q]
        return first, stop, Wr * kt + (first - lo)

    @T.macro
    def produce(A, W, A_s, W_s, full, empty, t, k0, klen, base):
        # One unit's k-steps k0 ... k0 + klen - 1 of tile t, ring uses base ... (klen <= kt).
        by, bx = tile_of(t)
        for ko in T.serial(kt):
            if ko < klen:
                n = base + ko
                st = n % stages
                T.mbarrier_wait_parity(empty[st], empty_parity(n, stages))
                T.tma_copy(
                    A[by * bM : (by + 1) * bM, (k0 + ko) * bK : (k0 + ko + 1) * bK], A_s[st, :, :], barrier=full[st]
                )
                T.tma_copy(
                    W[bx * bN : (bx + 1) * bN, (k0 + ko) * bK : (k0 + ko + 1) * bK], W_s[st, :, :], barrier=full[st]
                )
                T.barrier_arrive(full[st])

    @T.macro
    def k_loop(A_s, W_s, C_f, full, empty, order, me, u, klen, base):
        # Unit u of this block (its consumer is u % 2): ring uses base ... base + klen - 1.
        if u > 0:
            # The other consumer finished its k-loop of unit u-1 (its (u-1)//2-th).
            T.mbarrier_wait_parity(order[me], order_parity(u))
        T.clear(C_f)
        for ko in T.serial(kt):
            if ko < klen:
                n = base + ko
                T.mbarrier_wait_parity(full[n % stages], full_parity(n, stages))
                T.wgmma_gemm(A_s[n % stages, :, :], W_s[n % stages, :, :], C_f, transpose_B=True)
                # At most this step's wgmma in flight: the step before has read its stage.
                T.wait_wgmma(1)
                if ko > 0:
                    T.mbarrier_arrive(empty[(n - 1) % stages])
        T.wait_wgmma(0)
        T.mbarrier_arrive(empty[(base + klen - 1) % stages])
        T.mbarrier_arrive(order[1 - me])

    @T.macro
    def epilogue(C_f, C_s, Bias, Y, G, t, N):
        by, bx = tile_of(t)
        if swap:  # C_f[i, j] is y[bx * bN + j, by * bM + i]
            add_bias_act(C_f, Bias, by, N)
            if gate:
                mul(C_f, G, by, bx, M, N)
            if direct:
                for i, j in T.Parallel(bM, bN):
                    if bx * bN + j < M and by * bM + i < N:
                        Y[bx * bN + j, by * bM + i] = T.cast(C_f[i, j], dtype)
            else:
                for i, j in T.Parallel(bM, bN):
                    C_s[j, i] = T.cast(C_f[i, j], dtype)
                T.copy(C_s, Y[bx * bN, by * bM])
        else:
            add_bias_act(C_f, Bias, bx, N)
            if gate:
                mul(C_f, G, by, bx, M, N)
            if direct:
                T.copy(C_f, Y[by * bM, bx * bN])
            else:
                T.copy(C_f, C_s)
                T.copy(C_s, Y[by * bM, bx * bN])

    @T.macro
    def consume(A_s, W_s, C_f, C_s, Bias, Y, G, full, empty, order, me, bid, i, N):
        # Whole tile i of this block (t = bid + i * blocks); its k-steps are ring uses i*kt ...
        k_loop(A_s, W_s, C_f, full, empty, order, me, i, kt, i * kt)
        epilogue(C_f, C_s, Bias, Y, G, bid + i * blocks, N)

    @T.macro
    def consume_tail(A_s, W_s, C_f, C_s, Bias, Y, Ws, Cnt, last, full, empty, order, me, q, bid, tx, N):
        # Tail segment q of this block (unit Wr + q), then the tile's serial reduction.
        first, stop, base = segment(bid, q)
        s = first // kt
        k_loop(A_s, W_s, C_f, full, empty, order, me, Wr + q, stop - first, base)
        head, count = sk_contributors(s, kt, I)
        slot = bid - head
        T.copy(C_f, Ws[s * slots + slot, 0, 0])
        # Every thread's partial is stored before one thread counts the segment in, with
        # release-acquire order at device scope; the barrier is this warpgroup's alone.
        T.sync_threads(5 + me, 128)
        if tx == me * 128:
            last[me] = T.atomic_add(Cnt[s], 1, memory_order="acq_rel", return_prev=True)
        T.sync_threads(5 + me, 128)
        if last[me] == count - 1:
            for c in T.serial(slots):
                if c < count and c != slot:
                    for r, cc in T.Parallel(bM, bN):
                        C_f[r, cc] += Ws[s * slots + c, r, cc]
            epilogue(C_f, C_s, Bias, Y, None, whole + s, N)
            if tx == me * 128:
                Cnt[s] = 0

    @T.macro
    def tail(A_s, W_s, C_f, C_s, Bias, Y, Ws, Cnt, full, empty, order, me, bid, tx, N):
        # Consumer me takes the tail segment that is unit Wr + q, (Wr + q) % 2 == me.
        last = T.alloc_shared((CONSUMERS,), "int32")
        q = (me - Wr) % CONSUMERS
        first, stop, _ = segment(bid, q)
        if first < stop:
            consume_tail(A_s, W_s, C_f, C_s, Bias, Y, Ws, Cnt, last, full, empty, order, me, q, bid, tx, N)

    # The output tile in shared memory as it is stored: y's rows (the transpose's columns).
    # A token placeholder with `direct`, which never uses it.
    out_tile = (8, 8) if direct else (bN, bM) if swap else (bM, bN)

    @T.macro
    def body(A, W, Bias, Y, Ws, Cnt, G):
        # A and W are wgmma's A and B operands: x and the weight, or with swap_ab the other way.
        with T.Kernel(blocks, threads=CONSUMERS * 128 + PRODUCERS) as bid:
            A_s = T.alloc_shared((stages, bM, bK), dtype)
            W_s = T.alloc_shared((stages, bN, bK), dtype)
            C_f0 = T.alloc_fragment((bM, bN), ACCUM)
            C_f1 = T.alloc_fragment((bM, bN), ACCUM)
            C_s0 = T.alloc_shared(out_tile, dtype)
            C_s1 = T.alloc_shared(out_tile, dtype)
            full = T.alloc_barrier([PRODUCERS] * stages)
            empty = T.alloc_barrier([128] * stages)  # the one consumer of that use arrives
            order = T.alloc_barrier([128] * CONSUMERS)  # order[c]: consumer c may start its next k-loop
            tx = T.get_thread_binding()
            mine = T.ceildiv(whole - bid, blocks)  # this block's whole tiles: bid, bid + blocks, ...
            if tx >= CONSUMERS * 128:
                T.set_max_nreg(PRODUCER_REGS, 0)
                for i in T.serial(rounds * CONSUMERS):
                    if i < mine:
                        produce(A, W, A_s, W_s, full, empty, bid + i * blocks, 0, kt, i * kt)
                if R:
                    first0, stop0, base0 = segment(bid, 0)
                    if first0 < stop0:
                        produce(A, W, A_s, W_s, full, empty, whole + first0 // kt, first0 % kt, stop0 - first0, base0)
                    first1, stop1, base1 = segment(bid, 1)
                    if first1 < stop1:
                        produce(A, W, A_s, W_s, full, empty, whole + first1 // kt, first1 % kt, stop1 - first1, base1)
            elif tx < 128:
                T.set_max_nreg(CONSUMER_REGS, 1)
                for j in T.serial(rounds):
                    if j * CONSUMERS < mine:
                        consume(A_s, W_s, C_f0, C_s0, Bias, Y, G, full, empty, order, 0, bid, j * CONSUMERS, N)
                if R:
                    tail(A_s, W_s, C_f0, C_s0, Bias, Y, Ws, Cnt, full, empty, order, 0, bid, tx, N)
            else:
                T.set_max_nreg(CONSUMER_REGS, 1)
                for j in T.serial(rounds):
                    if j * CONSUMERS + 1 < mine:
                        consume(A_s, W_s, C_f1, C_s1, Bias, Y, G, full, empty, order, 1, bid, j * CONSUMERS + 1, N)
                if R:
                    tail(A_s, W_s, C_f1, C_s1, Bias, Y, Ws, Cnt, full, empty, order, 1, bid, tx, N)

    ws_rows = max(1, R * slots)

    if R:

        @T.prim_func
        def linear_tc_pingpong_sk(
            A: T.Tensor((M, K), dtype),
            W: T.Tensor((N, K), dtype),
            Bias: T.Tensor((N,), dtype),
            Ws: T.Tensor((ws_rows, bM, bN), ACCUM),
            Cnt: T.Tensor((R,), "int32"),
            Y: T.Tensor((M, N), dtype),
        ):
            body(A, W, Bias, Y, Ws, Cnt, None)  # stream-K never swaps nor gates (_gemm_checks)

        return linear_tc_pingpong_sk

    @T.macro
    def whole_tiles(A, W, Bias, G, Y):
        if swap:
            body(W, A, Bias, Y, None, None, G)
        else:
            body(A, W, Bias, Y, None, None, G)

    return linear_program(T, shape, dtype, whole_tiles, gate, "linear_tc_pingpong")
