"""End to end on models nobody here wrote: transformers' BERT (post-norm, eps 1e-12),
GPT-2 (Conv1D projections through torch.addmm, causal attention) and ViT (a strided
conv patch embedding, 17 tokens that fit no tile), and a torchvision-style ResNet on
NCHW input. Every chosen family must run in TileLang (calls > 0), outputs must match
within the dtype's relative tolerance, and a planned fallback is counted with its
reason. Then the failure paths: a crashing kernel, zero calls, and what the checklist
makes of them."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from evaluator.measuring import bench
from evaluator import checklist
from evaluator.routing import router as swap
from tests.fixtures import hf_models, tv_resnet
from tests.routing import count, route_model


def _zoo_llama():
    from evaluator.models import load_model

    m = load_model("llama-tiny", seq_len=16)
    return m.module, tuple(m.inputs)


CASES = [
    ("bert", lambda: hf_models.bert(), ["gemm", "attention", "layernorm"]),
    ("gpt2", lambda: hf_models.gpt2(), ["gemm", "attention", "layernorm"]),
    ("vit", lambda: hf_models.vit(), ["gemm", "attention", "layernorm", "conv2d"]),
    ("resnet", lambda: tv_resnet.resnet(), ["conv2d", "gemm"]),
    # Fused patterns held back and completed in third-party code: BERT's GELU and post-norm
    # LN(x + residual); ViT's pre-norm sums, fused and then read again as the residual
    # (computed late); llama's SiLU on the gate projection, with the up projection between.
    ("bert-fused", lambda: hf_models.bert(), ["gemm", "gemm_gelu", "layernorm", "layernorm_residual"]),
    ("vit-fused", lambda: hf_models.vit(), ["gemm", "gemm_gelu", "layernorm", "layernorm_residual"]),
    ("llama-fused", lambda: hf_models.llama(), ["gemm", "gemm_silu"]),
    # ...and SwiGLU's multiply, silu(gate(x)) * up(x), in the up projection's epilogue.
    ("llama-swiglu", lambda: hf_models.llama(), ["gemm", "gemm_silu", "gemm_mul"]),
    # The same pre-norm sums taken by the family that writes them out: none computed late.
    ("vit-prenorm", lambda: hf_models.vit(), ["gemm", "layernorm", "add_layernorm"]),
    ("gpt2-prenorm", lambda: hf_models.gpt2(), ["gemm", "layernorm", "add_layernorm"]),
    # The zoo's llama: nn.RMSNorm (F.rms_norm) after each residual. Transformers' LlamaRMSNorm
    # writes the norm out as pow/mean/rsqrt; found by what it computes (evaluator.routing.written),
    # each one reaches the router as one F.rms_norm call, after its residual add or alone.
    ("llama-prenorm", _zoo_llama, ["gemm", "rmsnorm", "add_rmsnorm"]),
    ("llama-hf-prenorm", lambda: hf_models.llama(), ["gemm", "rmsnorm", "add_rmsnorm"]),
    ("gemma-hf-prenorm", lambda: hf_models.gemma(), ["rmsnorm", "add_rmsnorm"]),  # 1 + weight
    # Their rotary embedding, q * cos + rotate_half(q) * sin for q and k: one function of the
    # modeling module's (apply_rotary_pos_emb), found by what it computes, one kernel a call.
    ("llama-hf-rope", lambda: hf_models.llama(), ["gemm", "rope", "rmsnorm", "add_rmsnorm"]),
    ("gemma-hf-rope", lambda: hf_models.gemma(), ["rope"]),
    # Grouped-query attention: 4 query heads read 2 key/value heads (SDPA's enable_gqa).
    ("llama-gqa", lambda: hf_models.llama_gqa(), ["gemm", "attention", "rope"]),
    # GPT-2's gelu_new is eight elementwise calls on the c_fc result: held as a chain,
    # recognised as the tanh GELU and run in c_fc's epilogue.
    ("gpt2-fused", lambda: hf_models.gpt2(), ["gemm", "gemm_gelu_tanh"]),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, make, families", CASES, ids=[c[0] for c in CASES])
def test_every_chosen_family_runs_in_tilelang_and_outputs_match(name, make, families):
    model, inputs = make()
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    router, got, expected = route_model(families, model, inputs)
    check = bench.compare_outputs(got, expected, "float32")
    assert check.ok, check.reason
    for fam in families:
        ran, _ = count(router, fam)
        assert ran > 0, f"{name}: no {fam} call ran in TileLang: {router.counts()}"
    if name == "vit-fused":  # pre-norm: each fused sum was read again and computed then
        assert router.reused and set(f for f, _ in router.reused) == {"layernorm_residual"}, router.reused
    if name.endswith("-prenorm"):
        assert not router.reused, router.reused
    if name == "llama-gqa":  # every layer's attention, on 2 key/value heads
        rows = [c for c in router.counts() if c.family == "attention"]
        assert [(c.tilelang, c.fallback) for c in rows] == [(2, {})] and rows[0].shape.endswith("x2"), rows
    if name == "llama-swiglu":  # every MLP: its gate in gemm_silu, its up projection and product in gemm_mul
        assert count(router, "gemm_silu") == count(router, "gemm_mul") == (2, 0) and not router.reused


@pytest.mark.slow
def test_a_planned_fallback_is_counted_with_its_reason():
    model, inputs = hf_models.gpt2()
    # Leave the FFN's down projection (K = 128) without a kernel: its calls must fall back, counted.
    router, got, expected = route_model(["gemm"], model, tuple(inputs), build=lambda f, s: s[2] != 128)
    assert bench.compare_outputs(got, expected, "float32").ok
    rows = [c for c in router.counts() if c.family == "gemm"]
    untuned = [c for c in rows if c.fallback.get("shape not tuned")]
    assert untuned and all(c.shape.endswith("x128") for c in untuned)
    assert sum(c.tilelang for c in rows) > 0


def _routed_e2e(model, inputs, families, kernel_wrap=None):
    """end_to_end on a tiny model, kernels built for every call it makes."""
    router, _, _ = route_model(families, model, tuple(inputs))
    if kernel_wrap is not None:
        for (f, s), e in router.table.entries().items():
            router.table.add(f, s, e.config, kernel_wrap(e.kernel))
    return bench.end_to_end(
        model.eval(),
        tuple(inputs),
        "cpu",
        2,
        router,
        dtype="float32",
        profiled_ms={},
        total_profiled_ms=1.0,
        op_ratios={},
        shares={},
        policy=bench.TimingPolicy(reps=3, max_seconds=0.5),
    )


@pytest.mark.slow
def test_end_to_end_counts_calls_and_compares_model_outputs():
    model, inputs = hf_models.bert()
    e2e = _routed_e2e(model, inputs, ["gemm", "layernorm"])
    assert e2e.outputs_match and e2e.tilelang_calls > 0 and e2e.fallback_calls == 0
    assert e2e.views and e2e.views[0].method == "perf_counter" and e2e.ratio is not None
    assert e2e.rel_l2_err is not None and e2e.rel_l2_err < 1e-4 and e2e.tolerance["rel_l2"] == 1e-4
    # Two families routed: the transformers model is also timed with each one alone.
    assert {r.family for r in e2e.in_model if r.alone is not None} == {"gemm", "layernorm"}


@pytest.mark.slow
def test_a_crashing_swap_in_is_a_failed_item_not_not_measured():
    def crash(kernel):
        def run(*args):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

        return run

    model, inputs = hf_models.bert()
    e2e = _routed_e2e(model, inputs, ["gemm"], kernel_wrap=crash)
    assert e2e.swapped is None and not e2e.outputs_match and "illegal memory access" in e2e.error
    from tests.samples import sample_result

    r = dataclasses.replace(sample_result(), e2e=e2e)
    assert checklist.METRICS["e2e.outputs_match"](r) == 0.0
    assert checklist.METRICS["e2e.speedup"](r) == 0.0


def test_zero_calls_in_tilelang_leave_the_e2e_items_unevaluated_and_the_verdict_inconclusive():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8)).eval()
    router = swap.Router(
        [__import__("evaluator.kernels", fromlist=["x"]).get("softmax")], swap.KernelTable("float32", "c")
    )
    e2e = bench.end_to_end(
        model,
        (torch.randn(2, 8),),
        "cpu",
        2,
        router,
        dtype="float32",
        profiled_ms={},
        total_profiled_ms=1.0,
        op_ratios={},
        shares={},
        policy=bench.TimingPolicy(reps=3, max_seconds=0.2),
    )
    assert e2e.tilelang_calls == 0 and not e2e.outputs_match and "compared with itself" in e2e.error
    assert "no call ran in TileLang" in e2e.flags
    from tests.samples import sample_result

    r = dataclasses.replace(sample_result(), e2e=e2e)
    # The model was compared with itself: no evidence about TileLang either way.
    assert checklist.METRICS["e2e.outputs_match"](r) is None and checklist.METRICS["e2e.speedup"](r) is None
    assert checklist.METRICS["e2e.coverage"](r) == 0.0
    verdict = checklist.evaluate(checklist.load(checklist.DEFAULT_CHECKLIST), r)
    assert verdict.decision == "INCONCLUSIVE" and "no call ran in TileLang" in verdict.inconclusive[0]
