"""Attention's `pingpong` config on CPU: the program lowers for sm_90a to a TMA producer
warpgroup and two consumer warpgroups that take turns on the tensor cores (each issues
block t's QK^T and block t-1's PV, waits for QK^T alone and runs the softmax under PV),
its shared buffers do not alias, ptxas keeps its wgmmas asynchronous without spills, its
barrier protocol is safe under every interleaving a random scheduler finds (and
deadlocks with one K/V stage, which is why the config needs two), and the family's
checks and search space place it.

In: shapes and configs. Out: pass/fail. Nothing runs a kernel (tests/gpu does).
"""

from __future__ import annotations

import random
import re
import shutil

import pytest

from evaluator.kernels.attention import pingpong as PPA
from evaluator.kernels import common as C
from evaluator.kernels import attention as A
from tests.barriers import Barrier, interleave
from tests.hardware import A100, H200

FAM = A.FAMILY
SM90 = "cuda -arch=sm_90a"
PING = {"block_M": 128, "block_N": 128, "num_stages": 2, "threads": 256, "pingpong": True}
SHAPES = [
    (4, 32, 4096, 4096, 128, 0),
    (4, 32, 4096, 4096, 64, 1),
    (4, 12, 512, 512, 64, 1, 36, 36, 36),
    (2, 3, 1000, 777, 128, 1),
    (8, 12, 128, 128, 64, 0),
]
IDS = ["d128", "d64-causal", "gpt2-views-causal", "tails-causal", "one-key-block"]


def _lower(shape, cfg=PING, dtype="float16"):
    return C.lower_source(FAM.program(shape, dtype, cfg, SM90), SM90)


def _consumer(src, me):
    """The lowered source of consumer warpgroup `me`'s branch."""
    start = src.index("if (((int)threadIdx.x) < 128) {")
    second = src.index("warpgroup_reg_alloc", src.index("warpgroup_reg_alloc") + 1)
    return src[start:second] if me == 0 else src[second:]


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_pingpong_lowers_to_a_producer_and_two_consumers_that_take_turns(shape):
    src = _lower(shape)
    assert "__launch_bounds__(384, 1)" in src
    assert src.count(f"warpgroup_reg_alloc<{PPA.CONSUMER_REGS}>") == 2
    assert src.count(f"warpgroup_reg_dealloc<{PPA.PRODUCER_REGS}>") == 1
    producer = src[
        src.index(f"warpgroup_reg_dealloc<{PPA.PRODUCER_REGS}>") : src.index("if (((int)threadIdx.x) < 128)")
    ]
    # Q once and each key block's K and V, by TMA on the stage's `full` barrier, after
    # both consumers released that stage; no consumer loads anything.
    assert producer.count("tma_load(Q_desc") == 2 and "tma_load(K_desc, full[" in producer
    assert "tma_load(V_desc, full[" in producer and "empty[" in producer
    for me in (0, 1):
        mine = _consumer(src, me)
        assert "tma_load" not in mine and "cp_async" not in mine
        assert f"order[{1 - me}].arrive()" in mine and "empty[" in mine and "tma_store" in mine
        # one key block: consumer 0's only round waits for nothing
        assert (f"order[{me}].wait(" in mine) == (me == 1 or shape[3] > 128)
        if shape[3] > 128:  # a loop over key blocks: QK^T of t, PV of t-1, wait for QK^T, softmax, wait for PV
            loop = mine[mine.index("for (int t") :]
            seq = [m for m in re.findall(r"wgmma_ss<|wgmma_rs<|wait_wgmma<1>|exp2f\(|wait_wgmma<0>", loop)]
            steady = [s for i, s in enumerate(seq) if i == 0 or s != seq[i - 1]]
            assert steady[:5] == ["wgmma_ss<", "wgmma_rs<", "wait_wgmma<1>", "exp2f(", "wait_wgmma<0>"], steady
    # The two epilogues sync on named barriers of their own (one id shared by two
    # warpgroups of 128 would let one's threads complete the other's barrier).
    assert len(set(re.findall(r"__sync_thread_partial\((\d+), 128\)", src))) == 2
    assert "__syncthreads()" not in src[src.index("warpgroup_reg_dealloc") :]
    # consumer 0 never waits before its first round; consumer 1 waits for consumer 0's
    first0, first1 = _consumer(src, 0), _consumer(src, 1)
    assert first0.find("order[0].wait(") == -1 or first0.index("order[0].wait(") > first0.index("wgmma_ss<")
    assert first1.index("order[1].wait(") < first1.index("wgmma_ss<")


@pytest.mark.slow
def test_pingpong_buffers_do_not_alias():
    # Everything lives through the whole kernel in one warp-specialized block: the ring,
    # and each consumer's Q tile (which carries its O out at the end), must be disjoint.
    src = _lower((4, 32, 4096, 4096, 128, 0))
    offsets = {
        name: int(off)
        for name, off in re.findall(r"void\* (\w+) = \(\(void\*\)\(\(char\*\)buf_dyn_shmem \+ (\d+)\)\)", src)
    }
    ring = 2 * 128 * 128 * 2
    assert sorted(offsets.values()) == [0, ring, 2 * ring, 2 * ring + 64 * 128 * 2], offsets
    assert PPA.smem_bytes(PING, 128, 2) == 2 * ring + 128 * 128 * 2 + 1024


def test_pingpong_masks_only_its_own_rows_diagonal():
    # Each consumer's 64 rows have their own diagonal: its unmasked key blocks end there,
    # while both walk the key blocks the block's 128 rows need.
    assert A.P.kv_blocks(3, 128, 128, 4096, True)[0] == 4
    assert [A.P.kv_blocks(2 * 3 + me, 64, 128, 4096, True)[1] for me in (0, 1)] == [3, 3]
    assert [A.P.kv_blocks(2 * 3 + me, 64, 64, 4096, True)[1] for me in (0, 1)] == [6, 7]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize(
    "shape,block_N",
    [
        ((4, 32, 4096, 4096, 128, 0), 128),
        ((4, 32, 4096, 4096, 128, 0), 176),
        ((4, 32, 4096, 4096, 64, 1), 128),
        ((4, 12, 512, 512, 64, 1), 128),
    ],
)
def test_pingpong_wgmma_stays_asynchronous_without_spills(shape, block_N, tmp_path):
    from tests.kernels.test_attention import _ptxas_log

    log = _ptxas_log(tmp_path, shape, {**PING, "block_N": block_N})
    assert "C751" not in log and "serialized" not in log, log[-2000:]
    assert " 0 bytes spill stores" in log, log[-2000:]


# ---------------------------------------------------------------- checks and the space


def test_config_checks_say_what_pingpong_needs():
    shape = (4, 32, 4096, 4096, 128, 0)
    assert A.GPU_DEFAULTS["pingpong"] is False
    assert FAM.reject_reason(shape, "float16", PING, H200) is None
    for bad, says in (
        ({"block_M": 64, "threads": 128}, "block_M must be 128"),
        ({"num_stages": 1}, "at least 2"),
        ({"overlap": True}, "not with overlap"),
        ({"block_N": 208}, "would spill"),
    ):
        assert says in FAM.reject_reason(shape, "float16", {**PING, **bad}, H200), bad
    assert "sm_90" in FAM.reject_reason(shape, "float16", PING, A100)


@pytest.mark.parametrize("shape", [(4, 32, 4096, 4096, 128, 0), (4, 32, 4096, 4096, 64, 1), (8, 12, 128, 128, 64, 0)])
def test_pingpong_is_searched_on_hopper_behind_the_measured_first_config(shape):
    space = FAM.search_space(shape, "float16", H200)
    ping = [c for c in space if c.get("pingpong")]
    assert ping and not space[0].get("pingpong") and space.index(ping[0]) <= 2
    assert not any(c.get("pingpong") for c in FAM.search_space(shape, "float16", A100))


# ---------------------------------------------------------------- the barrier protocol


def _simulate(blocks, stages, rng):
    """The program's protocol (its parity functions; one arrival per warpgroup) under a
    random interleaving: None, "deadlock", or the first stage read before it holds its key
    block or refilled while a consumer still reads it."""
    full = [Barrier(1) for _ in range(stages)]
    empty = [Barrier(PPA.CONSUMERS) for _ in range(stages)]
    order = [Barrier(1) for _ in range(PPA.CONSUMERS)]
    q_full = Barrier(1)
    holds = [None] * stages
    reading = [set() for _ in range(stages)]

    def producer():
        q_full.arrive()
        for kb in range(blocks):
            s = kb % stages
            yield lambda: empty[s].passes(PPA.empty_parity(kb, stages))
            if reading[s]:
                yield f"producer refilled stage {s} with block {kb} while {sorted(reading[s])} read it"
            holds[s] = kb
            full[s].arrive()

    def consumer(me):
        yield lambda: q_full.passes(0)

        def take(kb):
            s = kb % stages
            yield lambda: full[s].passes(PPA.full_parity(kb, stages))
            if holds[s] != kb:
                yield f"consumer {me} read block {kb} from stage {s}, which holds block {holds[s]}"
            if PPA.order_waits(me, kb):
                yield lambda: order[me].passes(PPA.order_parity(me, kb))
            reading[s].add((me, kb))
            order[1 - me].arrive()
            yield lambda: True  # the gemms run while the others move

        def release(kb):
            reading[kb % stages].discard((me, kb))
            empty[kb % stages].arrive()

        yield from take(0)
        for kb in range(1, blocks):
            yield from take(kb)
            release(kb - 1)
        release(blocks - 1)

    return interleave([producer(), consumer(0), consumer(1)], rng)


@pytest.mark.parametrize("blocks,stages", [(32, 2), (7, 3), (1, 2), (2, 2), (5, 4), (3, 2)])
def test_barrier_protocol_holds_under_random_interleavings(blocks, stages):
    rng = random.Random(0)
    for _ in range(300):
        assert _simulate(blocks, stages, rng) is None


def test_one_stage_deadlocks_which_is_why_pingpong_needs_two():
    # A consumer holds block t-1's stage for its PV until block t's scores are issued.
    assert _simulate(3, 1, random.Random(0)) == "deadlock"
    assert "at least 2" in FAM.reject_reason((4, 32, 4096, 4096, 128, 0), "float16", {**PING, "num_stages": 1}, H200)
