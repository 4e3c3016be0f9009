"""Hot operators from torch.profiler on the zoo's models: calls attributed to the outermost
op we recognise, families and problem shapes from the kernel registry, explicit family
choices checked against what the model calls.

In: zoo models at small sizes. Out: pass/fail.
"""

import dataclasses
from collections import Counter

import pytest
import torch

from evaluator import kernels
from evaluator.profiling import profile as profiling
from evaluator.models import load_model


def test_bert_tiny_hot_ops_find_gemm_first_and_pick_two_kernel_families():
    hot = profiling.hot_ops(load_model("bert-tiny", seq_len=64), top=2, iters=2)
    fams = {o.family: o for o in hot.ops}
    assert {"gemm", "attention", "layernorm"} <= set(fams)
    # every nn.Linear of bert-tiny (embedding-free): 6 per layer, 2 layers
    assert fams["gemm"].calls == 12
    assert set(fams["gemm"].shapes) == {"128x128x128", "128x512x128", "128x128x512"}
    # batch 2 x heads 2 x 64 queries x 64 keys x head dim 64, not causal; q, k and v are
    # the [B, S, H, D] views of their projections (row pitch H = 2), read from the strides
    assert fams["attention"].shapes == ("2x2x64x64x64x0x2x2x2",)
    # The two hottest families (attention and layernorm trade places on a noisy CPU), each
    # followed by the fused variant whose pattern bert-tiny has: GELU(fc1(x)) in both
    # layers, LN(sublayer + x) after attention and after the MLP.
    # Which two are hottest moves on CI's loaded cores (attention and layernorm once
    # outran gemm there); each chosen one brings the variant whose pattern bert-tiny has.
    bases = tuple(o.family for o in hot.ops if o.has_kernel and o.shapes)[:2]
    want = {}
    if "gemm" in bases:
        want["gemm_gelu"] = (("128x512x128",), 2, ())
        assert hot.selected[hot.selected.index("gemm") + 1] == "gemm_gelu"
    if "layernorm" in bases:
        want["layernorm_residual"] = (("128x128",), 4, ())
        assert hot.selected[hot.selected.index("layernorm") + 1] == "layernorm_residual"
    assert {fu.family: (fu.shapes, fu.calls, fu.reused) for fu in hot.fusions} == want
    assert hot.selected == profiling.with_fusions(bases, hot.fusions) and len(hot.selected) == 2 + len(want)
    assert abs(sum(o.share for o in hot.ops) - 1.0) < 1e-6
    assert hot.ops == tuple(sorted(hot.ops, key=lambda o: o.time_ms, reverse=True))
    # families without a kernel still show, marked as such
    assert not fams["embedding"].has_kernel


@pytest.mark.slow
def test_no_fuse_keeps_the_two_hottest_families_alone():
    hot = profiling.hot_ops(load_model("bert-tiny", seq_len=64), top=2, iters=1, fuse=False)
    bases = tuple(o.family for o in hot.ops if o.has_kernel and o.shapes)[:2]
    assert hot.selected == bases and hot.fusions == ()


def test_a_pre_norm_residual_goes_to_the_family_that_keeps_the_sum():
    # llama-tiny: the residual sum h = x + attn(norm(x)) is the next norm's input and the
    # next residual's operand; its norm is an RMSNorm anyway. A pre-norm LayerNorm model:
    # layernorm_residual would compute each sum twice; add_layernorm writes it out.
    class PreNorm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.norm = torch.nn.Linear(32, 32), torch.nn.LayerNorm(32)

        def forward(self, x):
            for _ in range(2):
                x = x + self.fc(self.norm(x))
            return self.norm(x) + x

    model = dataclasses.replace(
        load_model("bert-tiny", seq_len=8), module=PreNorm().eval(), inputs=(torch.randn(4, 8, 32),)
    )
    found = {fu.family: fu for fu in profiling.fusions(model, ("gemm", "layernorm"))}
    assert "layernorm_residual" not in found and "gemm_gelu" not in found
    assert (found["add_layernorm"].shapes, found["add_layernorm"].calls, found["add_layernorm"].reused) == (
        ("32x32",),
        2,
        (),
    )
    assert profiling.with_fusions(("gemm", "layernorm"), tuple(found.values())) == (
        "gemm",
        "layernorm",
        "add_layernorm",
    )


def test_without_the_family_that_keeps_the_sum_a_pre_norm_residual_stays_unfused():
    class PreNorm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(32)

        def forward(self, x):
            x = x + x.sin()
            return self.norm(x) * x

    model = dataclasses.replace(
        load_model("bert-tiny", seq_len=8), module=PreNorm().eval(), inputs=(torch.randn(4, 8, 32),)
    )
    order = dict(kernels.REGISTRY)
    kernels.unregister("add_layernorm")
    try:
        found = {fu.family: fu for fu in profiling.fusions(model, ("layernorm",))}
    finally:  # the registry as it was, order included (the router tries starters in it)
        kernels.REGISTRY.clear()
        kernels.REGISTRY.update(order)
    assert found["layernorm_residual"].shapes == () and found["layernorm_residual"].reused == ("32x32",)


def test_explicit_families_override_the_choice():
    hot = profiling.hot_ops(load_model("llama-tiny", seq_len=32), families=("rmsnorm",), iters=1)
    # with the fused variant whose pattern llama-tiny has: each residual sum, then its RMSNorm
    assert hot.selected == ("rmsnorm", "add_rmsnorm")
    assert [(fu.family, fu.shapes, fu.calls) for fu in hot.fusions] == [("add_rmsnorm", ("32x128",), 4)]
    fams = {o.family: o for o in hot.ops}
    assert "32x128" in fams["rmsnorm"].shapes
    # is_causal is a scalar argument: read from the profiler's concrete inputs; the rotary
    # embedding keeps q and k in their projections' [B, S, H, D] order (row pitch H = 4)
    assert fams["attention"].shapes == ("1x4x32x32x32x1x4x4x4",)


def test_resnet_is_dominated_by_conv_and_conv_shapes_carry_stride_and_padding():
    hot = profiling.hot_ops(load_model("resnet-tiny"), iters=3)  # a ranking: more than one noisy pass
    conv = hot.ops[0]
    assert conv.family == "conv2d" and conv.has_kernel and hot.selected[0] == "conv2d"
    # (N, H, W, C, K, R, S, stride, pad, nchw): the stem's 7x7 stride-2 pad-3 conv, from the
    # profiler's concrete inputs (stride and padding are scalar arguments), in NCHW (the
    # input's strides, as the model was written)
    assert "2x64x64x3x8x7x7x2x3x1" in conv.shapes
    assert any(s.endswith("x3x3x2x1x1") for s in conv.shapes)  # a stride-2 3x3 bottleneck conv


def test_matmul_by_a_weight_is_gemm_and_a_batched_one_is_bmm():
    assert profiling.classify("aten::matmul", [[2, 8, 16], [16, 4]]) == "gemm"
    assert profiling.classify("aten::matmul", [[2, 8, 16], [2, 16, 4]]) == "bmm"
    assert profiling.classify("aten::batch_norm", [[2, 4, 8, 8]]) == "batchnorm"
    assert profiling.classify("aten::_grouped_mm", [[14, 16], [3, 16, 24], [3]]) == "grouped_gemm"  # experts
    assert profiling.classify("aten::hardtanh", [[2, 4]]) is None  # no family covers it (see test_toy_family)


def test_shapes_come_hottest_first_with_their_time():
    hot = profiling.hot_ops(load_model("bert-tiny", seq_len=64), iters=2)
    gemm = next(o for o in hot.ops if o.family == "gemm")
    assert len(gemm.shape_ms) == len(gemm.shapes) and all(t > 0 for t in gemm.shape_ms)
    assert list(gemm.shape_ms) == sorted(gemm.shape_ms, reverse=True)


def test_a_family_the_model_never_calls_is_a_one_line_error():
    import pytest
    from evaluator.errors import ConfigError

    with pytest.raises(ConfigError, match="--families softmax: softmax: the model makes no such call"):
        profiling.hot_ops(load_model("bert-tiny", seq_len=16), families=("softmax",), iters=1)


def test_shapes_are_taken_hottest_first_until_they_hold_the_share_of_the_family_time():
    from evaluator.tuning.stage import hottest

    times = (50.0, 30.0, 15.0, 4.0, 1.0)
    assert hottest(("a", "b", "c", "d", "e"), times, 0.95, None) == ("a", "b", "c")
    assert hottest(("a", "b", "c", "d", "e"), times, 1.0, None) == ("a", "b", "c", "d", "e")
    assert hottest(("a", "b", "c", "d", "e"), times, 0.95, 2) == ("a", "b")  # --max-shapes caps
    assert hottest(("a", "b"), (), 0.95, None) == ("a", "b")  # no times: every shape


def test_a_family_called_at_no_shape_its_kernel_takes_is_named_not_skipped():
    from evaluator.results import HotOp, HotOps

    hot = HotOps(
        "cpu",
        10.0,
        (
            HotOp("attention", 4.0, 0.4, 4, (), ("aten::scaled_dot_product_attention",), True),
            HotOp("gemm", 6.0, 0.6, 8, ("8x8x8",), ("aten::linear",), True),
        ),
        ("gemm",),
    )
    assert [o.family for o in profiling.unnamed(hot)] == ["attention"]


def test_a_forward_that_raises_is_a_model_error(tmp_path):
    import pytest
    import torch
    from evaluator.errors import ModelLoadError
    from evaluator.models import LoadedModel
    from evaluator.results import ModelSpec

    class Broken(torch.nn.Module):
        def forward(self, x):
            raise ValueError("shapes do not line up")

    m = LoadedModel(ModelSpec("broken", "file", 1, None, "float32"), Broken(), (torch.randn(1),), "cpu")
    with pytest.raises(ModelLoadError, match="the model's forward raised ValueError: shapes do not line up"):
        profiling.hot_ops(m, iters=1)


def test_layouts_match_the_route_when_the_profiler_records_no_strides(monkeypatch):
    """torch before 2.12 records no input strides: the profiled shapes then say
    contiguous / NCHW, while the route sees the model's views and channels_last
    tensors. One forward pass under a router with no kernels puts the routed layout
    back, so the kernel tuned is the one the model's calls will ask for."""
    monkeypatch.setattr(profiling, "_event_strides", lambda evt: None)
    hot = profiling.hot_ops(load_model("llama-tiny", seq_len=32), families=("rmsnorm",), iters=1)
    assert {o.family: o for o in hot.ops}["attention"].shapes == ("1x4x32x32x32x1x4x4x4",)

    model = load_model("resnet-tiny")
    model.module.to(memory_format=torch.channels_last)
    model = type(model)(
        model.spec, model.module, tuple(t.to(memory_format=torch.channels_last) for t in model.inputs), model.device
    )
    # Found by family, not rank: one profiled pass on a busy CPU has timed batchnorm above
    # conv2d (a CI run with two test workers), and the layout is what this test is about.
    conv = {o.family: o for o in profiling.hot_ops(model, iters=1).ops}["conv2d"]
    assert "2x64x64x3x8x7x7x2x3x0" in conv.shapes
    assert not any(s.endswith("x1") and s.count("x") == 9 for s in conv.shapes)


def test_convolutions_with_string_padding_are_profiled_at_the_shapes_the_route_sees():
    """torch.profiler records padding="same" / "valid" as None (EfficientNet's convolutions):
    a 1x1 or strided call has one shape either way, and a 3x3 at stride 1 takes the one the
    router's pass saw, so every call has its shape and the family can be chosen."""
    from evaluator.models import LoadedModel
    from evaluator.results import ModelSpec

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 8, 3, stride=2, padding="valid")
            self.dw = torch.nn.Conv2d(8, 8, 3, padding="same", groups=8)
            self.pw = torch.nn.Conv2d(8, 16, 1, padding="same")
            self.full = torch.nn.Conv2d(16, 16, 3, padding="valid")

        def forward(self, x):
            return self.full(self.pw(self.dw(self.stem(x))))

    m = LoadedModel(ModelSpec("net", "file", 2, None, "float32"), Net().eval(), (torch.randn(2, 3, 17, 17),), "cpu")
    conv = {o.family: o for o in profiling.hot_ops(m, families=("conv2d",), iters=1).ops}["conv2d"]
    assert sorted(conv.shapes) == sorted(
        ["2x17x17x3x8x3x3x2x0x1", "2x8x8x8x8x3x3x1x1x1x8", "2x8x8x8x16x1x1x1x0x1", "2x8x8x16x16x3x3x1x0x1"]
    )
    assert conv.calls == 4 and sum(conv.shape_calls) == 4


def test_conv1d_with_string_padding_is_profiled_at_the_shapes_the_route_sees():
    """The same for aten::conv1d (an audio front end written with padding="same")."""
    from evaluator.models import LoadedModel
    from evaluator.results import ModelSpec

    net = torch.nn.Sequential(torch.nn.Conv1d(4, 8, 5, padding="same"), torch.nn.Conv1d(8, 8, 3, padding="valid"))
    m = LoadedModel(ModelSpec("net", "file", 2, None, "float32"), net.eval(), (torch.randn(2, 4, 33),), "cpu")
    conv = {o.family: o for o in profiling.hot_ops(m, families=("conv1d",), iters=1).ops}["conv1d"]
    assert sorted(conv.shapes) == ["2x33x4x8x5x1x2x1", "2x33x8x8x3x1x0x1"]
    assert conv.calls == 2 and sum(conv.shape_calls) == 2


def _routed_layernorm_model():
    """LayerNorm then Linear on CPU, layernorm routed to a real TileLang kernel."""
    from evaluator.device import hardware
    from evaluator import kernels
    from evaluator.routing import router as swap

    fam = kernels.get("layernorm")
    shape = (6, 16)
    conf = fam.search_space(shape, "float32", hardware.detect("cpu"))[0]
    table = swap.KernelTable("float32", "c")
    table.add("layernorm", shape, conf, fam.build(shape, "float32", conf, "c"))
    model = torch.nn.Sequential(torch.nn.LayerNorm(16), torch.nn.Linear(16, 32)).eval()
    return model, torch.randn(2, 3, 16), swap.Router([fam], table)


def test_family_times_attribute_routed_calls_to_their_family_once():
    model, x, router = _routed_layernorm_model()

    def routed():
        with router:
            return model(x)

    ref_total, ref_routed = profiling.family_times(lambda: model(x), "cpu")
    total, tl = profiling.family_times(routed, "cpu")
    assert ref_routed == {} and ref_total["layernorm"] > 0 and ref_total["gemm"] > 0
    # The routed call's own aten ops (allocations, copies) belong to it, not to "other".
    assert set(tl) == {"layernorm"} and tl["layernorm"] > 0
    assert total["layernorm"] == tl["layernorm"] and total["gemm"] > 0
    assert router.ran  # the router really ran the TileLang kernel under the profiler
    # The profile stage sees the routed call as the family too, and nothing twice.
    rows = profiling._attributed(profiling._profiled(routed, False, 1, 0)[0], False)
    assert [r["family"] for r in rows if r["routed"]] == ["layernorm"]
    assert not any(r["op"] == "aten::layer_norm" for r in rows)


def test_left_out_names_the_hot_families_with_a_kernel_the_selection_skipped():
    from evaluator.results import HotOp, HotOps

    # ViT-B on the H200 (2026-12-02), shares rounded: `--ops 2` took gemm and conv2d.
    ops = (
        HotOp("gemm", 0.90, 0.486, 49, ("3152x3072x768",), ("aten::linear",), True),
        HotOp("conv2d", 0.29, 0.157, 1, ("16x224x224x3x768x16x16x16x0x1",), ("aten::conv2d",), True),
        HotOp("elementwise", 0.26, 0.139, 37, (), ("aten::add",), False),
        HotOp("layernorm", 0.21, 0.115, 25, ("3152x768",), ("aten::layer_norm",), True),
        HotOp("attention", 0.17, 0.093, 12, ("16x12x197x197x64x0x36x36x36",), ("aten::sdpa",), True),
        HotOp("softmax", 0.01, 0.004, 1, ("16x10",), ("aten::softmax",), True),
    )
    hot = HotOps(device="cuda", total_ms=1.84, wall_ms=2.0, selected=("gemm", "conv2d"), ops=ops)
    assert [o.family for o in profiling.left_out(hot)] == ["layernorm", "attention"]  # not softmax's 0.4%
    assert profiling.left_out(dataclasses.replace(hot, selected=("gemm", "conv2d", "layernorm", "attention"))) == ()


def test_a_routed_range_counts_the_kernels_inside_it_not_the_gaps_between_them():
    # A held linear+GELU pair on the reference side: two kernels with the host's gap
    # between them; TileLang's range: one kernel; a kernel outside every range.
    spans = [(100.0, 158.0), (200.0, 213.0)]
    kernels = [(100.0, 112.0), (154.0, 158.0), (200.0, 213.0), (170.0, 190.0)]
    assert profiling.kernel_time_in(spans, kernels) == [16.0, 13.0]
    assert profiling.kernel_time_in([], kernels) == [] and profiling.kernel_time_in(spans, []) == [0, 0]


def test_each_profiled_call_knows_its_pass_and_a_pause_in_one_pass_moves_no_ranking():
    import pandas as pd

    df = profiling.profile_model(load_model("resnet-tiny"), iters=3)
    per_pass = df.groupby("pass").size()
    assert list(per_pass.index) == [0, 1, 2] and per_pass.nunique() == 1  # the same calls each pass
    # batchnorm paused 50 ms in pass 1: the mean over passes would rank it first
    rows = pd.DataFrame(
        {
            "family": ["conv2d"] * 3 + ["batchnorm"] * 3,
            "time_us": [800, 800, 800, 100, 50_000, 100],
            "pass": [0, 1, 2, 0, 1, 2],
        }
    )
    conv, bn = (profiling._pass_ms(rows[rows.family == f], 3) for f in ("conv2d", "batchnorm"))
    assert (conv, bn) == (0.8, 0.1)
    assert profiling._pass_ms(rows[rows.family == "batchnorm"], 2) > 0.8  # two passes: the mean, as it was


def test_a_scan_pairs_each_residual_add_with_its_written_norm_and_runs_the_norm_as_written():
    # HF llama on the H200 (2026-12-04): the in-model reference of add_rmsnorm found no
    # pairs (the scan saw no norm call) and rmsnorm's 9 written norms stood against the one
    # left unfused. The scan now sees each norm as one call and runs it as written, inside
    # the pair's range and without a range of its own.
    from evaluator.routing import router as swap, written
    from tests.fixtures import hf_models

    model, (ids,) = hf_models.llama()
    scan = swap.Router([kernels.get("add_rmsnorm")], swap.KernelTable("float32", "c"), scan=True, model=model)

    def reference():
        with written.marked(model), scan:
            return model(ids)

    with torch.inference_mode():
        expected = model(ids)
    prof, _ = profiling._profiled(reference, False, 1, 1)  # the warm-up finds the norms (written.find)
    assert not any(e.name == "aten::rms_norm" for e in prof.events())  # the norms ran as written
    rows = profiling._attributed(prof, False)
    pairs = [r for r in rows if r["family"] == "add_rmsnorm"]
    assert (
        len(pairs) == 4 and all(r["routed"] for r in pairs) and scan.fusible[("add_rmsnorm", "32x64")] == 8
    )  # 4 a pass, warm-up too
    assert len({r["call"] for r in rows if r["family"] == "rmsnorm"}) == 1  # the norm of the embeddings
    # No norm range inside a pair's: on CUDA each kernel belongs to its innermost range,
    # and the pair's GPU range held only the add (2026-12-04: 6.3 us a pair, norm not counted).
    for e in prof.events():
        if e.name.startswith(written.PREFIX):
            p = e.cpu_parent
            while p is not None and not p.name.startswith(profiling.ROUTED_PREFIX):
                p = p.cpu_parent
            assert p is None, "a written norm's range inside tilelang::add_rmsnorm"
    with torch.inference_mode():
        assert torch.equal(reference().last_hidden_state, expected.last_hidden_state)


def test_family_shares_add_up_and_a_recognised_call_inside_an_unrecognised_one_counts_once():
    import torch

    from evaluator.models import LoadedModel
    from evaluator.results import ModelSpec

    class Einsum(torch.nn.Module):  # aten::einsum (no family) calls aten::bmm (bmm's)
        def forward(self, a, b):
            return torch.einsum("bij,bjk->bik", a, b).relu()

    model = LoadedModel(
        ModelSpec("einsum", "file", 8, None, "float32", 0, "x"),
        Einsum().eval(),
        # wide enough that the product outweighs einsum's own reshapes many times over on a
        # busy machine too (at 64 wide a loaded CPU read them within 10% of each other)
        (torch.randn(8, 192, 192), torch.randn(8, 192, 192)),
        "cpu",
    )
    hot = profiling.hot_ops(model, iters=3)
    assert abs(sum(o.share for o in hot.ops) - 1.0) < 1e-9
    assert abs(sum(o.time_ms for o in hot.ops) - hot.total_ms) < 1e-9
    fams = {o.family: o for o in hot.ops}
    assert "bmm" in fams and fams["bmm"].shapes
    # the outer row keeps only what its bmm did not take: read against the same profile's
    # events (not against the bmm's time, which a loaded machine can make the smaller)
    prof, _ = profiling._profiled(lambda: model.module(*model.inputs), False, 3, 1)
    rows = profiling._attributed(prof, False)
    outer = [e for e in prof.events() if e.name == "aten::einsum"]
    inclusive = sum(e.cpu_time_total for e in outer)
    einsum = sum(r["time_us"] for r in rows if r["op"] == "aten::einsum")
    bmm = sum(r["time_us"] for r in rows if r["family"] == "bmm")
    assert len(outer) == 3 and bmm > 0
    assert einsum == pytest.approx(inclusive - bmm)


def test_an_einsum_by_a_weight_is_profiled_as_the_gemm_the_router_takes():
    """einsum("bsk,kn->bsn", x, W) runs a bmm of batch 1 inside aten::einsum; the router
    takes the einsum as a GEMM, so the profile names it gemm at the router's shape (else a
    bmm kernel is tuned for calls that never reach it)."""
    import torch

    from evaluator.models import LoadedModel
    from evaluator.results import ModelSpec
    from evaluator.routing import router as swap
    from evaluator import kernels

    class ByWeight(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(48, 80))

        def forward(self, x):
            return torch.einsum("bsk,kn->bsn", x, self.w).relu()

    model = LoadedModel(
        ModelSpec("einsum-w", "file", 2, None, "float32", 0, "x"), ByWeight().eval(), (torch.randn(2, 24, 48),), "cpu"
    )
    hot = profiling.hot_ops(model, iters=2)
    fams = {o.family: o for o in hot.ops}
    assert "bmm" not in fams and "gemm" in fams, sorted(fams)
    router = swap.Router([kernels.REGISTRY["gemm"]], swap.KernelTable("float32", "c"), model=model.module)
    with torch.inference_mode(), router:
        model.module(*model.inputs)
    routed = {shape for (fam, shape) in router.fell_back if fam == "gemm"}
    assert routed and set(fams["gemm"].shapes) >= routed, (fams["gemm"].shapes, routed)


def test_a_torch_transformer_layer_is_profiled_on_the_path_the_router_sees():
    """nn.TransformerEncoderLayer in inference takes a fused fast path (bmm and softmax
    inside one aten op) only where no function mode is active; under the router it calls
    F.multi_head_attention_forward: two linears and one SDPA. The profile names the calls
    the router will be handed."""
    from evaluator.models import LoadedModel
    from evaluator.results import ModelSpec

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 2, 64, batch_first=True, dropout=0.0).eval()
    model = LoadedModel(
        ModelSpec("torch-layer", "file", 2, None, "float32", 0, "x"), layer, (torch.randn(2, 8, 32),), "cpu"
    )
    fams = {o.family: o for o in profiling.hot_ops(model, iters=1).ops}
    assert "attention" in fams and "bmm" not in fams and "softmax" not in fams, sorted(fams)
    assert "16x96x32" in fams["gemm"].shapes  # the in-projection, inside the functional


def test_a_shape_the_router_sees_at_two_layouts_is_profiled_at_both():
    """Funnel's einsums: four bmm calls of one (batch, M, N, K) a pass, two of them reading
    a transposed operand as the router sees them, while the profiler records the strides of
    the bmm inside einsum (all alike). Each layout gets the router's count of calls per
    pass, a call already at one of them keeping it, so each can be chosen and tuned."""
    a, b, other = "4x32x32x32x0x1x2x2x2", "4x32x32x32x0x0x2x0x2", "2x8x8x8x0x1x2x2x2"
    key = ("bmm", kernels.get("bmm").layout_free((4, 32, 32, 32, 0, 1, 2, 2, 2)))
    routed = {key: Counter({a: 2, b: 2})}
    rows = [{"family": "bmm", "shape": a, "pass": p, "time_us": 1.0} for p in (0, 1) for _ in range(4)]
    rows.append({"family": "bmm", "shape": other, "pass": 0, "time_us": 1.0})  # a shape the router did not see
    profiling._layouts_as_routed(rows, routed)
    for p in (0, 1):
        assert Counter(r["shape"] for r in rows if r["pass"] == p and r["shape"] != other) == {a: 2, b: 2}
    assert rows[-1]["shape"] == other
    # one layout seen: every call of the shape takes it, as before
    rows = [{"family": "bmm", "shape": a, "pass": 0, "time_us": 1.0}]
    profiling._layouts_as_routed(rows, {key: Counter({b: 3})})
    assert rows[0]["shape"] == b
