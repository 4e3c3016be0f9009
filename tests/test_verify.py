"""Verification against PyTorch: the model shape on every seed plus an awkward shape, and a
config that cannot work fails with a reason instead of raising.

In: real families, shapes and configs (C backend). Out: pass/fail.
"""

from evaluator.device import hardware
from evaluator import kernels
from evaluator.tuning import verify


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
    res = verify.verify(
        fam, (33, 17, 9), "float32", {"block_M": -1, "block_N": 8, "block_K": 8}, "c", "cpu", seeds=(0,)
    )
    assert not res.passed and all(c.reason for c in res.cases)


class _RowAlignedGemm(type(kernels.get("gemm"))):
    """The real gemm family with a schedule that refuses rows off multiples of 8, as the
    TMA-loading pingpong and cluster programs do on CUDA."""

    def config_error(self, shape, dtype, cfg, target):
        return "rows must be multiples of 8" if shape[2] % 8 else super().config_error(shape, dtype, cfg, target)


def test_a_config_that_needs_aligned_rows_is_checked_on_aligned_tails():
    fam, cfg = _RowAlignedGemm(), {"block_M": 32, "block_N": 32, "block_K": 32}
    assert fam.awkward_shapes((64, 64, 64)) == [(71, 71, 71), (72, 72, 72), (57, 57, 57), (56, 56, 56)]
    res = verify.verify(fam, (64, 64, 64), "float32", cfg, "c", "cpu", seeds=(0,))
    assert res.passed and res.cases[-1].shape == (72, 72, 72)
    # A config the first awkward shape suits is checked there, unaligned.
    res = verify.verify(kernels.get("gemm"), (64, 64, 64), "float32", cfg, "c", "cpu", seeds=(0,))
    assert res.passed and res.cases[-1].shape == (71, 71, 71)


def test_a_config_no_awkward_shape_suits_fails_on_the_first_with_its_reason():
    class Never(_RowAlignedGemm):
        def config_error(self, shape, dtype, cfg, target):
            return "only the model's own shape" if shape != (64, 64, 64) else None

    res = verify.verify(
        Never(), (64, 64, 64), "float32", {"block_M": 32, "block_N": 32, "block_K": 32}, "c", "cpu", seeds=(0,)
    )
    assert res.cases[0].passed and not res.cases[-1].passed
    assert res.cases[-1].shape == (71, 71, 71) and "only the model's own shape" in res.cases[-1].reason


def test_a_schedule_that_bounds_a_dim_is_checked_on_tails_below_it():
    """conv2d's stream keeps all C input channels in one tile (C <= 128): at ResNet-50's
    32x28x28x128x512 1x1 the tails above C cannot build, so verify checks the config
    below them (121 channels), not on a shape it was never offered for."""
    from evaluator.device import targets
    from evaluator.kernels.conv2d import programs as P

    fam, hw = kernels.get("conv2d"), targets.TARGETS["h100"].hardware()
    shape = fam.check((32, 28, 28, 128, 512, 1, 1, 1, 0, 1))
    stream = next(c for c in fam.search_space(shape, "float16", hw) if c.get("stream"))
    assert P.stream_problem(fam.awkward_shapes(shape)[0]) is not None  # C 135: above the bound
    awk = verify.awkward_for(fam, shape, "float16", stream, hw.target)
    assert P.stream_problem(awk) is None and awk[3] < 128 and all(d % 16 for d in awk[1:5]), awk
    fam.resolve(awk, "float16", stream, hw.target)  # builds there
