"""The operator router's bookkeeping: kernel lookup with its fallback reasons, kernel
parameters built on demand, call counts and coverage. Family routes are tested with
their families (tests/kernels/); real third-party models in tests/test_e2e_models.py."""

import torch

from evaluator.routing import calls
from evaluator.device import hardware
from evaluator import kernels
from evaluator.routing import router as swap
from evaluator.results import CallCount


def test_lookup_says_why_a_call_falls_back():
    t = swap.KernelTable("float32", "c")
    assert t.lookup("gemm", (1, 2, 3), {}) == (None, "shape not tuned")
    t.add("gemm", (1, 2, 3), None, None, verified=False, why_not="no candidate worked (compile_error)")
    assert t.lookup("gemm", (1, 2, 3), {})[1] == "no candidate worked (compile_error)"
    t.add("gemm", (4, 4, 4), {"a": 1}, lambda *x: None, verified=False)
    assert t.lookup("gemm", (4, 4, 4), {})[1] == "kernel failed verification"


def test_a_kernel_parameter_builds_a_variant_once():
    built = []

    def build(family, shape, config):
        built.append(config)
        return lambda *x: "variant"

    t = swap.KernelTable("float32", "c", build=build)
    t.add("layernorm", (4, 8), {"block_rows": 1, "eps": 1e-5}, lambda *x: "tuned")
    assert t.lookup("layernorm", (4, 8), {"eps": 1e-5})[0]() == "tuned"
    assert t.lookup("layernorm", (4, 8), {"eps": 1e-12})[0]() == "variant"
    assert t.lookup("layernorm", (4, 8), {"eps": 1e-12})[0]() == "variant"
    assert built == [{"block_rows": 1, "eps": 1e-12}]


def test_a_failing_variant_build_is_a_counted_reason():
    def build(family, shape, config):
        raise RuntimeError("no")

    t = swap.KernelTable("float32", "c", build=build)
    t.add("layernorm", (4, 8), {"eps": 1e-5}, lambda *x: None)
    kernel, why = t.lookup("layernorm", (4, 8), {"eps": 1e-6})
    assert kernel is None and "RuntimeError" in why


def test_router_counts_calls_and_never_crashes_on_odd_calls():
    fam = kernels.get("layernorm")
    shape = (6, 16)
    conf = fam.search_space(shape, "float32", hardware.detect("cpu"))[0]
    table = swap.KernelTable("float32", "c")
    table.add("layernorm", shape, conf, fam.build(shape, "float32", conf, "c"))
    router = swap.Router([fam], table)
    x = torch.randn(2, 3, 16)
    with torch.inference_mode(), router:
        y = torch.nn.functional.layer_norm(x, (16,))  # tuned shape
        torch.nn.functional.layer_norm(torch.randn(5, 16), (16,))  # not tuned
        torch.nn.functional.layer_norm(x, (3, 16))  # two normalised dims
        torch.nn.functional.layer_norm(x.double(), (16,))  # another dtype
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (16,)), atol=1e-5, rtol=1e-5)
    rows = {(c.family, c.shape): c for c in router.counts({("layernorm", "6x16"): 2.0})}
    assert rows[("layernorm", "6x16")].tilelang == 1 and rows[("layernorm", "6x16")].profiled_ms == 2.0
    assert rows[("layernorm", "5x16")].fallback == {"shape not tuned": 1}
    odd = rows[("layernorm", "")].fallback
    assert odd["normalises over more than the last dim"] == 1 and any(k.startswith("dtype float64") for k in odd)


def test_coverage_weights_each_shape_by_the_calls_that_ran():
    counts = [
        CallCount("gemm", "a", tilelang=3, fallback={"x": 1}, profiled_ms=4.0),
        CallCount("gemm", "b", tilelang=0, fallback={"shape not tuned": 2}, profiled_ms=2.0),
        CallCount("softmax", "c", tilelang=1, profiled_ms=0.0),
    ]
    assert abs(swap.coverage(counts, 10.0) - 0.3) < 1e-9
    assert swap.coverage(counts, 0.0) == 0.0
    # One profiled linear shape taken by two fused families (llama's gate and up
    # projections): its 4 ms count once, by the calls that ran, not once per family.
    fused = [
        CallCount("gemm", "a", tilelang=0, notes={"fused into gemm_silu": 2}, profiled_ms=4.0),
        CallCount("gemm_silu", "a", tilelang=2, profiled_ms=4.0),
        CallCount("gemm_mul", "a", tilelang=1, fallback={"shape not tuned": 1}, profiled_ms=4.0),
    ]
    assert abs(swap.coverage(fused, 10.0, {"gemm_silu": "gemm", "gemm_mul": "gemm"}) - 0.3) < 1e-9


def test_coverage_credits_the_calls_a_fused_kernel_takes_in():
    # A ResNet's convolution shape, once with its norm and ReLU fused, once with its norm,
    # residual add and ReLU: their batch norms and elementwise calls ran in TileLang too.
    counts = [
        CallCount("conv2d", "a", tilelang=0, notes={"fused into conv_bn_relu": 1}, profiled_ms=4.0),
        CallCount("conv_bn_relu", "a", tilelang=1, profiled_ms=4.0),
        CallCount("conv_bn_add_relu", "a", tilelang=1, profiled_ms=4.0),
    ]
    base = {"conv_bn_relu": "conv2d", "conv_bn_add_relu": "conv2d"}
    absorbs = {f: kernels.get(f).absorbs for f in base}
    assert absorbs == {
        "conv_bn_relu": ("batchnorm", "elementwise"),
        "conv_bn_add_relu": ("batchnorm",) + ("elementwise",) * 2,
    }
    ms = {"batchnorm": 1.0, "elementwise": 0.25, "pooling": 0.5}
    assert abs(swap.coverage(counts, 8.0, base) - 0.5) < 1e-9  # the convolutions' time alone
    assert abs(swap.coverage(counts, 8.0, base, absorbs, ms) - (4.0 + 1.25 + 1.5) / 8.0) < 1e-9
    # every fused family says what it takes in; a family with a kernel of its own takes nothing
    for fam in kernels.REGISTRY.values():
        assert bool(fam.absorbs) == bool(fam.fuses or fam.profile_family != fam.name), fam.name


def test_derived_weights_are_made_once_and_remade_after_an_update():
    w = torch.nn.Parameter(torch.randn(3, 5))
    made = []

    def make(t):
        made.append(1)
        return t.t().contiguous()

    a = calls.DERIVED.get(w, "t", make)
    b = calls.DERIVED.get(w, "t", make)
    assert a is b and len(made) == 1
    with torch.no_grad():
        w.add_(1)
    c = calls.DERIVED.get(w, "t", make)
    assert len(made) == 2 and torch.equal(c, w.detach().t())


# ---------------------------------------------------------------- fused patterns held back

from tests.routing import count, route_model  # noqa: E402

F = torch.nn.functional


class _Block(torch.nn.Module):
    """A post-norm MLP block, as BERT writes it: LN(fc2(GELU(fc1(x))) + x)."""

    def __init__(self, late_read: bool = False):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 48), torch.nn.Linear(48, 16)
        self.act, self.norm = torch.nn.GELU(), torch.nn.LayerNorm(16)
        self.late_read = late_read

    def forward(self, x):
        h = self.fc1(x)
        out = self.norm(self.fc2(self.act(h)) + x)
        return out + h[..., :16] if self.late_read else out  # the pre-activation read again


def _inputs(seed=0):
    return (torch.randn(3, 5, 16, generator=torch.Generator().manual_seed(seed)),)


def test_a_linear_then_gelu_and_an_add_then_layer_norm_each_run_as_one_fused_kernel():
    router, got, want = route_model(["gemm", "gemm_gelu", "layernorm", "layernorm_residual"], _Block(), _inputs())
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert count(router, "gemm_gelu") == (1, 0) and count(router, "layernorm_residual") == (1, 0)
    assert count(router, "gemm") == (1, 0)  # fc2; fc1 went into gemm_gelu
    assert count(router, "layernorm") == (0, 0)
    rows = {(c.family, c.shape): c for c in router.counts()}
    assert rows[("gemm", "15x48x16")].notes == {"fused into gemm_gelu": 1}


def test_a_held_result_read_again_after_the_fused_call_is_computed_then():
    router, got, want = route_model(["gemm", "gemm_gelu"], _Block(late_read=True), _inputs(1))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert count(router, "gemm_gelu") == (1, 0)
    assert router.reused == {("gemm_gelu", "15x48x16"): 1}


class _Other(torch.nn.Module):
    """fc1's result read by something other than GELU first, an input written in place
    while a linear waits, a metadata read in between, and a held result returned."""

    def __init__(self, case):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 48)
        self.case = case

    def forward(self, x):
        h = self.fc1(x)
        if self.case == "read":
            return h * 2, F.gelu(h)
        if self.case == "write":
            x.mul_(3)  # fc1 must have read x before this
            return F.gelu(h)
        if self.case == "shape":
            assert h.shape[-1] == h.size(-1) == 48 and h.dim() == 3
            return F.gelu(h)
        if self.case == "tanh":
            return F.gelu(h, approximate="tanh")  # not gemm_gelu's (exact) GELU
        return h  # "return": nothing completes the pattern


def _gemm_table(shape=(15, 48, 16), names=("gemm", "gemm_gelu")):
    table = swap.KernelTable("float32", "c")
    conf = kernels.get("gemm").search_space((15, 16, 48), "float32", hardware.detect("cpu"))[0]
    table.add("gemm", (15, 16, 48), conf, kernels.get("gemm").build((15, 16, 48), "float32", conf, "c"))
    for name in names:
        conf = kernels.get(name).search_space(shape, "float32", hardware.detect("cpu"))[0]
        table.add(name, shape, conf, kernels.get(name).build(shape, "float32", conf, "c"))
    return table


def test_a_held_linear_runs_as_it_would_have_whenever_anything_else_reads_or_writes_around_it():
    table, fams = _gemm_table(), [kernels.get("gemm"), kernels.get("gemm_gelu")]
    for case, fused in (("read", 0), ("write", 0), ("shape", 1), ("tanh", 0), ("return", 0)):
        model = _Other(case).eval()
        x = _inputs(3)[0]
        with torch.inference_mode():
            want = model(x.clone())
            router = swap.Router(fams, table)
            with router:
                got = model(x.clone())
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4, msg=case)
        assert count(router, "gemm_gelu")[0] == fused, case
        assert count(router, "gemm")[0] == 1 - fused, case
        assert not router._held, case


def test_a_fused_family_alone_fuses_its_pairs_and_leaves_the_other_calls_to_pytorch():
    model, x = _Block().eval(), _inputs(4)[0]
    with torch.inference_mode():
        want = model(x)
        only = swap.Router([kernels.get("gemm"), kernels.get("gemm_gelu")], _gemm_table()).only("gemm_gelu")
        with only:
            got = model(x)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert count(only, "gemm_gelu") == (1, 0) and count(only, "gemm") == (0, 0)


def test_the_scan_counts_patterns_and_the_results_read_again():
    fams = [kernels.get("gemm_gelu"), kernels.get("layernorm_residual")]
    with torch.inference_mode():
        seen, again = swap.fusible(lambda: _Block(late_read=True).eval()(*_inputs()), fams, "float32")
    assert seen == {("gemm_gelu", "15x48x16"): 1, ("layernorm_residual", "15x16"): 1}
    assert again == {("gemm_gelu", "15x48x16"): 1}


class _PreNorm(torch.nn.Module):
    """Two pre-norm blocks as timm's ViT writes them: the sublayer's dropout (an identity
    in eval) before the residual add, the sum normalised and then read again by the next
    add; the last sum goes to the final norm."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(2))
        self.norm = torch.nn.ModuleList(torch.nn.LayerNorm(16) for _ in range(3))
        self.drop = torch.nn.Dropout(0.0)

    def forward(self, x):
        for fc, norm in zip(self.fc, self.norm):
            x = x + self.drop(fc(norm(x)))
        return self.norm[2](x)


def test_a_pre_norm_sum_and_its_norm_run_as_one_kernel_that_writes_both():
    model = _PreNorm()
    fams = [kernels.get("add_layernorm"), kernels.get("layernorm_residual")]
    with torch.inference_mode():
        seen, again = swap.fusible(lambda: model.eval()(*_inputs()), fams, "float32")
    # both families see the pattern; the first sum is read again after its norm, the last is not
    assert seen == {("add_layernorm", "15x16"): 2, ("layernorm_residual", "15x16"): 2}
    assert again == {("add_layernorm", "15x16"): 1, ("layernorm_residual", "15x16"): 1}
    router, got, want = route_model(["gemm", "layernorm", "add_layernorm"], model, _inputs(2))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    # the first norm reads the input, not a sum; the other two complete a held add
    assert count(router, "add_layernorm") == (2, 0) and count(router, "layernorm") == (1, 0)
    assert not router.reused  # the sums were written by the fused kernel, not computed again


class _WrittenOut(torch.nn.Module):
    """An activation written as elementwise calls, as transformers' NewGELUActivation
    (GPT-2's gelu_new) and a hand-written SiLU are, between two linears."""

    def __init__(self, act: str):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 48), torch.nn.Linear(48, 16)
        self.act = act

    def forward(self, x):
        h = self.fc1(x)
        if self.act == "gelu_new":
            import math

            h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))
        elif self.act == "silu":
            h = h * torch.sigmoid(h)
        elif self.act == "scaled":  # elementwise, but no activation of ours
            h = (h * 2.0).tanh()
        elif self.act == "kept":  # the chain's first result is read again: runs as written
            g = h * torch.sigmoid(h)
            return self.fc2(g) + h[..., :16]
        return self.fc2(h)


def _routed_eval(fams, table, model, x):
    """(router, routed output, PyTorch's) of one forward pass of `model` in eval mode."""
    model = model.eval()
    with torch.inference_mode():
        want = model(x)
        router = swap.Router(fams, table)
        with router:
            got = model(x)
    return router, got, want


def test_an_activation_written_out_as_elementwise_calls_runs_as_one_fused_kernel():
    names = ("gemm", "gemm_gelu_tanh", "gemm_silu", "gemm_gelu")
    table, fams = _gemm_table(names=names), [kernels.get(f) for f in names]
    for act, fused in (("gelu_new", "gemm_gelu_tanh"), ("silu", "gemm_silu"), ("scaled", None), ("kept", None)):
        router, got, want = _routed_eval(fams, table, _WrittenOut(act), _inputs(5)[0])
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4, msg=act)
        ran = {f: count(router, f)[0] for f in names}
        # fc2 (15x16x48) is a plain gemm either way; fc1 is fused, or runs as written
        assert ran == {**dict.fromkeys(names, 0), "gemm": 1 if fused else 2, **({fused: 1} if fused else {})}, act
        assert not router._held and not router._links, act
    with torch.inference_mode():
        seen, _ = swap.fusible(lambda: _WrittenOut("gelu_new").eval()(*_inputs()), fams, "float32")
        kept, _ = swap.fusible(lambda: _WrittenOut("kept").eval()(*_inputs()), fams, "float32")
    assert seen == {("gemm_gelu_tanh", "15x48x16"): 1} and kept == {}


class _Gated(torch.nn.Module):
    """A gated MLP, down(act(gate(x)) * up(x)) as llama writes it, and other spellings."""

    def __init__(self, form: str):
        super().__init__()
        self.gate, self.up = torch.nn.Linear(16, 48, bias=False), torch.nn.Linear(16, 48, bias=False)
        self.down, self.scale = torch.nn.Linear(48, 16, bias=False), torch.nn.Parameter(torch.rand(48))
        self.form = form

    def forward(self, x):
        if self.form == "swiglu":
            return self.down(F.silu(self.gate(x)) * self.up(x))
        if self.form == "up_first":  # both linears held when the SiLU comes
            return self.down(self.up(x) * F.silu(self.gate(x)))
        if self.form == "bilinear":  # the product reads two held linears
            return self.down(self.gate(x) * self.up(x))
        if self.form == "square":  # the held result times itself
            u = self.up(x)
            return self.down(u * u)
        if self.form == "broadcast":  # a [48] factor: not a tensor of the result's size
            return self.down(self.up(x) * self.scale)
        u = self.up(x)  # "kept": the up projection read again after the product
        return self.down(F.silu(self.gate(x)) * u) + u[..., :16]


def test_a_gated_mlps_multiply_runs_in_the_up_projections_epilogue():
    # llama's down(silu(gate(x)) * up(x)): gemm_silu takes the gate, gemm_mul the up
    # projection and the product, so no elementwise multiply runs; the other spellings
    # fuse what is theirs and run the rest as written, never reading a value not yet made.
    names = ("gemm", "gemm_silu", "gemm_mul")
    table, fams = _gemm_table(names=names), [kernels.get(f) for f in names]
    expect = {
        "swiglu": (1, 1, 1),
        "up_first": (1, 1, 1),
        "bilinear": (2, 0, 1),
        "square": (2, 0, 0),
        "broadcast": (2, 0, 0),
        "kept": (2, 1, 1),
    }  # kept: the up projection again, late
    for form, (plain, silu, mul) in expect.items():
        router, got, want = _routed_eval(fams, table, _Gated(form), _inputs(7)[0])
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4, msg=form)
        assert (count(router, "gemm")[0], count(router, "gemm_silu")[0], count(router, "gemm_mul")[0]) == (
            plain,
            silu,
            mul,
        ), form
        assert not router._held and not router._links, form
    rows = {(c.family, c.shape): c for c in router.counts()}
    assert rows[("gemm", "15x48x16")].notes == {"fused into gemm_silu": 1, "fused into gemm_mul": 1}
    with torch.inference_mode():
        seen, reused = swap.fusible(lambda: _Gated("swiglu").eval()(*_inputs()), fams, "float32")
        _, kept = swap.fusible(lambda: _Gated("kept").eval()(*_inputs()), fams, "float32")
    assert seen == {("gemm_silu", "15x48x16"): 1, ("gemm_mul", "15x48x16"): 1} and not reused
    assert kept == {("gemm_mul", "15x48x16"): 1}  # the profile leaves such a shape unfused


def test_a_tanh_gelu_in_one_call_is_gemm_gelu_tanh_and_not_the_exact_one():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(16, 48)

        def forward(self, x):
            return F.gelu(self.fc(x), approximate="tanh")

    router, got, want = route_model(["gemm", "gemm_gelu", "gemm_gelu_tanh"], M(), _inputs(6))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert {c.family: c.tilelang for c in router.counts() if c.tilelang} == {"gemm_gelu_tanh": 1}


def test_each_linear_is_routed_once_and_a_fused_family_without_kernels_is_not_asked(monkeypatch):
    # The router's host cost per call is Python (benchmarks/router_overhead.py): a linear
    # that a fused family looked at and did not take is launched from the route that
    # family made, not routed again; with no fused kernel at any shape it is not looked at.
    from evaluator.kernels import gemm as G

    seen = []
    real = G.GemmFamily.route
    monkeypatch.setattr(G.GemmFamily, "route", lambda self, *a: seen.append(self.name) or real(self, *a))
    model, inputs = _Block(), _inputs(2)
    router, got, want = route_model(["gemm", "gemm_gelu"], model, inputs)
    for r, routes in ((router, ["gemm_gelu", "gemm_gelu"]), (router.passthrough(), ["gemm", "gemm"])):
        seen.clear()
        r.reset()
        with torch.inference_mode(), r:
            again = model(*inputs)
        torch.testing.assert_close(again, want, atol=1e-4, rtol=1e-4)
        assert seen == routes, seen  # fc1 and fc2, once each
    assert count(router, "gemm_gelu") == (1, 0) and count(router, "gemm") == (1, 0)


def test_multihead_attentions_projections_and_attention_inside_its_functional_are_routed():
    """nn.MultiheadAttention runs F.multi_head_attention_forward, one call to a function
    mode: its in- and out-projections and its attention inside are routed and counted,
    with the weights (need_weights, the default: bmm and softmax) and without (SDPA)."""
    torch.manual_seed(0)

    class M(torch.nn.Module):
        def __init__(self, weights: bool):
            super().__init__()
            self.attn, self.weights = torch.nn.MultiheadAttention(32, 2, batch_first=True), weights

        def forward(self, x):
            return self.attn(x, x, x, need_weights=self.weights)[0]

    x = torch.randn(2, 8, 32)
    router, got, want = route_model(["gemm", "attention"], M(False), (x,))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert count(router, "gemm") == (2, 0) and count(router, "attention") == (1, 0)
    assert {c.shape for c in router.counts() if c.family == "gemm"} == {"16x96x32", "16x32x32"}
    router, got, want = route_model(["gemm", "bmm", "softmax"], M(True), (x,))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert count(router, "gemm") == (2, 0) and count(router, "bmm") == (2, 0) and count(router, "softmax") == (1, 0)


def test_a_norm_taken_into_a_residual_kernel_says_so_on_its_own_row():
    """LN(x + r): the add is no family's call, the norm is layernorm's. Its row, 0 calls
    where the profile saw them, names the kernel that took them."""
    router, got, want = route_model(["gemm", "gemm_gelu", "layernorm", "layernorm_residual"], _Block(), _inputs())
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    rows = {(c.family, c.shape): c for c in router.counts()}
    assert rows[("layernorm", "15x16")].notes == {"fused into layernorm_residual": 1}
    assert count(router, "layernorm") == (0, 0)


def test_calls_of_no_family_go_straight_back_to_pytorch():
    # The router's fast path: with nothing held, a call no family knows runs as written and
    # is not counted; every function a chosen or watched family knows takes the full path.
    router = swap.Router(
        [kernels.get("gemm"), kernels.get("gemm_gelu")],
        swap.KernelTable("float32", "c"),
        watch=[kernels.get("softmax")],
    )
    known = {fn for fam in (*router.all, *router.watched) for fn in (*fam.functions, *fam.fuses)}
    assert known <= router._known and torch.add not in router._known
    x = torch.randn(4, 8)
    with router:
        y = torch.add(x, 1.0)
        z = torch.softmax(x, -1)
    assert torch.equal(y, x + 1.0) and torch.equal(z, torch.softmax(x, -1))
    assert not router.ran and router.fell_back == {("softmax", "4x8"): {router.NOT_CHOSEN: 1}}


def test_a_watched_call_no_kernel_can_take_gives_that_reason_not_the_option_hint():
    # Gemma2's keys expanded from one head (stride 0 across heads): bmm has no shape for
    # them, so choosing bmm would change nothing; the reason says why the kernel cannot.
    router = swap.Router([kernels.get("gemm")], swap.KernelTable("float32", "c"), watch=[kernels.get("bmm")])
    q, k = torch.randn(2, 4, 8, 16), torch.randn(2, 1, 8, 16).expand(2, 4, 8, 16)
    with router:
        torch.matmul(q, k.transpose(-1, -2))
    [(key, reasons)] = router.fell_back.items()
    assert key == ("bmm", "") and router.NOT_CHOSEN not in next(iter(reasons)), reasons


class _InPlaceResidual(torch.nn.Module):
    """HF ResNet's bottleneck end: conv, batch norm, `h += x`, ReLU (optionally also
    returning the sum, read after the pattern)."""

    def __init__(self, keep_sum: bool = False):
        super().__init__()
        self.conv, self.bn, self.keep_sum = torch.nn.Conv2d(8, 8, 1, bias=False), torch.nn.BatchNorm2d(8), keep_sum

    def forward(self, x):
        h = self.bn(self.conv(x))
        h += x
        y = torch.relu(h)
        return (y, h) if self.keep_sum else y


def test_an_in_place_residual_fused_into_conv_bn_add_relu_runs_its_convolution_once():
    shape = (2, 4, 4, 8, 8, 1, 1, 1, 0, 1)
    names = ("conv2d", "conv_bn", "conv_bn_relu", "conv_bn_add_relu")
    table = swap.KernelTable("float32", "c")
    for name in names:
        fam = kernels.get(name)
        conf = fam.search_space(shape, "float32", hardware.detect("cpu"))[0]
        table.add(name, shape, conf, fam.build(shape, "float32", conf, "c"))
    x, key = torch.randn(2, 8, 4, 4), "2x4x4x8x8x1x1x1x0x1"
    router, got, want = _routed_eval([kernels.get(n) for n in names], table, _InPlaceResidual(), x)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert dict(router.ran) == {("conv_bn_add_relu", key): 1} and not router.fell_back
    # the sum read after the pattern: computed then (its convolution again), and said so
    router, got, want = _routed_eval([kernels.get(n) for n in names], table, _InPlaceResidual(True), x)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert dict(router.ran) == {("conv_bn_add_relu", key): 1, ("conv2d", key): 1}
    assert dict(router.reused) == {("conv_bn_add_relu", key): 1}


def test_a_cold_shape_left_out_by_the_share_falls_back_saying_so(tmp_path):
    """A profiled shape of a chosen family that the kernels stage leaves out is in the run's
    table without a kernel and with the option that left it out; a tuned kernel takes its
    place, and a shape the profile never saw is still 'shape not tuned'."""
    import dataclasses

    from samples import sample_result

    from evaluator import config
    from evaluator.context import Context, Reporter

    r = dataclasses.replace(sample_result(), tuned=())
    assert "gemm" in r.hot_ops.selected
    cfg = config.build(model="bert-tiny", device="cpu", shape_share=0.9, max_shapes=3)
    ctx = Context(cfg, Reporter(), r.environment.hardware, r.environment, None, tmp_path)
    table = ctx.kernel_table(r)
    cold = "cold shape, left out by --shape-share 0.9 or --max-shapes 3"
    assert table.lookup("gemm", (256, 512, 128), {}) == (None, cold)
    table.add("gemm", (256, 128, 128), {}, lambda *a: None)  # the kernels stage's entry for a tuned shape
    assert table.lookup("gemm", (256, 128, 128), {})[0] is not None
    assert table.lookup("gemm", (1, 2, 3), {}) == (None, "shape not tuned")
