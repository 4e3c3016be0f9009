"""Every kernel family's GPU schedule against PyTorch on the GPU: several seeds, fp16 and
bf16, the model-like standard shapes and shapes with awkward tails; the tuner on every
primary family; split-K and the fused epilogues on shapes no tile divides.

Compiling dominates (nvcc takes 10-30 s per kernel), so a fixture compiles everything
the correctness tests need in parallel first; the tests then hit the in-process cache."""

import os
from concurrent.futures import ThreadPoolExecutor

import torch

import pytest

from evaluator import kernels
from evaluator.tuning import search as tuning, verify

FAMILIES = sorted(kernels.REGISTRY)
# Families profiling maps aten ops to; the fused variants share their tuner paths.
PRIMARY = sorted(n for n, f in kernels.REGISTRY.items() if f.aten_ops)
DTYPES = ("float16", "bfloat16")


def _first(name, dtype, hw):
    fam = kernels.get(name)
    shape = tuple(fam.standard_shapes("cuda")[0])
    return fam, shape, fam.search_space(shape, dtype, hw)[0]


@pytest.fixture(scope="module")
def precompiled(hw, request):
    # Only the families whose correctness tests this run selected (-k attention compiled
    # all 13 families' kernels in every xdist worker first, and ran past its time limit
    # on the H200).
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Each xdist worker sees every selected item, not the ones it will run: compiling
        # them all up front in every worker spent a whole 220 s call on 12 workers
        # compiling the same 96 kernels. Under xdist each test compiles its own.
        return True
    selected = {
        item.callspec.params["name"]
        for item in request.session.items
        if getattr(item, "originalname", "") == "test_family_correct_on_gpu"
    }
    jobs = []
    for name in (n for n in FAMILIES if n in selected):
        for dtype in DTYPES:
            fam, shape, cfg = _first(name, dtype, hw)
            jobs += [(fam, shape, dtype, cfg), (fam, tuple(fam.awkward_shape(shape)), dtype, cfg)]

    def build(job):
        fam, shape, dtype, cfg = job
        try:
            fam.build(shape, dtype, cfg, hw.target)
        except Exception:
            pass  # the test that needs it compiles again and reports the error

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(build, jobs))
    return True


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", FAMILIES)
def test_family_correct_on_gpu(name, dtype, hw, precompiled):
    fam, shape, config = _first(name, dtype, hw)
    res = verify.verify(fam, shape, dtype, config, hw.target, "cuda", seeds=(0, 1, 2))
    assert res.passed, [c for c in res.cases if not c.passed]


@pytest.mark.parametrize("name", PRIMARY)
def test_every_candidate_is_correct_or_recorded(name, hw):
    fam = kernels.get(name)
    shape = tuple(fam.standard_shapes("cuda")[0])
    tk, kernel = tuning.tune(fam, shape, "float16", hw, budget_s=15, fine_rounds=1)
    assert kernel is not None and tk.config is not None
    assert not [c for c in tk.candidates if c.status == "wrong"], tk.candidates


def test_pipeline_on_gpu(tmp_path):
    from evaluator import config as config
    from evaluator import pipeline

    cfg = config.build(model="bert-tiny", device="cuda", reports=tmp_path, pdf=False, soak_seconds=2, budget=30)
    out = pipeline.run(cfg)
    r = out.result
    assert r.verdict is not None and r.op_bench and all(v.passed for v in r.verify)
    assert r.environment.hardware.device == "cuda" and r.environment.hardware.driver


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gemm_split_k_and_awkward_tails_on_gpu(dtype, hw):
    # bert-base's FFN down-projection leaves most SMs idle at 128x128 tiles: the split-K
    # configs must be offered there, and stay correct when no dimension fits a tile.
    fam = kernels.get("gemm")
    split = [c for c in fam.search_space((1024, 768, 3072), dtype, hw) if c["split_k"] > 1]
    assert split
    for cfg in split[:2]:
        res = verify.verify(fam, (1000, 770, 3001), dtype, cfg, hw.target, "cuda", seeds=(0, 1))
        assert res.passed, [c for c in res.cases if not c.passed]


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_flat_configs_on_gpu(dtype, hw):
    # Rows of 197 halves (ViT attention) are not 16-byte multiples: the flat configs,
    # offered first there, copy each block's rows as one span; 1001 rows (and verify's
    # awkward 1009 x 204) end in a partial block.
    fam = kernels.get("softmax")
    flat = [c for c in fam.search_space((37824, 197), dtype, hw) if c.get("flat")]
    assert flat
    for cfg in flat:
        res = verify.verify(fam, (1001, 197), dtype, cfg, hw.target, "cuda", seeds=(0, 1))
        assert res.passed, [c for c in res.cases if not c.passed]


@pytest.mark.parametrize("name", ["gemm_relu", "gemm_gelu", "gemm_silu", "gemm_mul"])
def test_fused_epilogues_on_awkward_shapes_on_gpu(name, hw):
    fam = kernels.get(name)
    for cfg in fam.search_space((1000, 770, 3001), "float16", hw)[:2]:
        res = verify.verify(fam, (1000, 770, 3001), "float16", cfg, hw.target, "cuda", seeds=(0, 1))
        assert res.passed, [c for c in res.cases if not c.passed]


@pytest.mark.parametrize(
    "shape",
    [
        (2, 4, 512, 512, 128, 0),
        (2, 4, 333, 517, 64, 1),
        (2, 4, 517, 333, 128, 1),
        (4, 4, 197, 197, 64, 0),
        (2, 12, 300, 300, 64, 1, 36, 36, 36),
        (1, 8, 512, 512, 128, 1, 8, 8, 8),
        (2, 4, 1000, 1000, 64, 0),
        (1, 8, 512, 512, 64, 1, 8, 2, 2, 2),
    ],
    ids=["d128", "causal-Sq<Skv", "causal-Sq>Skv", "one-key-block", "gpt2-views", "llama-views", "tails", "gqa-views"],
)
def test_attention_pingpong_on_gpu(shape, hw):
    # FlashAttention-3's forward (`pingpong`): a TMA
    # producer and two consumer warpgroups, on tails in Sq and Skv, causal both ways, one
    # key block, and the transposed views models pass; 2 and 3 stages, both dtypes.
    fam = kernels.get("attention")
    base = {"block_M": 128, "block_N": 128, "num_stages": 2, "threads": 256, "pingpong": True}
    for cfg in (base, {**base, "num_stages": 3}, {**base, "block_N": 64}):
        for dtype in ("float16", "bfloat16"):
            if fam.reject_reason(shape, dtype, cfg, hw):
                continue
            res = verify.verify(fam, shape, dtype, cfg, hw.target, "cuda", seeds=(0, 1))
            assert res.passed, (cfg, dtype, [c for c in res.cases if not c.passed])


@pytest.mark.parametrize(
    "shape",
    [(2, 32, 512, 512, 64, 1, 32, 4, 4, 4), (2, 8, 333, 517, 128, 1, 0, 0, 0, 2), (4, 8, 197, 197, 64, 0, 0, 0, 0, 1)],
    ids=["tinyllama-views", "tails", "mqa"],
)
def test_attention_grouped_query_heads_on_gpu(shape, hw):
    # Grouped-query attention (SDPA's enable_gqa) on the family's first configs and the
    # overlap schedule: each query head reads its group's key/value head.
    fam = kernels.get("attention")
    space = fam.search_space(shape, "float16", hw)
    for cfg in space[:3] + [c for c in space if c.get("overlap")][:1]:
        res = verify.verify(fam, shape, "float16", cfg, hw.target, "cuda", seeds=(0, 1))
        assert res.passed, (cfg, [c for c in res.cases if not c.passed])


@pytest.mark.parametrize(
    "shape",
    [(1000, 1000, 3000), (3000, 1000, 1000), (2048, 5632, 2048), (16, 1000, 2065)],
    ids=["tails", "tokens-over-features", "llama-up", "decode"],
)
def test_gated_product_on_every_whole_k_program_on_gpu(shape, hw):
    # gemm_mul's G read in each epilogue: ping-pong (y's tiles, and its transpose's where
    # M > N), the wave tiles, persistent, and 16-row mma tiles, on tails TMA can address.
    fam = kernels.get("gemm_mul")
    space = fam.search_space(shape, "float16", hw)
    picks = {}
    for c in space:
        picks.setdefault((c["pingpong"], c["swap_ab"], bool(c["persistent"]), c["block_M"] < 64), c)
    assert space and all(c["split_k"] == 1 and not c["stream_k"] for c in space)
    for cfg in picks.values():
        for dtype in ("float16", "bfloat16"):
            res = verify.verify(fam, shape, dtype, cfg, hw.target, "cuda", seeds=(0, 1))
            assert res.passed, (cfg, [c for c in res.cases if not c.passed])


@pytest.mark.parametrize("shape", [(1, 4096, 11008), (16, 1000, 2065), (37, 770, 3001)])
def test_gemm_small_m_tiles_on_gpu(shape, hw):
    # Decode-like shapes run 16-row tiles on mma; tails in every dimension.
    fam = kernels.get("gemm")
    small = [c for c in fam.search_space((16, 4096, 4096), "float16", hw) if c["block_M"] < 64][:3]
    assert small
    for cfg in small:
        res = verify.verify(fam, shape, "float16", cfg, hw.target, "cuda", seeds=(0, 1))
        assert res.passed, [c for c in res.cases if not c.passed]


@pytest.mark.parametrize(
    "shape",
    [
        (2, 4, 512, 512, 64, 1),
        (2, 4, 333, 517, 64, 1),
        (2, 4, 517, 333, 128, 1),
        (4, 4, 197, 197, 64, 0),
        (4, 4, 128, 128, 64, 0),
    ],
    ids=["causal", "causal-Sq<Skv", "causal-Sq>Skv", "kv-tail", "one-key-block"],
)
def test_attention_masked_blocks_and_overlap_on_gpu(shape, hw):
    # Only key blocks on the diagonal or at the Skv tail build the mask (the first
    # config and the large-shape one), the overlap configs (async WGMMA, hand-ordered
    # pipeline), and at s197 every key in one 208-wide block.
    fam = kernels.get("attention")
    space = fam.search_space(shape, "float16", hw)
    big = {"block_M": 128, "block_N": 128, "num_stages": 1, "threads": 256}
    rest = [c for c in space if c.get("overlap") or c.get("pingpong") or c["block_N"] % 32]
    for cfg in [space[0]] + ([big] if big != space[0] else []) + rest:
        res = verify.verify(fam, shape, "float16", cfg, hw.target, "cuda", seeds=(0, 1))
        assert res.passed, (cfg, [c for c in res.cases if not c.passed])


@pytest.mark.parametrize(
    "shape",
    [(2, 4, 197, 197, 64, 0, 12, 12, 12), (2, 4, 333, 517, 64, 1, 4, 4, 4), (1, 8, 512, 512, 128, 1, 0, 0, 8)],
    ids=["timm-packed", "hf-causal", "llama-v"],
)
@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_reads_strided_views_in_place_on_gpu(shape, dtype, hw):
    # q, k, v as the transposed views models hand SDPA: TMA descriptors carry the
    # strides, and a strided q's output comes back in [B, Sq, H, D] memory.
    fam = kernels.get("attention")
    space = fam.search_space(shape, dtype, hw)
    for cfg in [space[0]] + [c for c in space if c.get("overlap")][:1]:
        res = verify.verify(fam, shape, dtype, cfg, hw.target, "cuda", seeds=(0, 1))
        assert res.passed, (cfg, [c for c in res.cases if not c.passed])
    q, k, v = fam.make_inputs(shape, dtype, "cuda", 0)
    out = fam.build(shape, dtype, space[0], hw.target)(q, k, v)
    assert out.transpose(1, 2).is_contiguous() == bool(shape[6])


def test_fused_split_k_resets_its_counters_across_calls_and_graph_replays(hw):
    # The last block of a tile resets the tile's counter: calls back to back, and many
    # calls inside one CUDA graph replayed twice, must all give the same right answer.
    fam = kernels.get("gemm_gelu")
    shape = (1000, 770, 3001)
    cfg = {"block_M": 64, "block_N": 128, "block_K": 64, "num_stages": 4, "split_k": 3, "splitk_fused": True}
    kernel = fam.build(shape, "float16", cfg, hw.target)
    x, w, b = fam.make_inputs(shape, "float16", "cuda", 0)
    ref = fam.reference(x, w, b)
    atol, rtol = fam.tolerance("float16", shape)
    for _ in range(3):
        torch.testing.assert_close(kernel(x, w, b), ref, atol=atol, rtol=rtol)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        kernel(x, w, b)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = [kernel(x, w, b) for _ in range(5)]
    for _ in range(2):
        graph.replay()
        torch.cuda.synchronize()
        for out in outs:
            torch.testing.assert_close(out, ref, atol=atol, rtol=rtol)


@pytest.mark.parametrize(
    "shape",
    [
        (32, 56, 56, 64, 256, 1, 1, 1, 0, 1),
        (4, 14, 14, 1024, 256, 1, 1, 1, 0, 1),
        (4, 56, 56, 256, 512, 1, 1, 2, 0, 1),
        (4, 56, 56, 60, 60, 3, 3, 1, 1, 1),
        (4, 56, 56, 64, 256, 1, 1, 1, 0, 0),
    ],
    ids=["1x1-nchw", "1x1-196px-nchw", "1x1s2-nchw", "3x3-60ch-nchw", "1x1-channels-last"],
)
def test_conv2d_layouts_on_gpu(shape, hw):
    # The NCHW schedule's direct 1x1 path (pixel rows of 196 halves are 8-byte aligned
    # only), its gather for strided and 3x3 filters, and the channels_last schedule;
    # verify adds an awkward shape (odd H and W, C and K off every tile) in the same layout.
    fam = kernels.get("conv2d")
    for cfg in fam.search_space(shape, "float16", hw)[:3]:
        res = verify.verify(fam, shape, "float16", cfg, hw.target, "cuda", seeds=(0, 1))
        assert res.passed, [c for c in res.cases if not c.passed]


@pytest.mark.parametrize("channels_last", [False, True])
def test_conv2d_routes_each_layout_to_its_kernel_on_gpu(channels_last, hw):
    from tests.routing import count, route_model

    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 7, stride=2, padding=3),
        torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 1, bias=False),
        torch.nn.Conv2d(64, 64, 3, padding=1),
    )
    model = model.half().cuda().eval()
    x = torch.randn(4, 3, 64, 64, device="cuda", dtype=torch.float16)
    if channels_last:
        model, x = model.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
    router, got, expected = route_model(["conv2d"], model, (x,), dtype="float16", target=hw.target)
    torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)
    assert count(router, "conv2d") == (3, 0)
    assert {c.shape.split("x")[-1] for c in router.counts() if c.tilelang} == {"0" if channels_last else "1"}
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    assert got.is_contiguous(memory_format=fmt)


@pytest.mark.parametrize("shape", [(3152, 3072, 768), (1000, 770, 3001), (64, 4096, 512)])
def test_gemm_persistent_tiles_on_gpu(shape, hw):
    # One block per SM walking the output tiles; verify adds an awkward shape, and
    # (64, 4096, 512) has fewer tiles than blocks (blocks with no tile do nothing). The
    # ping-pong configs, persistent too, have their own file (test_gemm_pingpong_gpu.py):
    # with them this test compiled 14 kernels at 3152x3072x768 and never finished inside
    # a session's call (sessions 9 and 10).
    fam = kernels.get("gemm_gelu")
    for cfg in [c for c in fam.search_space(shape, "float16", hw) if c["persistent"] and not c["pingpong"]]:
        res = verify.verify(fam, shape, "float16", cfg, hw.target, "cuda", seeds=(0, 1))
        assert res.passed, [c for c in res.cases if not c.passed]
