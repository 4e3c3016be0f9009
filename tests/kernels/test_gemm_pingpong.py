"""GEMM's `pingpong` config on CPU: the program lowers for sm_90a to a producer and two
consumer warpgroups (register reallocation, wgmma kept one step in flight, one named
barrier and one output tile each), its barrier protocol is safe under every interleaving
a random scheduler finds (and unsafe without its order barrier, which is why the program
has one), its tile order covers every tile once, config_error refuses what it cannot run
in one line, and the family's search space leaves it off where it lost. The experimental
`stream_k` tail: every tail k-step dealt to one block, the protocol kept over its shorter
units, a serial reduction per consumer in the lowered source, PTX that nvcc accepts.

In: shapes and configs. Out: pass/fail. Nothing runs a kernel (tests/gpu does).
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from evaluator.errors import KernelError
from evaluator.kernels import common as C
from evaluator.kernels.gemm import pingpong as PP
from evaluator.kernels import gemm as G
from evaluator.kernels import get
from tests.barriers import Barrier, interleave
from evaluator.device.targets import TARGETS
from tests.hardware import A100, H200

FAM = get("gemm")
SM90 = "cuda -arch=sm_90a"
PING = {"pingpong": 1, "persistent": 132, "threads": 128, "block_K": 64}
T128 = {**PING, "block_M": 128, "block_N": 128, "num_stages": 4}
T64 = {**PING, "block_M": 64, "block_N": 256, "num_stages": 4}
AWKWARD = (1000, 1000, 3000)  # no tile divides M, N or K; rows TMA can address


def _lower(shape, dtype, cfg, family=FAM):
    return C.lower_source(family.program(shape, dtype, cfg, SM90), SM90)


# Fewer blocks than tiles where the tiles would not give every block two (64 tiles of
# 128x128 on 132 blocks leave the second consumer nothing, and TileLang drops its loop).
@pytest.mark.slow
@pytest.mark.parametrize(
    "shape,dtype,cfg",
    [
        ((3152, 3072, 768), "float16", T128),
        ((3152, 3072, 768), "bfloat16", T64),
        (AWKWARD, "float16", {**T128, "persistent": 20}),
        ((512, 2048, 2048), "bfloat16", {**T128, "persistent": 24}),
    ],
)
def test_pingpong_lowers_to_a_producer_and_two_consumer_warpgroups(shape, dtype, cfg):
    src = _lower(shape, dtype, cfg)
    assert "__launch_bounds__(384, 1)" in src
    assert src.count(f"warpgroup_reg_alloc<{PP.CONSUMER_REGS}>") == 2
    assert src.count(f"warpgroup_reg_dealloc<{PP.PRODUCER_REGS}>") == 1
    # Each step's wgmma stays in flight while the step before releases its stage.
    assert "wait_wgmma<1>" in src and "warpgroup_wait<0>" not in src
    assert "tma_load(" in src and "tma_store(" in src and "wgmma" in src
    # The two epilogues sync on different named barriers: one id shared by two
    # warpgroups of 128 would let one consumer's threads complete the other's barrier.
    ids = set(re.findall(r"__sync_thread_partial\((\d+), 128\)", src))
    assert len(ids) == 2, ids
    # Each consumer waits for the other's k-loop on its own order barrier.
    assert "order[0].wait(" in src and "order[1].wait(" in src


@pytest.mark.slow
def test_a_consumer_without_a_tile_skips_its_round():
    # 192 tiles on 132 blocks: blocks 0-59 have two tiles, the rest one, so consumer 1 of
    # block 60 and up has none. Written as a loop of `mine // 2` rounds, TileLang lowered
    # it to one unguarded round and the kernel hung on the H200 (consumer 1 waited for a
    # tile the producer never loads). Each round is now guarded by the block's tile count.
    src = _lower((1024, 3072, 768), "float16", T128)
    consumer1 = src[src.index("order[1].wait(") - 200 : src.index("order[1].wait(")]
    assert "if (((int)blockIdx.x) < 60) {" in consumer1


@pytest.mark.slow
def test_pingpong_output_tiles_do_not_alias_the_ring():
    # TileLang reuses shared memory whose lifetimes do not overlap; here everything is live
    # in one persistent loop, so the ring and the two output tiles must be disjoint.
    src = _lower((3152, 3072, 768), "float16", T128)
    offsets = {
        name: int(off)
        for name, off in re.findall(r"void\* (\w+) = \(\(void\*\)\(\(char\*\)buf_dyn_shmem \+ (\d+)\)\)", src)
    }
    ring = (128 + 128) * 64 * 2 * 4
    assert sorted(offsets.values()) == [0, 65536, ring, ring + 128 * 128 * 2], offsets


@pytest.mark.slow
def test_pingpong_variant_of_a_fused_family_keeps_its_epilogue():
    # GELU as Abramowitz & Stegun's erfc on the MUFU's exp and reciprocal (act_macro).
    src = _lower((1024, 3072, 768), "float16", T128, family=get("gemm_gelu"))
    assert "__expf(" in src and "tl::fast_rcp(" in src and "erff(" not in src
    assert "__expf(" not in _lower((1024, 3072, 768), "float16", T128)


@pytest.mark.slow
@pytest.mark.parametrize("fused", ["gemm_gelu", "gemm_gelu_tanh", "gemm_silu"])
@pytest.mark.parametrize("cfg", [T128, {**T128, "pingpong": 0, "persistent": 0, "threads": 256, "block_N": 208}])
def test_fused_epilogue_loads_the_bias_as_the_plain_one_does(fused, cfg):
    # The activation names its input twice (x * Phi(x)); written as one pass over the
    # biased sum, TileLang substituted the bias load and its bounds test into both uses,
    # and the loop lost its half2 loads: gemm_gelu's epilogue at ViT-B's 3152x3072x768
    # cost 15 us over the plain GEMM's 28.5 on the H200. The fused epilogue must load the
    # bias exactly as the plain one does, then run the activation on registers.
    shape = (3152, 3072, 768)
    plain, act = _lower(shape, "float16", cfg), _lower(shape, "float16", cfg, family=get(fused))
    bias = lambda src: re.findall(r"\*\(uint1\*\)\(Bias \+|Bias\[", src)  # noqa: E731
    assert bias(act) == bias(plain) and bias(plain)
    assert "((float)Bias[" not in act


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def _ptx(tmp_path, source):
    """The lowered CUDA source through nvcc to PTX for sm_90a (no GPU needed)."""
    import tilelang

    cu, ptx = tmp_path / "k.cu", tmp_path / "k.ptx"
    cu.write_text(source)
    root = Path(tilelang.__file__).parent
    subprocess.run(
        [
            "nvcc",
            "-std=c++17",
            "-gencode=arch=compute_90a,code=sm_90a",
            "-ptx",
            "-O3",
            "-w",
            f"-I{root / 'src'}",
            f"-I{root / '3rdparty/cutlass/include'}",
            str(cu),
            "-o",
            str(ptx),
        ],
        check=True,
        timeout=300,
    )
    return ptx.read_text()


@pytest.mark.slow
def test_pingpong_source_compiles_for_sm90a(tmp_path):
    text = _ptx(tmp_path, _lower((3152, 3072, 768), "float16", T128))
    assert "wgmma.mma_async" in text and "setmaxnreg" in text


@pytest.mark.parametrize("tm,tn,panel", [(25, 24, 10), (4, 16, 10), (3, 7, 2), (1, 1, 10), (11, 3, 4)])
def test_tile_order_covers_every_tile_once(tm, tn, panel):
    seen = [PP.tile_coords(t, tm, tn, panel) for t in range(tm * tn)]
    assert sorted(seen) == [(r, c) for r in range(tm) for c in range(tn)]


# ---------------------------------------------------------------- the barrier protocol


def _simulate(tiles, kt, stages, rng, ordered=True, lens=None):
    """Runs the program's protocol (its parity functions, one arrival per warpgroup) under
    a random interleaving; returns the first violation: a consumer reading a stage that
    does not hold its use, or the producer refilling a stage a consumer still reads.
    `lens` gives each unit's k-steps (default: `tiles` whole tiles of kt), as stream-K's
    tail segments are shorter."""
    lens = lens if lens is not None else [kt] * tiles
    tiles = len(lens)
    starts = [sum(lens[:i]) for i in range(tiles)]
    full = [Barrier(1) for _ in range(stages)]
    empty = [Barrier(1) for _ in range(stages)]
    order = [Barrier(1) for _ in range(PP.CONSUMERS)]
    holds = [None] * stages  # the ring use whose bytes a stage holds
    reading = [set() for _ in range(stages)]

    def producer():
        for n in range(sum(lens)):
            s = n % stages
            yield lambda: empty[s].passes(PP.empty_parity(n, stages))
            if reading[s]:
                yield f"producer refilled stage {s} with use {n} while use {sorted(reading[s])} is read"
            holds[s] = n
            full[s].arrive()

    def consumer(me):
        for i in range(me, tiles, PP.CONSUMERS):
            if ordered and i > 0:
                yield lambda: order[me].passes(PP.order_parity(i))
            for ko in range(lens[i]):
                n = starts[i] + ko
                s = n % stages
                yield lambda: full[s].passes(PP.full_parity(n, stages))
                if holds[s] != n:
                    yield f"consumer {me} read use {n} from stage {s}, which holds use {holds[s]}"
                reading[s].add(n)
                yield lambda: True  # the wgmma of this step runs while the others move
                if ko > 0:
                    prev = n - 1
                    reading[prev % stages].discard(prev)
                    empty[prev % stages].arrive()
            last = starts[i] + lens[i] - 1
            reading[last % stages].discard(last)
            empty[last % stages].arrive()
            order[1 - me].arrive()

    return interleave([producer(), consumer(0), consumer(1)], rng)


@pytest.mark.parametrize("tiles,kt,stages", [(5, 12, 4), (6, 3, 4), (4, 1, 2), (7, 12, 5), (1, 8, 3), (9, 2, 8)])
def test_barrier_protocol_holds_under_random_interleavings(tiles, kt, stages):
    rng = random.Random(0)
    for _ in range(300):
        assert _simulate(tiles, kt, stages, rng) is None


def test_without_the_order_barrier_a_consumer_can_read_a_stage_early():
    # The reason the program has an order barrier: with 12 k-steps over 4 stages a
    # consumer can wait on a phase two ahead of the barrier and pass on the older one.
    rng = random.Random(0)
    found = [_simulate(4, 12, 4, rng, ordered=False) for _ in range(300)]
    assert any(f and "read use" in f for f in found)


# ---------------------------------------------------------------- stream-K's tail


def _units(b, tiles, blocks, kt):
    """Block b's units under stream_k, as the program walks them: its whole tiles, then its
    non-empty tail segments, each (tail tile or None, first k-step, k-steps)."""
    W, R, I = PP.sk_plan(tiles, blocks, kt)
    out = [(None, 0, kt)] * W
    for first, stop in PP.sk_segments(b, R, kt, I):
        if first < stop:
            out.append((first // kt, first % kt, stop - first))
    return out


@pytest.mark.parametrize(
    "tiles,blocks,kt",
    [
        (600, 132, 12),
        (450, 132, 12),
        (150, 132, 12),
        (150, 132, 48),
        (192, 132, 12),
        (133, 132, 5),
        (263, 132, 1),
        (7, 3, 16),
    ],
)
def test_stream_k_deals_every_tail_step_to_one_block(tiles, blocks, kt):
    W, R, I = PP.sk_plan(tiles, blocks, kt)
    assert W == tiles // blocks and R == tiles % blocks and 0 < I <= kt
    got = {}
    for b in range(blocks):
        units = _units(b, tiles, blocks, kt)
        assert len(units) <= W + 2  # a share spans at most two tail tiles
        assert sum(n for _, _, n in units) <= W * kt + I  # no block runs more than its share
        for s, k0, n in units[W:]:
            assert n > 0 and k0 + n <= kt
            for k in range(k0, k0 + n):
                got.setdefault((s, k), []).append(b)
    # Every k-step of every tail tile, once, by the blocks sk_contributors names.
    assert sorted(got) == [(s, k) for s in range(R) for k in range(kt)]
    assert all(len(v) == 1 for v in got.values())
    for s in range(R):
        first, count = PP.sk_contributors(s, kt, I)
        assert sorted({got[(s, k)][0] for k in range(kt)}) == list(range(first, first + count))


def test_stream_k_at_vit_3152x3072x768_takes_five_k_steps_off_the_longest_block():
    # 600 tiles of 128x128 on 132 blocks: 72 blocks ran 5 tiles (60 k-steps), 60 ran 4.
    tiles, kt = 25 * 24, 12
    longest = max(sum(n for _, _, n in _units(b, tiles, 132, kt)) for b in range(132))
    assert longest == 4 * kt + 7
    (ws, rows, cols), cnt = PP.sk_workspace((3152, 3072, 768), {**T128, "stream_k": 1})
    assert (rows, cols, cnt) == (128, 128, 72) and ws == 72 * 3  # at most 3 contributors a tile


@pytest.mark.parametrize(
    "tiles,blocks,kt,stages", [(600, 132, 12, 5), (150, 132, 12, 4), (263, 132, 1, 3), (7, 3, 16, 4)]
)
def test_stream_k_units_keep_the_barrier_protocol(tiles, blocks, kt, stages):
    rng = random.Random(1)
    for b in sorted({0, 1, blocks // 2, blocks - 1}):
        lens = [n for _, _, n in _units(b, tiles, blocks, kt)]
        for _ in range(100):
            assert _simulate(0, kt, stages, rng, lens=lens) is None, (b, lens)


SK = {**T128, "num_stages": 5, "stream_k": 1}


@pytest.mark.slow
def test_stream_k_lowers_to_a_serial_reduction_per_consumer():
    src = _lower((3152, 3072, 768), "float16", SK)
    # The partials and counters are the kernel's own arguments; each consumer counts its
    # segment in with one acq_rel atomic behind a barrier of its own warpgroup (5, 6).
    assert re.search(r"float\* __restrict__ Ws", src) and re.search(r"int\* __restrict__ Cnt", src)
    assert (
        src.count("AtomicAddRet(") == 2
        and "__sync_thread_partial(5, 128)" in src
        and "__sync_thread_partial(6, 128)" in src
    )
    assert len(re.findall(r"Cnt\[[^\]]+\] = 0;", src)) == 2  # the last contributor resets the counter


@pytest.mark.slow
def test_stream_k_without_a_tail_is_the_plain_pingpong_kernel():
    # 1024x768x768 at 128x64: 96 tiles on 96 blocks, one round, nothing to split.
    cfg = {**PING, "block_M": 128, "block_N": 64, "num_stages": 8}
    assert not PP.sk_splits((1024, 768, 768), {**cfg, "stream_k": 1})
    assert _lower((1024, 768, 768), "float16", {**cfg, "stream_k": 1}) == _lower((1024, 768, 768), "float16", cfg)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_stream_k_source_compiles_for_sm90a(tmp_path):
    text = _ptx(tmp_path, _lower((3000, 1000, 1000), "float16", SK))  # tails in M, N and K
    assert "wgmma.mma_async" in text and "acq_rel" in text


# ---------------------------------------------------------------- checks and the space


@pytest.mark.parametrize(
    "change,target,reason",
    [
        ({"pingpong": 2}, SM90, "pingpong must be 0 (off) or 1"),
        ({}, "cuda -arch=sm_80", "needs CUDA sm_90a; the target is cuda:sm_80"),
        ({}, "cuda -arch=sm_100a", "needs CUDA sm_90a; the target is cuda:sm_100a"),
        ({}, "hip", "needs CUDA sm_90a; the target is hip"),
        ({"split_k": 2}, SM90, "whole-K only"),
        ({"cluster": 2, "swizzle": False}, SM90, "not with split_k or cluster"),
        ({"persistent": 0}, SM90, "set persistent to the block count"),
        ({"threads": 256}, SM90, "threads must be 128"),
        ({"block_M": 256}, SM90, "block_M must be 64 or 128"),
        ({"block_N": 256}, SM90, "needs 256 fp32 registers a thread"),
        ({"stream_k": 2}, SM90, "stream_k must be 0 (off) or 1"),
        ({"stream_k": 1, "pingpong": 0, "persistent": 0, "threads": 256}, SM90, "set pingpong = 1"),
    ],
)
def test_config_error_names_what_a_pingpong_config_cannot_run(change, target, reason):
    with pytest.raises(KernelError, match="gemm: ") as err:
        FAM.resolve((3152, 3072, 768), "float16", {**T128, **change}, target)
    assert reason in str(err.value) and "\n" not in str(err.value)


def test_pingpong_refuses_rows_tma_cannot_address():
    assert FAM.awkward_shape((3152, 3072, 768))[2] % 8
    why = FAM.reject_reason((3152, 3072, 775), "float16", T128, H200)
    assert why and "multiples of 8" in why


def test_pingpong_counts_both_output_tiles_in_shared_memory():
    # 5 stages of 128x128x64 plus two 128x128 output tiles: 229,376 B, inside the H200's 232,448.
    assert FAM.reject_reason((3152, 3072, 768), "float16", {**T128, "num_stages": 5}, H200) is None
    why = FAM.reject_reason((3152, 3072, 768), "float16", {**T128, "num_stages": 6}, H200)
    assert why and "shared memory" in why


def test_search_space_offers_pingpong_early_on_hopper_only():
    for shape in ((3152, 3072, 768), (512, 2048, 2048), (1024, 768, 3072), (2048, 2304, 768), (3152, 768, 768)):
        space = FAM.search_space(shape, "float16", H200)
        ping = [c for c in space if c["pingpong"]]
        # y's own tiles everywhere, and its transpose's where tokens outnumber features.
        swapped = len(PP.SWAP_TILES) if shape[0] > shape[1] else 0
        assert len(ping) == len(PP.TILES) + swapped and all(c["persistent"] == 132 for c in ping)
        assert sum(c["swap_ab"] for c in ping) == swapped
        assert all(FAM.reject_reason(shape, "float16", c, H200) is None for c in ping)
        # All next to the first pick, inside the first batch a short budget compiles.
        assert ping == [c for c in space[: len(ping) + 1] if c["pingpong"]]
        assert not any(c["pingpong"] for c in FAM.search_space(shape, "float16", A100))
        for other in ("b200", "mi300x"):  # Blackwell has no wgmma; AMD's capability is a gfx arch
            assert not any(c["pingpong"] for c in FAM.search_space(shape, "float16", TARGETS[other].hardware()))
    # Decode shapes (M <= 64) and rows TMA cannot address get none.
    for shape in ((16, 4096, 4096), (1024, 770, 768), (1024, 768, 770)):
        assert not any(c["pingpong"] for c in FAM.search_space(shape, "float16", H200))
    assert FAM.schedule((3152, 3072, 768), "float16", "cuda").defaults["pingpong"] == 0


def test_a_ping_pong_tile_whose_width_is_not_a_multiple_of_16_is_refused():
    # wgmma's N steps by 8 and 128x152 matched F.linear on the H200, but ran 3x slower
    # than 128x128 (reports/examples/kernels/h200-2026-12-02/ncu-width/): the space must not reach it.
    why = FAM.reject_reason((3152, 3072, 768), "float16", {**T128, "block_N": 152}, H200)
    assert why and "multiples of 16" in why


def test_pingpong_counts_the_static_shared_memory_ptxas_adds():
    # 64x152 with 7 stages asked the H200's whole 232,448 B as dynamic memory and failed to
    # launch beside ptxas's 1,024 static bytes
    # (reports/examples/kernels/h200-2026-12-02/kernel_sweep_pingwave.log).
    failed = {**T128, "block_M": 64, "block_N": 152, "num_stages": 7}
    assert PP.smem_bytes(failed, 2) == 232448 + PP.STATIC_SMEM > H200.smem_per_block


@pytest.mark.parametrize(
    "shape,lead",
    [
        # More tokens than features: y's transpose (swap_ab,
        # reports/examples/kernels/h200-2026-12-03/). One round of 128x48 tokens at short K
        # (132 tiles, 1.18x against 1.12x), else of 128x64.
        ((1024, 768, 768), [(128, 48, 1), (128, 64, 1)]),
        ((1024, 768, 3072), [(128, 64, 1)]),
        # One full round of 128x144 at ViT-B's 3152 tokens, four at 3072 features (128x96: six).
        ((3152, 768, 768), [(128, 144, 1)]),
        ((3152, 768, 3072), [(128, 144, 1)]),
        # Where two fill their rounds nearly as well, the narrower leads: 128x96 ran 0.92x against
        # 0.93x for 128x144 at 3152x3072x768, 128x112 0.90x against 0.73x at 3152x2304x768.
        ((3152, 3072, 768), [(128, 96, 1), (128, 144, 1)]),
        ((3152, 2304, 768), [(128, 112, 1), (128, 144, 1)]),
        ((2048, 768, 3072), [(128, 96, 1)]),
        ((2048, 768, 768), [(128, 96, 1)]),  # GPT-2: one round of 128x96
        # y's own tiles (reports/examples/kernels/h200-2026-12-02/): one wave of 128x64; 128x96
        # filling one to three rounds at least 95%; 128x128 over three rounds (2048x3072x768:
        # 384 tiles fill three 97%).
        ((512, 2048, 2048), [(128, 64, 0)]),
        ((512, 2048, 5632), [(128, 64, 0)]),
        ((1024, 3072, 768), [(128, 96, 0)]),
        ((2048, 2304, 768), [(128, 96, 0)]),
        ((2048, 3072, 768), [(128, 128, 0)]),
        ((4096, 4096, 4096), [(128, 128, 0)]),
        ((512, 5632, 2048), []),  # where ping-pong lost to the wave schedule's 128x176
    ],
)
def test_pingpong_leads_the_space_where_the_sweep_measured_it_ahead(shape, lead):
    space = FAM.search_space(shape, "float16", H200)
    got = [(c["block_M"], c["block_N"], c["swap_ab"]) for c in space[: len(lead) or 1] if c["pingpong"]]
    assert got == lead


def test_stream_k_leads_only_long_k_over_many_rounds_where_it_measured_ahead():
    # 8192^3: 4096 tiles of 128x128 on 132 blocks (31 rounds and 4 tiles), 128 k-steps.
    big = FAM.search_space((8192, 8192, 8192), "float16", H200)
    assert big[0]["pingpong"] and big[0]["stream_k"] == 1 and (big[0]["block_M"], big[0]["block_N"]) == (128, 128)
    assert {**big[0], "stream_k": 0} in big  # the same tile without it, to compare
    assert (
        PP.sk_splits((8192, 8192, 8192), big[0])
        and FAM.reject_reason((8192, 8192, 8192), "float16", big[0], H200) is None
    )
    # Every model shape (12-48 k-steps, 1-5 rounds) measured it slower: not offered.
    for shape in ((3152, 3072, 768), (3152, 768, 3072), (512, 5632, 2048), (1024, 3072, 768), (2048, 2304, 768)):
        assert not any(c.get("stream_k") for c in FAM.search_space(shape, "float16", H200)), shape
    # Rounds that divide evenly leave no tail to split: 8192x8448x8192 is 64x66 = 4224 = 32 x 132 tiles.
    assert not any(c.get("stream_k") for c in FAM.search_space((8192, 8448, 8192), "float16", H200))


# ---------------------------------------------------------------- swap_ab and direct

SWAP = {**T128, "block_N": 144, "swap_ab": 1}


def test_swap_ab_walks_the_transposes_tiles():
    # ViT-B's 3152 tokens in 22 tiles of 144, 3072 features in 24 of 128: 528 tiles, four
    # full rounds of 132 SMs, where y's own 128x128 tiles make 600.
    assert PP.tile_grid((3152, 3072, 768), SWAP) == (24, 22)
    assert PP.tile_grid((3152, 3072, 768), T128) == (25, 24)
    assert PP._geometry((3152, 768, 768), SWAP) == (132, 132, 12)


@pytest.mark.slow
@pytest.mark.parametrize("direct", [0, 1])
def test_swap_ab_loads_the_weight_as_wgmmas_a_and_stores_the_transpose(direct):
    src = _lower((3152, 3072, 768), "float16", {**SWAP, "direct": direct, "num_stages": 6 if direct else 4})
    assert "wgmma" in src and "tma_load(" in src
    # The bias runs down the tile's rows (features): indexed by the accumulator row a
    # thread holds (lane / 4), where y's own tile loads pairs along a row (lane % 4).
    rows = re.findall(r"Bias\[([^\]]*)\]", src)
    assert rows and all("& 31) >> 2)" in r for r in rows) and "(uint1*)(Bias +" not in src
    if direct:  # scattered to y from registers: no output tile, no TMA store
        assert "tma_store(" not in src and re.search(r"\bY\[", src)
    else:  # through a 144 x 128 tile of y in shared memory, then one TMA store
        assert "tma_store(" in src


def test_direct_leaves_the_output_tiles_out_of_shared_memory():
    plain = PP.smem_bytes({**SWAP, "num_stages": 4}, 2)
    assert plain == (128 + 144) * 64 * 2 * 4 + 2 * 128 * 144 * 2 + PP.STATIC_SMEM
    assert PP.smem_bytes({**SWAP, "num_stages": 4, "direct": 1}, 2) == plain - 2 * 128 * 144 * 2
    # 128x144 fits four stages with its output tiles and six without.
    assert FAM.reject_reason((3152, 3072, 768), "float16", {**SWAP, "num_stages": 5}, H200)
    assert FAM.reject_reason((3152, 3072, 768), "float16", {**SWAP, "num_stages": 6, "direct": 1}, H200) is None


@pytest.mark.parametrize(
    "change,reason",
    [
        ({"swap_ab": 2}, "swap_ab must be 0 (off) or 1"),
        ({"direct": 3}, "direct must be 0 (off) or 1"),
        ({"stream_k": 1}, "not with swap_ab"),
        (
            {"direct": 1, "pingpong": 0, "persistent": 0, "threads": 256},
            "direct is an option of the ping-pong schedule",
        ),
        ({"split_k": 2, "pingpong": 0, "persistent": 0, "threads": 256}, "not with split_k or cluster"),
    ],
)
def test_config_error_names_what_a_swap_config_cannot_run(change, reason):
    with pytest.raises(KernelError, match="gemm: ") as err:
        FAM.resolve((3152, 3072, 768), "float16", {**SWAP, **change}, SM90)
    assert reason in str(err.value) and "\n" not in str(err.value)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("direct", [0, 1])
def test_swap_ab_source_compiles_for_sm90a(tmp_path, direct):
    text = _ptx(tmp_path, _lower((1000, 1000, 3000), "float16", {**SWAP, "direct": direct}))
    # One 64x144 wgmma per 16-deep slice, as for 128 columns (152 lowered to 64x8 pieces).
    assert "wgmma.mma_async.sync.aligned.m64n144k16" in text


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_152_column_tile_lowers_to_64x8_wgmma_pieces(tmp_path):
    # Why widths off steps of 16 ran 3x slower on the H200 (ncu-width, 2026-12-02: 3.4x the
    # instructions): TileLang 0.1.15 issues a 128x152 tile as 64x8 wgmmas, 19 for each
    # of the 64x144 kind it issues for 144 columns. The family refuses such widths; the
    # program is lowered here straight from gemm's schedule, past that check.
    from evaluator.kernels.gemm import programs as P

    cfg = {**G.TC_DEFAULTS, **T128, "block_N": 152}
    text = _ptx(tmp_path, C.lower_source(P.tensor_core_program((3152, 3072, 768), "float16", cfg, "none"), SM90))
    assert "m64n8k16" in text and "m64n152k16" not in text


# TileLang's own pipeline on y's transpose (experimental, not yet run on a GPU): two
# warpgroups share one 256-feature x 144-token tile, as cuBLAS's 256x144 at 3152x3072x768.
WAVE_SWAP = {
    "block_M": 256,
    "block_N": 144,
    "block_K": 64,
    "num_stages": 3,
    "threads": 256,
    "policy": "fullrow",
    "swap_ab": 1,
}


@pytest.mark.slow
def test_the_wave_schedule_swaps_too_and_stays_out_of_the_space():
    src = _lower((3152, 3072, 768), "float16", WAVE_SWAP)
    rows = re.findall(r"Bias\[([^\]]*)\]", src)
    assert "linear_tc_swap" in src and rows and all("& 31) >> 2)" in r for r in rows)
    assert FAM.reject_reason((3152, 3072, 768), "float16", WAVE_SWAP, H200) is None
    for shape in ((3152, 3072, 768), (3152, 768, 768), (2048, 768, 3072)):
        assert not any(c["swap_ab"] and not c["pingpong"] for c in FAM.search_space(shape, "float16", H200))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_wave_swap_source_compiles_to_64x144_wgmmas(tmp_path):
    text = _ptx(tmp_path, _lower((1000, 1000, 3000), "float16", WAVE_SWAP))
    assert "wgmma.mma_async.sync.aligned.m64n144k16" in text and "m64n8k16" not in text
