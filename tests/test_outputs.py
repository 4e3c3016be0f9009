"""Outputs of any structure, compared relative to their magnitude."""
from evaluator import outputs as bench


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
    out = (BaseModelOutputWithPooling(last_hidden_state=noisy, pooler_output=noisy[:, 0]),
           {"o": Out(noisy, (noisy, 3))}, Cache(noisy))
    check = bench.compare_outputs(out, ref, "float32")
    assert check.ok and 0 < check.rel_l2 < 1e-4 and check.max_abs > 1e-4
    wrong = (BaseModelOutputWithPooling(last_hidden_state=x, pooler_output=x[:, 0] + 5), {"o": Out(x, (x, 3))},
             Cache(x))
    bad = bench.compare_outputs(wrong, ref, "float32")
    assert not bad.ok and "tolerance" in bad.reason
    assert not bench.compare_outputs((x,), (x, x), "float32").ok
    nan = x.clone()
    nan[0, 0] = float("nan")
    assert bench.compare_outputs(nan, x, "float32").reason == "NaN in the output"


def test_fp16_tolerance_scales_with_magnitude():
    import torch
    ref = torch.randn(64, 64, dtype=torch.float64) * 50
    out = ref + torch.randn_like(ref) * 0.05  # ~1e-3 relative: fine for fp16, not for fp32
    assert bench.compare_outputs(out, ref, "float16").ok
    assert not bench.compare_outputs(out, ref, "float32").ok
