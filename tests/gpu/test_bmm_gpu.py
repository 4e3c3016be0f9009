"""The bmm family on CUDA against PyTorch: every candidate of its search space at BERT-base's
eager attention shapes (q, v and k^T read as the views transformers hands over) and the
first four at a long sequence, with verify's seeds and tails; the fp32 SIMT schedule; baddbmm's addends
with alpha and beta; and eager BERT in fp16 with both products routed to TileLang.

In: shapes, configs and a tiny model on the GPU. Out: pass/fail (skipped without CUDA)."""

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from evaluator import kernels
from evaluator.tuning import verify

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from routing import count, route_model  # noqa: E402

FAM = kernels.get("bmm")
BERT = [(96, 128, 128, 64, 0, 1, 12, 12, 12), (96, 128, 64, 128, 0, 0, 12, 0, 12)]
LONG = (32, 1024, 1024, 128, 0, 1)


def _candidates(shape, dtype, hw):
    """The whole space at BERT's shapes; the first four at the long one (each is two nvcc builds)."""
    space = FAM.search_space(shape, dtype, hw)
    return space if shape in BERT else space[:4]


@pytest.fixture(scope="module")
def precompiled(hw):
    # nvcc runs as a subprocess: builds in threads overlap, and the tests then hit the cache.
    jobs = [(s, d, c) for s in BERT + [LONG] for d in ("float16", "bfloat16") for c in _candidates(s, d, hw)]
    jobs += [(FAM.awkward_shape(s), d, c) for s, d, c in jobs]

    def build(job):
        try:
            FAM.build(job[0], job[1], job[2], hw.target)
        except Exception:
            pass  # the test that needs it builds again and reports the error

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(build, jobs))
    return True


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", BERT + [LONG], ids=["bert-scores", "bert-context", "long"])
def test_every_candidate_is_correct_on_gpu(shape, dtype, hw, precompiled):
    space = _candidates(shape, dtype, hw)
    assert space
    for cfg in space:
        res = verify.verify(FAM, shape, dtype, cfg, hw.target, "cuda", seeds=(0, 1))
        assert res.passed, (cfg, [c for c in res.cases if not c.passed])


@pytest.mark.parametrize(
    "shape",
    [
        (6, 333, 517, 71, 1, 1, 3, 5, 4),
        (5, 300, 200, 96, 0, 1, 0, 0, 0, 0, 1),
        (24, 128, 128, 64, 0, 1, 0, 0, 0, 2),
        (8, 200, 136, 72, 1, 0, 0, 0, 0, 1),
    ],
    ids=["transposed-pitched-tails", "shared-a", "alibi-row", "addend"],
)
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_layouts_and_addends_on_gpu(shape, dtype, hw):
    cfg = FAM.search_space(shape, dtype, hw)[0]
    res = verify.verify(FAM, shape, dtype, cfg, hw.target, "cuda", seeds=(0, 1))
    assert res.passed, (cfg, [c for c in res.cases if not c.passed])
    if FAM.check(shape)[9:10] == (1,):  # baddbmm's alpha and beta, built as kernel parameters
        kernel = FAM.build(shape, dtype, {**cfg, "alpha": 0.125, "beta": -0.5}, hw.target)
        a, b, add = FAM.make_inputs(shape, dtype, "cuda", 3)
        ref = torch.baddbmm(add, a, b, alpha=0.125, beta=-0.5)
        atol, rtol = FAM.tolerance(dtype, shape)
        torch.testing.assert_close(kernel(a, b, add), ref, atol=atol, rtol=rtol)


def test_bert_eager_fp16_routes_both_products_on_gpu(hw):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=1000, hidden_size=256, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512
    )
    cfg._attn_implementation = "eager"
    model = transformers.BertModel(cfg).half().cuda()
    ids = torch.randint(0, 1000, (4, 128), device="cuda")
    router, got, expected = route_model(["gemm", "bmm"], model, (ids,), dtype="float16", target=hw.target)
    assert count(router, "bmm") == (4, 0)
    assert not any(c.notes for c in router.counts() if c.family == "bmm")
    torch.testing.assert_close(got.last_hidden_state, expected.last_hidden_state, atol=2e-2, rtol=2e-2)
