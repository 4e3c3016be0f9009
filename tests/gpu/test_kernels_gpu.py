"""Every kernel family's GPU schedule against PyTorch on the GPU: several seeds, fp16 and
bf16, the model-like standard shapes and shapes with awkward tails."""
import pytest

from evaluator import hardware, kernels, tuning, verify

FAMILIES = sorted(kernels.REGISTRY)


@pytest.fixture(scope="module")
def hw():
    return hardware.detect("cuda")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", FAMILIES)
def test_family_correct_on_gpu(name, dtype, hw):
    fam = kernels.get(name)
    shapes = fam.standard_shapes("cuda")[:1]
    for shape in shapes:
        config = fam.search_space(tuple(shape), dtype, hw)[0]
        res = verify.verify(fam, tuple(shape), dtype, config, hw.target, "cuda", seeds=(0, 1, 2))
        assert res.passed, [c for c in res.cases if not c.passed]


@pytest.mark.parametrize("name", FAMILIES)
def test_every_candidate_is_correct_or_recorded(name, hw):
    fam = kernels.get(name)
    shape = tuple(fam.standard_shapes("cuda")[0])
    tk, kernel = tuning.tune(fam, shape, "float16", hw, budget_s=120)
    assert kernel is not None and tk.config is not None
    assert not [c for c in tk.candidates if c.status == "wrong"], tk.candidates


def test_pipeline_on_gpu(tmp_path):
    from evaluator import config, pipeline
    cfg = config.build(model="bert-tiny", device="cuda", reports=tmp_path, pdf=False, soak_seconds=2, budget=30)
    out = pipeline.run(cfg)
    r = out.result
    assert r.verdict is not None and r.op_bench and all(v.passed for v in r.verify)
    assert r.environment.hardware.device == "cuda" and r.environment.hardware.driver
