"""Verification against PyTorch: the model shape on every seed plus an awkward shape, and a
config that cannot work fails with a reason instead of raising.

In: real families, shapes and configs (C backend). Out: pass/fail.
"""
from evaluator import hardware, kernels, verify


def test_verify_covers_seeds_and_an_awkward_shape():
    fam = kernels.get("layernorm")
    hw = hardware.detect("cpu")
    config = fam.search_space((64, 128), "float32", hw)[0]
    res = verify.verify(fam, (64, 128), "float32", config, hw.target, "cpu", seeds=(0, 1, 2))
    assert res.passed
    shapes = [c.shape for c in res.cases]
    assert shapes[:3] == [(64, 128)] * 3 and [c.seed for c in res.cases[:3]] == [0, 1, 2]
    awkward = shapes[3]
    assert awkward != (64, 128) and all(d % 16 for d in awkward)
    assert all(c.max_abs_err is not None and c.max_abs_err <= c.atol + 1 for c in res.cases)


def test_a_wrong_config_fails_verification_with_a_reason():
    fam = kernels.get("gemm")
    res = verify.verify(fam, (33, 17, 9), "float32", {"block_M": -1, "block_N": 8, "block_K": 8}, "c", "cpu",
                        seeds=(0,))
    assert not res.passed and all(c.reason for c in res.cases)
