"""The TileLang programs of the gemm families (see gemm.py for what they compute).

In: shape (M, N, K), a dtype, a full config (the schedule's defaults filled in) and the
activation fused in the epilogue. Out: a TileLang PrimFunc: on CPU a blocked loop nest
over fp32 local tiles; on CUDA tensor-core tiles (whole-K, split-K, whole-K in
2-block clusters that share A by TMA multicast, or the ping-pong schedule of
kernels/gemm/pingpong.py) for fp16/bf16, and a register-blocked
SIMT (FFMA) schedule for fp32. Every schedule shares one epilogue: the bias, then the
activation (`act_macro`: the same formulas on every target, on CUDA with its MUFU exp and
reciprocal), on the fp32 accumulator before the one rounding. With `gate` (gemm_mul: a
gated MLP's up projection times the activated gate, SwiGLU's `silu(gate(x)) * up(x)`) the
program takes one more input, G[M, N], and the epilogue multiplies by it before that
rounding (`mul_macro`), on the whole-K schedules (CPU, tensor-core, ping-pong, SIMT); the
split-K and cluster programs have no gated form. Checking configs and compiling are the
family's (gemm.py, base.py); nothing here runs a kernel.
"""

# No `from __future__ import annotations`: a program's tensor annotations are evaluated
# where it is defined, so a wrapper whose body only calls a macro (`_tc_program`'s) still
# finds M, N and K.
import functools
import math
from typing import Any

from ...results import Shape
from ..common import accumulation_loop, cpu_tile_product
from .pingpong import pingpong_program
from .prim import linear_program

ACCUM = "float32"
_SQRT1_2 = 1.0 / math.sqrt(2.0)
_SQRT_2_PI = math.sqrt(2.0 / math.pi)

# Swizzle panels and warp partitions, by config value.
POLICIES = ("square", "fullrow", "fullcol")


# Abramowitz & Stegun 7.1.26: for z >= 0, erfc(z) = t (a1 + t (a2 + t (a3 + t (a4 + t a5))))
# exp(-z^2) with t = 1 / (1 + p z), absolute error under 1.5e-7. GELU from it is within
# 6.5e-7 of float64's (fp32 erff's own: 1.2e-6) over [-12, 12], and it is Phi(-|x|)
# directly, so no 1 + erf(x) cancels where x is negative.
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def act_macro(T: Any, act: str, fast: bool):
    """A TileLang macro `apply(C, i, j)`: C[i, j] = act(C[i, j]) on an fp32 buffer.

    Why statements, not an expression: each name bound here becomes one local, where an
    expression tree repeats every use of x or t in the generated code. Why not erff:
    fp32 erff computes two polynomials and selects one, about 34 instructions a value
    (the PTX of gemm_gelu's epilogue); on the H200 that epilogue cost 15 us over a 28.5 us
    GEMM at ViT-B's 3152x3072x768. With A&S the epilogue's PTX is 18 instructions a value,
    two of them MUFU ops. `fast` (CUDA) takes the MUFU forms of exp and 1/x (__expf,
    rcp.approx, both within 2 ulp of fp32); on CPU, AMD and MACA targets the same formulas
    use exp and division, and CI checks their accuracy on CPU."""
    ex = T.__exp if fast else T.exp
    rcp = T.fast_rcp if fast else (lambda d: T.float32(1) / d)
    absf = T.abs if fast else (lambda v: T.max(v, -v))  # TileLang's C backend has no fabs
    one, half = T.float32(1), T.float32(0.5)
    # exp(80) is finite, so 1 / (1 + exp) stays a number: with exp(89) = inf the C
    # backend's fast-math reciprocal gave NaN; the result is x * 1.8e-35, i.e. 0.
    cap = T.float32(80)

    if act == "relu":

        @T.macro
        def apply(C, i, j):
            C[i, j] = T.max(C[i, j], T.float32(0))
    elif act == "gelu":
        a1, a2, a3, a4, a5 = (T.float32(a) for a in _AS_A)

        @T.macro
        def apply(C, i, j):
            x = C[i, j]
            z = absf(x) * T.float32(_SQRT1_2)
            t = rcp(one + T.float32(_AS_P) * z)
            h = half * t * (a1 + t * (a2 + t * (a3 + t * (a4 + t * a5)))) * ex(-(z * z))  # Phi(-|x|)
            C[i, j] = x * T.if_then_else(x >= T.float32(0), one - h, h)
    elif act == "silu":

        @T.macro
        def apply(C, i, j):
            x = C[i, j]
            C[i, j] = x * rcp(one + ex(T.min(-x, cap)))
    elif act == "gelu_tanh":  # GPT-2's gelu_new, F.gelu(approximate="tanh"): 0.5 x (1 + tanh u) = x sigmoid(2u)

        @T.macro
        def apply(C, i, j):
            x = C[i, j]
            u = T.float32(2 * _SQRT_2_PI) * (x + T.float32(0.044715) * x * x * x)
            C[i, j] = x * rcp(one + ex(T.min(-u, cap)))
    else:
        raise ValueError(f"no activation {act!r}")
    return apply


def bias_act(T: Any, bM: int, bN: int, act: str, fast: bool = True, by_row: bool = False):
    """A TileLang macro: bias, then the activation, on a tile's fp32 accumulator, in two
    passes. `by_row`: the bias runs down the tile's rows, `bx` being the row tile (the
    ping-pong program's `swap_ab` tile holds y's transpose). In one pass the activation's expression names x twice
    (x * Phi(x)), and
    TileLang substitutes the biased sum, bias load and bounds test included, into both
    uses: the loop lost its float2 vectors and loaded every bias twice (the lowered
    CUDA of gemm_gelu at 3152x3072x768), where the second pass reads a register."""

    if by_row:

        @T.macro
        def add_bias(C_f, Bias, bx, N):
            for i, j in T.Parallel(bM, bN):
                C_f[i, j] = C_f[i, j] + T.if_then_else(bx * bM + i < N, T.cast(Bias[bx * bM + i], ACCUM), T.float32(0))
    else:

        @T.macro
        def add_bias(C_f, Bias, bx, N):
            for i, j in T.Parallel(bM, bN):
                C_f[i, j] = C_f[i, j] + T.if_then_else(bx * bN + j < N, T.cast(Bias[bx * bN + j], ACCUM), T.float32(0))

    if act == "none":
        return add_bias

    apply = act_macro(T, act, fast=fast)

    @T.macro
    def add_bias_act(C_f, Bias, bx, N):
        add_bias(C_f, Bias, bx, N)
        for i, j in T.Parallel(bM, bN):
            apply(C_f, i, j)

    return add_bias_act


def mul_macro(T: Any, bM: int, bN: int, by_row: bool = False):
    """A TileLang macro `mul(C_f, G, r, c, M, N)`: the fp32 tile of row tile r and column
    tile c times the matching elements of G[M, N], read straight from global memory as the
    bias is (each thread reads the elements it holds). `by_row`: the tile holds y's
    transpose (`swap_ab`: r over features, c over tokens), so C_f[i, j] meets G[c * bN + j,
    r * bM + i]. Past M or N the factor is 0 and the load is skipped: the store drops
    those elements anyway, and G has nothing there to read."""
    if by_row:

        @T.macro
        def mul(C_f, G, r, c, M, N):
            for i, j in T.Parallel(bM, bN):
                C_f[i, j] = C_f[i, j] * T.if_then_else(
                    (c * bN + j < M) and (r * bM + i < N), T.cast(G[c * bN + j, r * bM + i], ACCUM), T.float32(0)
                )
    else:

        @T.macro
        def mul(C_f, G, r, c, M, N):
            for i, j in T.Parallel(bM, bN):
                C_f[i, j] = C_f[i, j] * T.if_then_else(
                    (r * bM + i < M) and (c * bN + j < N), T.cast(G[r * bM + i, c * bN + j], ACCUM), T.float32(0)
                )

    return mul


def cpu_program(shape: Shape, dtype: str, cfg: dict[str, Any], act: str, gate: bool = False):
    import tilelang.cpu.language as T

    M, N, K = shape
    bM, bN, bK = cfg["block_M"], cfg["block_N"], cfg["block_K"]
    product = cpu_tile_product(T, bM, bN, bK, cfg.get("unroll", 1))
    apply = act_macro(T, act, fast=False) if act != "none" else None

    @T.macro
    def body(A, W, Bias, G, Y):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM)) as (bx, by):
            # fp32 tiles whatever the storage dtype: half.hpp arithmetic is scalar
            # and slow, and accumulation must be fp32 anyway.
            A_l = T.alloc_local((bM, bK), ACCUM)
            B_l = T.alloc_local((bK, bN), ACCUM)
            C_l = T.alloc_local((bM, bN), ACCUM)
            T.clear(C_l)
            for ko in T.serial(T.ceildiv(K, bK)):
                for i, k in T.grid(bM, bK):
                    A_l[i, k] = T.if_then_else(
                        (by * bM + i < M) and (ko * bK + k < K),
                        T.cast(A[by * bM + i, ko * bK + k], ACCUM),
                        T.float32(0),
                    )
                # Transposed on the way in so the inner loop streams rows of both tiles.
                for k, j in T.grid(bK, bN):
                    B_l[k, j] = T.if_then_else(
                        (bx * bN + j < N) and (ko * bK + k < K),
                        T.cast(W[bx * bN + j, ko * bK + k], ACCUM),
                        T.float32(0),
                    )
                product(A_l, B_l, C_l)  # C.cpu_tile_product: i-k-j, the k loop unrolled by hand
            for i, j in T.grid(bM, bN):
                if (by * bM + i < M) and (bx * bN + j < N):
                    C_l[i, j] = C_l[i, j] + T.cast(Bias[bx * bN + j], ACCUM)
                    if act != "none":
                        apply(C_l, i, j)
                    if gate:
                        C_l[i, j] = C_l[i, j] * T.cast(G[by * bM + i, bx * bN + j], ACCUM)
                    Y[by * bM + i, bx * bN + j] = T.cast(C_l[i, j], dtype)

    return linear_program(T, shape, dtype, body, gate, "linear_cpu")


def _policy(T: Any, name: str) -> Any:
    return {
        "square": T.GemmWarpPolicy.Square,
        "fullrow": T.GemmWarpPolicy.FullRow,
        "fullcol": T.GemmWarpPolicy.FullCol,
    }[name]


def tensor_core_program(shape: Shape, dtype: str, cfg: dict[str, Any], act: str, fast: bool = True, gate: bool = False):
    """The tensor-core schedule: split-K when the config asks for it (reduced in the
    kernel itself, or atomically with the epilogue in PyTorch), else whole-K tiles.
    `fast`: the epilogue may use CUDA's MUFU intrinsics (__expf, rcp.approx); TileLang's
    HIP backend has no tl.fast_rcp, so AMD targets get exp and a division. `gate`: the
    whole-K programs only (gemm.py's config check refuses the others)."""
    if cfg["split_k"] > 1:
        if cfg["splitk_fused"]:
            return _splitk_fused_program(shape, dtype, cfg, act, fast)
        return _splitk_program(shape, dtype, cfg)
    if cfg["cluster"]:
        return _cluster_program(shape, dtype, cfg, act, fast)
    if cfg["pingpong"]:
        return pingpong_program(
            shape, dtype, cfg, functools.partial(bias_act, act=act, fast=fast), mul_macro if gate else None
        )
    return _tc_program(shape, dtype, cfg, act, fast, gate)


def splitk_workspace(shape: Shape, cfg: dict[str, Any]) -> tuple[tuple[int, int, int], int]:
    """The fused split-K kernel's fp32 partials [splits, M, N] (padded to whole tiles, so
    they are read and written without bounds checks) and its per-tile counters."""
    M, N, _ = shape
    bM, bN, splits = cfg["block_M"], cfg["block_N"], cfg["split_k"]
    tm, tn = -(-M // bM), -(-N // bN)
    return (splits, tm * bM, tn * bN), tm * tn


def _splitk_partial(T: Any, cfg: dict[str, Any]):
    """The part both split-K programs share, as a TileLang macro (inlined where it is
    called): block `bz` of a tile accumulates A @ W.T over its own range of whole
    block_K tiles into C_f. The last range may run past K, where T.copy reads zeros.
    K is an argument, not a closure name: the caller's body must use K, because
    TileLang resolves its tensor annotations through the names the body uses."""
    bM, bN, bK, splits, stages = cfg["block_M"], cfg["block_N"], cfg["block_K"], cfg["split_k"], cfg["num_stages"]
    policy = _policy(T, cfg["policy"])

    @T.macro
    def partial_product(A, W, A_s, W_s, C_f, bx, by, bz, K):
        T.clear(C_f)
        k_tiles = T.ceildiv(T.ceildiv(K, bK), splits)
        for ko in T.Pipelined(k_tiles, num_stages=stages):
            T.copy(A[by * bM, (bz * k_tiles + ko) * bK], A_s)
            T.copy(W[bx * bN, (bz * k_tiles + ko) * bK], W_s)
            T.gemm(A_s, W_s, C_f, transpose_B=True, policy=policy)

    return partial_product


def _splitk_fused_program(shape: Shape, dtype: str, cfg: dict[str, Any], act: str, fast: bool):
    """Split-K in one kernel: each of `split_k` blocks of an output tile writes its fp32
    partial to a workspace, then counts itself in on the tile's counter; the block that
    arrives last adds the partials, applies bias and activation once, rounds, stores the
    tile and resets the counter for the next call. This is the serial-reduction
    ("last block reduces") form of CUTLASS's split-K: no zero-fill kernel, no atomics on
    the output, no epilogue kernels after it, so it pays off on the short-output,
    long-K shapes of feed-forward down projections."""
    import tilelang.language as T

    M, N, K = shape
    bM, bN, bK, splits = cfg["block_M"], cfg["block_N"], cfg["block_K"], cfg["split_k"]
    threads, swizzle, panel = cfg["threads"], cfg["swizzle"], cfg["panel"]
    partial_product = _splitk_partial(T, cfg)
    n_tiles = -(-N // bN)
    epilogue = bias_act(T, bM, bN, act, fast)
    # The annotations below spell the workspace shape (splitk_workspace) in names the
    # body uses: TileLang resolves annotation names through the body's closure.

    @T.prim_func
    def linear_splitk_fused(
        A: T.Tensor((M, K), dtype),
        W: T.Tensor((N, K), dtype),
        Bias: T.Tensor((N,), dtype),
        Ws: T.Tensor((splits, -(-M // bM) * bM, n_tiles * bN), ACCUM),
        Cnt: T.Tensor((-(-M // bM) * n_tiles,), "int32"),
        Y: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), splits, threads=threads) as (bx, by, bz):
            A_s = T.alloc_shared((bM, bK), dtype)
            W_s = T.alloc_shared((bN, bK), dtype)
            C_f = T.alloc_fragment((bM, bN), ACCUM)
            C_s = T.alloc_shared((bM, bN), dtype)
            arrived = T.alloc_shared((1,), "int32")
            T.use_swizzle(panel_size=panel, enable=swizzle)
            partial_product(A, W, A_s, W_s, C_f, bx, by, bz, K)
            T.copy(C_f, Ws[bz, by * bM, bx * bN])
            tid = T.get_thread_binding()
            # Every thread's partial is stored before one thread counts the block in,
            # with release-acquire order at device scope (as CUTLASS's split-K barrier).
            T.sync_threads()
            if tid == 0:
                arrived[0] = T.atomic_add(Cnt[by * n_tiles + bx], 1, memory_order="acq_rel", return_prev=True)
            T.sync_threads()
            if arrived[0] == splits - 1:
                for s in T.serial(splits):
                    if s != bz:
                        for i, j in T.Parallel(bM, bN):
                            C_f[i, j] += Ws[s, by * bM + i, bx * bN + j]
                epilogue(C_f, Bias, bx, N)
                T.copy(C_f, C_s)
                T.copy(C_s, Y[by * bM, bx * bN])
                if tid == 0:
                    Cnt[by * n_tiles + bx] = 0

    return linear_splitk_fused


def _tile_product(T: Any, cfg: dict[str, Any], act: str, fast: bool, dtype: str = "float16", gate: bool = False):
    """One output tile, as a TileLang macro both whole-K programs call: the pipelined
    A @ W.T over K into C_f, then bias and activation (and with `gate` the product with
    G's tile) on the fp32 accumulator before the single rounding, stored through shared
    memory. K is an argument (see _splitk_partial). With `swap_ab` the caller passes the
    weight as A and x as W, `by` over feature tiles and `bx` over token tiles: the tile is
    y's transpose, stored back transposed."""
    bM, bN, bK, stages = cfg["block_M"], cfg["block_N"], cfg["block_K"], cfg["num_stages"]
    policy = _policy(T, cfg["policy"])
    swap = bool(cfg.get("swap_ab"))
    epilogue = bias_act(T, bM, bN, act, fast, by_row=swap)
    mul = mul_macro(T, bM, bN, by_row=swap)

    @T.macro
    def tile_product(A, W, Bias, Y, G, A_s, W_s, C_f, C_s, bx, by, M, N, K):
        T.clear(C_f)
        for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
            T.copy(A[by * bM, ko * bK], A_s)
            T.copy(W[bx * bN, ko * bK], W_s)
            T.gemm(A_s, W_s, C_f, transpose_B=True, policy=policy)
        if swap:
            epilogue(C_f, Bias, by, N)
            if gate:
                mul(C_f, G, by, bx, M, N)
            for i, j in T.Parallel(bM, bN):
                C_s[j, i] = T.cast(C_f[i, j], dtype)
            T.copy(C_s, Y[bx * bN, by * bM])
        else:
            epilogue(C_f, Bias, bx, N)
            if gate:
                mul(C_f, G, by, bx, M, N)
            T.copy(C_f, C_s)
            T.copy(C_s, Y[by * bM, bx * bN])

    return tile_product


def _tc_program(shape: Shape, dtype: str, cfg: dict[str, Any], act: str, fast: bool, gate: bool = False):
    """Whole-K tiles: one block per output tile, or with `persistent` = P, P blocks (one
    per SM) that walk the tiles in grouped order. A persistent block's TMA producer
    starts loading its next tile while its consumers still run this tile's epilogue, so
    the pipeline's fill is hidden: on short-K shapes (ViT's and BERT's K = 768, 12
    k-steps of 64) the fill and the epilogue are a large share of each tile's time.
    Experimental (measured slower on the H200, 0.875x against 0.947x for the ping-pong
    tiles at 3152x3072x768: reports/examples/kernels/h200-2026-12-03/
    kernel_sweep_swap_attention.json): `swap_ab` tiles y's transpose, block_M
    features by block_N tokens, as the ping-pong program does (gemm/pingpong's
    docstring), here with TileLang's own pipeline, so two warpgroups share one 256-row
    tile as cuBLAS's 256x144 does at ViT-B's 3152x3072x768: the grid walks the transpose
    (rows over N, columns over M), the weight is the tile product's A and x its W.
    The four variants keep their kernel names (linear_tc[_swap][_persistent], `_mul`
    with `gate`)."""
    import tilelang.language as T

    M, N, K = shape
    bM, bN, bK = cfg["block_M"], cfg["block_N"], cfg["block_K"]
    threads, swizzle = cfg["threads"], cfg["swizzle"]
    panel, persistent = cfg["panel"], cfg["persistent"]
    swap = bool(cfg.get("swap_ab"))
    tile_product = _tile_product(T, cfg, act, fast, dtype, gate)
    rows, cols = (N, M) if swap else (M, N)  # the tiles' grid: y's, or its transpose's
    out_tile = (bN, bM) if swap else (bM, bN)  # C_s as y's rows lie

    @T.macro
    def product(A, W, Bias, Y, G, A_s, W_s, C_f, C_s, bx, by):
        if swap:
            tile_product(W, A, Bias, Y, G, A_s, W_s, C_f, C_s, bx, by, M, N, K)
        else:
            tile_product(A, W, Bias, Y, G, A_s, W_s, C_f, C_s, bx, by, M, N, K)

    @T.macro
    def body(A, W, Bias, G, Y):
        if persistent:
            with T.Kernel(persistent, threads=threads) as block_id:
                A_s = T.alloc_shared((bM, bK), dtype)
                W_s = T.alloc_shared((bN, bK), dtype)
                C_f = T.alloc_fragment((bM, bN), ACCUM)
                C_s = T.alloc_shared(out_tile, dtype)
                # Groups of `panel` row-tiles walked column by column keep A and W panels in L2.
                for by, bx in T.Persistent(
                    [T.ceildiv(rows, bM), T.ceildiv(cols, bN)], persistent, block_id, group_size=panel
                ):
                    product(A, W, Bias, Y, G, A_s, W_s, C_f, C_s, bx, by)
        else:
            with T.Kernel(T.ceildiv(cols, bN), T.ceildiv(rows, bM), threads=threads) as (bx, by):
                A_s = T.alloc_shared((bM, bK), dtype)
                W_s = T.alloc_shared((bN, bK), dtype)
                C_f = T.alloc_fragment((bM, bN), ACCUM)
                C_s = T.alloc_shared(out_tile, dtype)
                # Panel rasterization keeps neighbouring blocks on the same A/W panels in L2.
                T.use_swizzle(panel_size=panel, enable=swizzle)
                product(A, W, Bias, Y, G, A_s, W_s, C_f, C_s, bx, by)

    return linear_program(
        T, shape, dtype, body, gate, "linear_tc" + ("_swap" if swap else "") + ("_persistent" if persistent else "")
    )


def _cluster_program(shape: Shape, dtype: str, cfg: dict[str, Any], act: str, fast: bool):
    """Experimental (config `cluster` = 2, sm_90 only): whole-K tiles launched in clusters
    of two blocks along N. Both blocks of a cluster need the same A tile, so rank 0 loads
    it once from L2 with a TMA multicast into both blocks' shared memory, halving A's L2
    traffic (cuBLAS's Hopper kernels do this on the short-M llama shapes).
    T.Pipelined with T.copy_cluster lowers, but its barriers are per block (the producer
    waits for its own consumers only, and nothing syncs the cluster after the barriers
    are initialized), so rank 0 could overwrite a stage rank 1 still reads. The pipeline is therefore written out,
    as in CUTLASS: one
    producer warpgroup issues the loads, `threads` consumer threads run T.gemm, a stage's
    `full` barrier is local (its bytes arrive from both blocks' loads) and its `empty`
    barrier counts the consumers of both blocks, each consumer arriving on its own block's
    and the peer's. The cluster syncs at the start (barriers initialized before a peer
    multicasts into them) and at the end (no block exits while its peer still arrives on
    its barriers). Rasterization stays off: remapping block indices would split a pair."""
    import tilelang.language as T

    M, N, K = shape
    bM, bN, bK, stages = cfg["block_M"], cfg["block_N"], cfg["block_K"], cfg["num_stages"]
    threads, size = cfg["threads"], cfg["cluster"]
    policy = _policy(T, cfg["policy"])
    producers, peers = 128, (1 << size) - 1  # one producer warpgroup; the multicast mask
    epilogue = bias_act(T, bM, bN, act, fast)

    @T.prim_func
    def linear_tc_cluster(
        A: T.Tensor((M, K), dtype),
        W: T.Tensor((N, K), dtype),
        Bias: T.Tensor((N,), dtype),
        Y: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads + producers, cluster_dims=(size, 1, 1)) as (
            bx,
            by,
        ):
            A_s = T.alloc_shared((stages, bM, bK), dtype)
            W_s = T.alloc_shared((stages, bN, bK), dtype)
            C_f = T.alloc_fragment((bM, bN), ACCUM)
            C_s = T.alloc_shared((bM, bN), dtype)
            full = T.alloc_barrier([producers] * stages)  # every producer thread arrives; one loads
            empty = T.alloc_cluster_barrier([size * threads] * stages)
            tid = T.get_thread_binding()
            T.cluster_sync()
            if tid >= threads:
                for ko in T.serial(T.ceildiv(K, bK)):
                    s = ko % stages
                    T.mbarrier_wait_parity(empty[s], ((ko // stages) & 1) ^ 1)
                    # Every block expects A's bytes on its own `full`; only rank 0 loads them.
                    T.tma_copy(
                        A[by * bM : (by + 1) * bM, ko * bK : (ko + 1) * bK],
                        A_s[s, :, :],
                        barrier=full[s],
                        cluster_mask=peers,
                    )
                    T.tma_copy(W[bx * bN : (bx + 1) * bN, ko * bK : (ko + 1) * bK], W_s[s, :, :], barrier=full[s])
                    T.barrier_arrive(full[s])
            else:
                T.clear(C_f)
                for ko in T.serial(T.ceildiv(K, bK)):
                    s = ko % stages
                    T.mbarrier_wait_parity(full[s], (ko // stages) & 1)
                    T.gemm(A_s[s, :, :], W_s[s, :, :], C_f, transpose_B=True, policy=policy)
                    for r in T.unroll(size):
                        T.mbarrier_arrive(empty[s], r)
                epilogue(C_f, Bias, bx, N)
                T.copy(C_f, C_s)
                T.copy(C_s, Y[by * bM, bx * bN])
            T.cluster_sync()

    return linear_tc_cluster


def _splitk_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    """Partial products of `split_k` K-ranges added atomically into a zeroed fp32 [M, N];
    used when M*N alone would leave most SMs idle. The K-ranges are whole block_K tiles,
    so they never overlap; the last may run past K, where T.copy reads zeros."""
    import tilelang.language as T

    M, N, K = shape
    bM, bN, bK, splits = cfg["block_M"], cfg["block_N"], cfg["block_K"], cfg["split_k"]
    threads, swizzle, panel = cfg["threads"], cfg["swizzle"], cfg["panel"]
    partial_product = _splitk_partial(T, cfg)

    @T.prim_func
    def linear_splitk(
        A: T.Tensor((M, K), dtype),
        W: T.Tensor((N, K), dtype),
        Y32: T.Tensor((M, N), ACCUM),
    ):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), splits, threads=threads) as (bx, by, bz):
            A_s = T.alloc_shared((bM, bK), dtype)
            W_s = T.alloc_shared((bN, bK), dtype)
            C_f = T.alloc_fragment((bM, bN), ACCUM)
            T.use_swizzle(panel_size=panel, enable=swizzle)
            partial_product(A, W, A_s, W_s, C_f, bx, by, bz, K)
            T.atomic_add(Y32[by * bM, bx * bN], C_f)

    return linear_splitk


def simt_program(shape: Shape, dtype: str, cfg: dict[str, Any], act: str, fast: bool = True, gate: bool = False):
    import tilelang.language as T

    M, N, K = shape
    bM, bN, bK = cfg["block_M"], cfg["block_N"], cfg["block_K"]
    tM, tN = cfg["thread_M"], cfg["thread_N"]
    stages, swizzle, unroll = cfg["num_stages"], cfg["swizzle"], cfg.get("unroll", 0)
    cols = bN // tN
    threads = (bM // tM) * cols
    pad = 4  # breaks the 32-way bank conflict of the transposed shared-memory stores
    apply = act_macro(T, act, fast=fast) if act != "none" else None

    @T.macro
    def body(A, W, Bias, G, Y):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            # K-major tiles so each thread reads its tM (tN) operands as one vector.
            A_s = T.alloc_shared((bK, bM + pad), dtype)
            W_s = T.alloc_shared((bK, bN + pad), dtype)
            acc = T.alloc_local((tM, tN), ACCUM)
            a_r = T.alloc_local((tM,), ACCUM)
            b_r = T.alloc_local((tN,), ACCUM)
            tid = T.get_thread_binding()
            ty = tid // cols
            tx = tid % cols
            T.use_swizzle(panel_size=10, enable=swizzle)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
                for i, k in T.Parallel(bM, bK):
                    A_s[k, i] = T.if_then_else(
                        (by * bM + i < M) and (ko * bK + k < K), A[by * bM + i, ko * bK + k], T.float32(0)
                    )
                for j, k in T.Parallel(bN, bK):
                    W_s[k, j] = T.if_then_else(
                        (bx * bN + j < N) and (ko * bK + k < K), W[bx * bN + j, ko * bK + k], T.float32(0)
                    )
                for kk in accumulation_loop(T, bK, unroll):
                    for i in T.vectorized(tM):
                        a_r[i] = A_s[kk, ty * tM + i]
                    for j in T.vectorized(tN):
                        b_r[j] = W_s[kk, tx * tN + j]
                    # Fully unrolled so acc, a_r and b_r live in registers: tM*tN FFMAs
                    # per (tM + tN) shared-memory loads.
                    for i in T.unroll(tM):
                        for j in T.unroll(tN):
                            acc[i, j] += a_r[i] * b_r[j]
            for i, j in T.grid(tM, tN):
                if (by * bM + ty * tM + i < M) and (bx * bN + tx * tN + j < N):
                    acc[i, j] = acc[i, j] + Bias[bx * bN + tx * tN + j]
                    if act != "none":
                        apply(acc, i, j)
                    if gate:
                        acc[i, j] = acc[i, j] * G[by * bM + ty * tM + i, bx * bN + tx * tN + j]
                    Y[by * bM + ty * tM + i, bx * bN + tx * tN + j] = acc[i, j]

    return linear_program(T, shape, dtype, body, gate, "linear_simt")
