"""Outputs of any structure, compared relative to their magnitude."""

from evaluator.measuring import outputs as bench


def test_outputs_compare_through_model_output_dicts_dataclasses_and_caches():
    import dataclasses

    import torch
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    @dataclasses.dataclass
    class Out:
        logits: torch.Tensor
        extra: tuple

    class Cache:
        def __init__(self, k):
            self.k = k

    x = torch.randn(4, 8) * 100  # large magnitude: an absolute tolerance would fail it
    ref = (BaseModelOutputWithPooling(last_hidden_state=x, pooler_output=x[:, 0]), {"o": Out(x, (x, 3))}, Cache(x))
    noisy = x * (1 + 1e-5)
    out = (
        BaseModelOutputWithPooling(last_hidden_state=noisy, pooler_output=noisy[:, 0]),
        {"o": Out(noisy, (noisy, 3))},
        Cache(noisy),
    )
    check = bench.compare_outputs(out, ref, "float32")
    assert check.ok and 0 < check.rel_l2 < 1e-4 and check.max_abs > 1e-4
    wrong = (
        BaseModelOutputWithPooling(last_hidden_state=x, pooler_output=x[:, 0] + 5),
        {"o": Out(x, (x, 3))},
        Cache(x),
    )
    bad = bench.compare_outputs(wrong, ref, "float32")
    assert not bad.ok and "tolerance" in bad.reason
    assert not bench.compare_outputs((x,), (x, x), "float32").ok
    nan = x.clone()
    nan[0, 0] = float("nan")
    assert bench.compare_outputs(nan, x, "float32").reason == "swapped output has 1 NaN of 32 values"


def test_fp16_tolerance_scales_with_magnitude():
    import torch

    ref = torch.randn(64, 64, dtype=torch.float64) * 50
    out = ref + torch.randn_like(ref) * 0.05  # ~1e-3 relative: fine for fp16, not for fp32
    assert bench.compare_outputs(out, ref, "float16").ok
    assert not bench.compare_outputs(out, ref, "float32").ok


def test_nan_or_inf_on_either_side_fails_with_counts_per_side():
    import torch

    ref = torch.randn(96, 1024)
    out = ref.clone()
    out[:1] = float("nan")
    check = bench.compare_outputs(out, ref, "float32")
    assert not check.ok and check.reason == "swapped output has 1,024 NaN of 98,304 values"
    assert check.nonfinite == {"swapped NaN": 1024} and not check.reference_broken
    # NaN on both sides "matches" elementwise; it is still a failed check, the reference's first
    both = bench.compare_outputs(out, out.clone(), "float32")
    assert not both.ok and both.reference_broken
    assert both.reason.startswith("the reference itself has 1,024 NaN of 98,304 values")
    inf = ref.clone()
    inf[0, :3] = float("inf")
    assert bench.compare_outputs(ref, inf, "float32").reason == "the reference itself has 3 Inf of 98,304 values"


def test_a_reference_without_signal_is_compared_with_an_absolute_floor_and_flagged():
    import torch

    ref = torch.randn(8, 16) * 1e-24  # MobileNetV2 at a tiny width outputs values about this size
    near = bench.compare_outputs(ref * (1 + 1e-3), ref, "float32")
    assert near.ok and "carries no signal" in near.no_signal and "largest value" in near.no_signal
    far = bench.compare_outputs(torch.ones(8, 16), ref, "float32")
    assert not far.ok and "absolute floor" in far.reason
    constant = bench.compare_outputs(torch.full((8, 16), 0.5), torch.full((8, 16), 0.5), "float32")
    assert constant.ok and "every value the same" in constant.no_signal
    # one leaf with signal is enough: a constant mask beside real hidden states is fine
    assert not bench.compare_outputs((torch.ones(4), ref * 1e30), (torch.ones(4), ref * 1e30), "float32").no_signal
