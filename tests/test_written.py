"""Written-out norms and rotary embeddings: found by what they compute in transformers'
own LlamaRMSNorm and apply_rotary_pos_emb (llama's, GPT-NeoX's and Phi-3's partial
rotation, Cohere's pairs, GPT-J's one tensor a call), not found in look-alikes that
compute something else; real models' rotary calls run in TileLang under the router,
every call counted, outputs matching; the profile names their shapes; and the two
context managers leave the model as it was."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from evaluator import kernels
from evaluator.profiling import profile as profiling
from evaluator.routing import router as swap, written
from evaluator.models import load_model
from evaluator.results import parse_shape
from tests.fixtures import hf_models
from tests.hardware import CPU


class _Norm(torch.nn.Module):
    """A user's RMSNorm, written in one of the ways the look-alikes below get wrong."""

    def __init__(self, cols, eps=1e-6, kind="rms"):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(cols) + 0.5)
        self.eps, self.kind = eps, kind

    def forward(self, x):
        h = x.float()
        if self.kind == "rms":
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        elif self.kind == "eps_outside":  # eps added after the square root
            h = h / (h.pow(2).mean(-1, keepdim=True).sqrt() + self.eps)
        elif self.kind == "layernorm":  # the mean taken out first
            h = h - h.mean(-1, keepdim=True)
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        elif self.kind in ("gemma", "plus_two"):  # weight offset by one (Gemma's), or by two (nobody's)
            off = 1.0 if self.kind == "gemma" else 2.0
            return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps) * (off + self.weight)).to(x.dtype)
        return self.weight * h.to(x.dtype)


def test_transformers_llama_rmsnorms_are_found_with_their_eps():
    model, _ = hf_models.llama()
    found = written.find(model)
    layers = model.config.num_hidden_layers
    assert len(found) == 2 * layers + 1  # input and post-attention norm per layer, and the final one
    assert {w.path for w in found} >= {"layers.0.input_layernorm", "layers.0.post_attention_layernorm", "norm"}
    assert {(w.cols, w.eps) for w in found} == {(model.config.hidden_size, model.config.rms_norm_eps)}


@pytest.mark.parametrize("eps", [1e-6, 1e-5])
def test_eps_is_read_off_the_module_and_checked_by_a_row_it_decides(eps):
    (w,) = written.find(torch.nn.Sequential(_Norm(64, eps)))
    assert w.eps == eps and w.cols == 64


class _Fixed(_Norm):
    """Says eps 1e-6 and computes with 1e-5: routed at 1e-6, it would read another value."""

    def forward(self, x):
        h = x.float()
        return self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype)


def test_an_eps_attribute_the_forward_does_not_use_is_not_believed():
    assert written.find(torch.nn.Sequential(_Fixed(64, 1e-6))) == ()


@pytest.mark.parametrize("kind", ["eps_outside", "plus_two"])
def test_look_alikes_that_compute_something_else_are_not_found(kind):
    assert written.find(torch.nn.Sequential(_Norm(64, kind=kind))) == ()


class _LayerNorm(torch.nn.Module):
    """A LayerNorm written out, with or without a bias (Cohere's has none)."""

    def __init__(self, cols, eps=1e-5, bias=False):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(cols) + 0.5)
        self.bias = torch.nn.Parameter(torch.randn(cols)) if bias else None
        self.variance_epsilon = eps

    def forward(self, x):
        h = x.float()
        h = h - h.mean(-1, keepdim=True)
        h = self.weight.float() * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))
        return (h if self.bias is None else h + self.bias.float()).to(x.dtype)


@pytest.mark.parametrize("bias", [False, True])
def test_a_written_out_layernorm_is_layernorms_call_routed_or_counted(bias):
    model = torch.nn.Sequential(_LayerNorm(64, 1e-5, bias))
    x = torch.randn(2, 4, 64)
    (w,) = written.find(model)
    assert (w.family, w.cols, w.eps, w.offset) == ("layernorm", 64, 1e-5, 0.0)
    with torch.inference_mode():
        want = model(x)
    fam = kernels.get("layernorm")
    conf = fam.search_space((8, 64), "float32", CPU)[0]
    table = swap.KernelTable("float32", "c")
    table.add("layernorm", (8, 64), conf, fam.build((8, 64), "float32", conf, "c"))
    router = swap.Router([fam], table, model=model)
    with torch.inference_mode(), router:
        got = model(x)
    assert router.ran[("layernorm", "8x64")] == 1 and not router.fell_back
    torch.testing.assert_close(got, want, rtol=2e-5, atol=2e-5)
    # not chosen: a router of another family counts it at its shape and runs it as written
    watcher = swap.Router([kernels.get("gemm")], table, model=model).watching([fam])
    with torch.inference_mode(), watcher:
        again = model(x)
    assert watcher.fell_back[("layernorm", "8x64")] == {swap.Router.NOT_CHOSEN: 1}
    assert torch.equal(again, want)


def test_gemma_norms_scale_by_one_plus_weight_and_route_with_that_weight():
    model, (ids,) = hf_models.gemma()
    found = written.find(model)
    assert len(found) == 5 and {w.offset for w in found} == {1.0}
    with torch.inference_mode():
        expected = model(ids).last_hidden_state
        with written.as_calls(model):
            got = model(ids).last_hidden_state
    assert torch.allclose(got, expected, rtol=1e-4, atol=1e-4)
    assert written.find(torch.nn.Sequential(_Norm(64, kind="gemma")))[0].offset == 1.0


def test_torch_norms_and_modules_with_more_parameters_are_left_to_their_functions():
    m = torch.nn.Sequential(torch.nn.RMSNorm(32, eps=1e-6), torch.nn.LayerNorm(32), torch.nn.Linear(32, 32))
    assert written.find(m) == ()


def test_as_calls_is_one_rms_norm_call_and_both_managers_restore_the_forward():
    m = torch.nn.Sequential(_Norm(48))
    norm = m[0]
    x = torch.randn(3, 5, 48)
    expected = m(x)
    seen = []

    class Watch(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    with written.as_calls(m), Watch():
        got = m(x)
    computed = [f for f in seen if getattr(f, "__name__", "") != "__get__"]  # not x.shape, x.dtype
    assert computed == [F.rms_norm] and torch.allclose(got, expected, atol=1e-5, rtol=1e-5)
    assert "forward" not in norm.__dict__
    own = norm.forward
    norm.forward = lambda t: own(t) * 1.0  # an instance forward someone else set stays theirs
    before = norm.__dict__["forward"]
    with written.marked(m):
        m(x)
    assert norm.__dict__["forward"] is before


def test_the_profile_gives_a_written_norm_its_calls_and_shape():
    m = load_model(
        "hf:LlamaModel,num_hidden_layers=2,hidden_size=64,intermediate_size=128,num_attention_heads=4,"
        "num_key_value_heads=2,max_position_embeddings=64,vocab_size=128",
        batch_size=2,
        seq_len=16,
    )
    hot = profiling.hot_ops(m, families=("rmsnorm",), iters=1)
    fams = {o.family: o for o in hot.ops}
    rms = fams["rmsnorm"]
    assert (
        rms.shapes == ("32x64",) and rms.calls == 5 and {"aten::rsqrt", "aten::pow", "aten::mean"} <= set(rms.aten_ops)
    )
    assert all("aten::rsqrt" not in o.aten_ops for o in hot.ops if o.family != "rmsnorm")
    # the four norms after a residual add fuse with it, the first one (on the embeddings) does not
    assert [(fu.family, fu.shapes, fu.calls) for fu in hot.fusions] == [("add_rmsnorm", ("32x64",), 4)]


@pytest.mark.slow
def test_a_router_without_the_model_or_without_an_rmsnorm_family_leaves_written_norms_as_written():
    model, (ids,) = hf_models.llama()
    table = swap.KernelTable("float32", "c")
    for fams, with_model in ([("rmsnorm",), False], [("gemm",), True]):
        router = swap.Router([kernels.get(f) for f in fams], table, model=model if with_model else None)
        with torch.inference_mode(), router:
            model(ids)
        assert not any(f == "rmsnorm" for f, _ in router.fell_back), router.fell_back
    router = swap.Router([kernels.get("rmsnorm")], table, model=model)
    with torch.inference_mode(), router:
        model(ids)
    assert sum(router.fell_back[("rmsnorm", "32x64")].values()) == 5  # no kernel in the table: counted


class _NormedHeads(torch.nn.Module):
    """Gemma 3's order: q's heads normed as the transposed view of its projection, then SDPA."""

    def __init__(self, heads=2, dim=16):
        super().__init__()
        self.heads, self.norm = heads, _Norm(dim)

    def forward(self, x):  # x [B, S, heads * dim]
        b, s, _ = x.shape
        q = self.norm(x.view(b, s, self.heads, -1).transpose(1, 2))
        return q, F.scaled_dot_product_attention(q, q, q)


def test_a_norm_the_router_does_not_take_runs_as_written_in_its_inputs_layout():
    model, x = _NormedHeads(), torch.randn(2, 8, 32)
    with torch.inference_mode():
        want, _ = model(x)
    assert want.stride() == (256, 16, 32, 1)  # the written norm keeps the transposed view's layout
    router = swap.Router(
        [kernels.get("rmsnorm"), kernels.get("attention")], swap.KernelTable("float32", "c"), model=model
    )
    with torch.inference_mode(), router:
        got, _ = model(x)
    assert sum(router.fell_back[("rmsnorm", "32x16")].values()) == 1  # no kernel: counted, run as written
    assert got.stride() == want.stride() and torch.equal(got, want)
    # so the attention after it sees q, k and v as the model gives them: heads of a [B, S, 2, D] buffer
    assert [s for f, s in router.fell_back if f == "attention"] == ["2x2x8x8x16x0x2x2x2"]


def test_a_routed_norm_hands_on_its_result_in_the_layout_the_written_norm_gives():
    model, x = _NormedHeads(), torch.randn(2, 8, 32)
    with torch.inference_mode():
        want, _ = model(x)
    fam, conf = kernels.get("rmsnorm"), {"block_rows": 4, "buffered": True, "eps": 1e-6}
    table = swap.KernelTable("float32", "c")
    table.add("rmsnorm", (32, 16), conf, fam.build((32, 16), "float32", conf, "c"))
    router = swap.Router([fam, kernels.get("attention")], table, model=model)
    with torch.inference_mode(), router:
        got, _ = model(x)
    assert router.ran[("rmsnorm", "32x16")] == 1
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want)
    # the attention after it sees q, k and v at the pitch the profile saw, not contiguous
    assert [s for f, s in router.fell_back if f == "attention"] == ["2x2x8x8x16x0x2x2x2"]


def test_a_norm_called_on_another_dtype_than_its_weight_is_counted_and_runs_as_written():
    # Mamba's last norm in float16: its input is the float32 residual stream
    model = torch.nn.Sequential(_Norm(16)).half()
    x = torch.randn(4, 16)
    with torch.inference_mode():
        want = model(x)
    router = swap.Router([kernels.get("rmsnorm")], swap.KernelTable("float16", "c"), model=model)
    with torch.inference_mode(), router:
        got = model(x)
    assert router.fell_back[("rmsnorm", "")] == {"dtype float32 (kernels are float16)": 1}
    assert got.dtype == want.dtype == torch.float32 and torch.equal(got, want)


# ---------------------------------------------------------------- rotary embeddings


def _rope_module(fn_source: str):
    """A module of a user's, as a modeling file is: a rotary function (its source given)
    and an attention block that calls it by its global name."""
    import sys
    import types

    mod = types.ModuleType("user_rope_model")
    exec(
        fn_source
        + """
import torch
class Attention(torch.nn.Module):
    def forward(self, q, k, cos, sin):
        return apply_rope(q, k, cos, sin)
""",
        mod.__dict__,
    )
    mod.Attention.__module__ = mod.__name__
    sys.modules[mod.__name__] = mod
    return mod


_HF_ROPE = """
import torch
def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)
def apply_rope(q, k, cos, sin, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)
"""


def test_transformers_llama_rotary_embedding_is_found_and_patched_only_while_inside():
    model, (ids,) = hf_models.llama()
    (rope,) = written.find_rotary(model)
    assert rope.name == "apply_rotary_pos_emb" and rope.module.__name__.endswith("modeling_llama")
    before = getattr(rope.module, rope.name)
    with written.as_calls(model):
        assert getattr(rope.module, rope.name) is not before
    with written.marked(model):
        assert getattr(rope.module, rope.name) is not before
    assert getattr(rope.module, rope.name) is before
    assert written.find_rotary(hf_models.bert()[0]) == ()  # no rotary embedding: nothing found


@pytest.mark.parametrize(
    "body",
    [
        # interleaved pairs turned the other way, (x1, -x0): the rotation by minus the angle
        (
            "    r = torch.stack((q[..., 1::2], -q[..., ::2]), -1).flatten(-2)\n"
            "    s = torch.stack((k[..., 1::2], -k[..., ::2]), -1).flatten(-2)\n"
            "    return q * cos.unsqueeze(1) + r * sin.unsqueeze(1), k * cos.unsqueeze(1) + s * sin.unsqueeze(1)\n"
        ),
        # pairs whose angles are cos's first half repeated (GLM's): not cos and sin as given
        (
            "    cos = cos[..., : cos.shape[-1] // 2].repeat_interleave(2, dim=-1).unsqueeze(1)\n"
            "    sin = sin[..., : sin.shape[-1] // 2].repeat_interleave(2, dim=-1).unsqueeze(1)\n"
            "    r = torch.stack((-q[..., 1::2], q[..., ::2]), -1).flatten(-2)\n"
            "    s = torch.stack((-k[..., 1::2], k[..., ::2]), -1).flatten(-2)\n"
            "    return q * cos + r * sin, k * cos + s * sin\n"
        ),
        # cos and sin swapped
        "    return (q * sin.unsqueeze(1) + rotate_half(q) * cos.unsqueeze(1),\n"
        "            k * sin.unsqueeze(1) + rotate_half(k) * cos.unsqueeze(1))\n",
        # only q rotated
        "    return q * cos.unsqueeze(1) + rotate_half(q) * sin.unsqueeze(1), k\n",
    ],
)
def test_rotary_look_alikes_are_not_found(body):
    src = _HF_ROPE.split("def apply_rope")[0] + "def apply_rope(q, k, cos, sin, unsqueeze_dim=1):\n" + body
    mod = _rope_module(src)
    assert written.find_rotary(torch.nn.Sequential(mod.Attention())) == ()


def _rope_case(b, s, hq, hk, d):
    """cos and sin of random angles for s tokens (halves form), and a kernel table holding
    the rope kernel at that shape."""
    angle = torch.randn(1, s, d // 2)
    cos, sin = torch.cat((angle, angle), -1).cos(), torch.cat((angle, angle), -1).sin()
    table = swap.KernelTable("float32", "c")
    shape = (b, s, hq, hk, d, 0)
    table.add("rope", shape, {}, kernels.get("rope").build(shape, "float32", {"block_tokens": 4}, "c"))
    return cos, sin, table


def test_a_users_rotary_function_routes_and_a_scan_runs_it_as_written():
    mod = _rope_module(_HF_ROPE)
    model, original = torch.nn.Sequential(mod.Attention()), mod.apply_rope
    assert [r.name for r in written.find_rotary(model)] == ["apply_rope"]
    b, s, hq, hk, d = 2, 16, 4, 2, 32
    q = torch.randn(b, s, hq * d).view(b, s, hq, d).transpose(1, 2)
    k = torch.randn(b, s, hk * d).view(b, s, hk, d).transpose(1, 2)
    cos, sin, table = _rope_case(b, s, hq, hk, d)
    expected = model[0](q, k, cos, sin)
    fam = kernels.get("rope")
    router = swap.Router([fam], table, model=model)
    with torch.inference_mode(), router:
        got = model[0](q, k, cos, sin)
    assert router.ran[("rope", "2x16x4x2x32x0")] == 1
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
    scan = swap.Router([fam], table, model=model, scan=True)
    with torch.inference_mode(), scan:
        again = model[0](q, k, cos, sin)
    assert not scan.ran and all(torch.equal(a, e) for a, e in zip(again, expected))  # as written, to the bit
    # a call that gives more than the four tensors (another unsqueeze_dim) runs as written
    router.reset()
    with torch.inference_mode(), router:
        mod.apply_rope(q.transpose(1, 2), k.transpose(1, 2), cos, sin, 2)
    assert not router.ran and not router.fell_back
    assert mod.apply_rope is original  # put back


def test_a_rotary_call_giving_its_defaults_by_name_is_routed_and_marked():
    # ModernBERT calls apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1): the default, so the kernel's call
    mod = _rope_module(_HF_ROPE)
    model = torch.nn.Sequential(mod.Attention())
    b, s, hq, hk, d = 2, 8, 2, 1, 16
    q, k = torch.randn(b, hq, s, d), torch.randn(b, hk, s, d)
    cos, sin, table = _rope_case(b, s, hq, hk, d)
    fam = kernels.get("rope")
    router = swap.Router([fam], table, model=model)
    with torch.inference_mode(), router:
        expected = mod.apply_rope(q, k, cos, sin)
        for extra, named in (((), {"unsqueeze_dim": 1}), ((1,), {})):
            got = mod.apply_rope(q, k, cos, sin, *extra, **named)
            for g, e in zip(got, expected):
                torch.testing.assert_close(g, e)
        mod.apply_rope(q.transpose(1, 2), k.transpose(1, 2), cos, sin, unsqueeze_dim=2)  # not the default
    assert router.ran[("rope", "2x8x2x1x16x0")] == 3 and not router.fell_back
    seen = []
    with written.marked(model, rope_shape=lambda q, k, cos, sin, form: seen.append(q.shape) or (1,)):
        mod.apply_rope(q, k, cos, sin, unsqueeze_dim=1)
        mod.apply_rope(q, k, cos, sin, 1)
        mod.apply_rope(q.transpose(1, 2), k.transpose(1, 2), cos, sin, unsqueeze_dim=2)
    assert seen == [q.shape, q.shape]


def test_the_profile_gives_the_rotary_embedding_its_calls_and_shape():
    m = load_model(
        "hf:LlamaModel,num_hidden_layers=2,hidden_size=64,intermediate_size=128,num_attention_heads=4,"
        "num_key_value_heads=2,max_position_embeddings=64,vocab_size=128",
        batch_size=2,
        seq_len=16,
    )
    hot = profiling.hot_ops(m, families=("rope",), iters=1)
    rope = {o.family: o for o in hot.ops}["rope"]
    assert rope.shapes == ("2x16x4x2x16x0",) and rope.calls == 2 and {"aten::cat", "aten::neg"} <= set(rope.aten_ops)
    assert all("aten::neg" not in o.aten_ops for o in hot.ops if o.family != "rope")


_PAIRS = """
import torch
def apply_rope(q, k, cos, sin, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    r = torch.stack((-q[..., 1::2], q[..., ::2]), -1).flatten(-2)
    s = torch.stack((-k[..., 1::2], k[..., ::2]), -1).flatten(-2)
    return q * cos + r * sin, k * cos + s * sin
"""
# Rotates the last cos.shape[-1] dims, not the first: the same as llama's at full width.
_LAST_PART = (
    _HF_ROPE.split("def apply_rope")[0]
    + """
def apply_rope(q, k, cos, sin, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    n = cos.shape[-1]
    rq = q[..., q.shape[-1] - n:] * cos + rotate_half(q[..., q.shape[-1] - n:]) * sin
    rk = k[..., k.shape[-1] - n:] * cos + rotate_half(k[..., k.shape[-1] - n:]) * sin
    return torch.cat((q[..., : q.shape[-1] - n], rq), -1), torch.cat((k[..., : k.shape[-1] - n], rk), -1)
"""
)
_ONE = """
import torch
def rotate_every_two(x):
    return torch.stack((-x[:, :, :, 1::2], x[:, :, :, ::2]), dim=-1).flatten(-2)
def apply_rope(tensor, {a}, {b}):
    sin = torch.repeat_interleave(sin[:, :, None, :], 2, 3)
    cos = torch.repeat_interleave(cos[:, :, None, :], 2, 3)
    return (tensor * cos) + ({turn}(tensor) * sin)
"""


def _one_module(a="sin", b="cos", turn="rotate_every_two"):
    """A module of GPT-J's kind: its one-tensor function, and an attention that calls it on k, then q."""
    import sys
    import types

    mod = types.ModuleType("user_rope_one")
    exec(
        _ONE.format(a=a, b=b, turn=turn)
        + _HF_ROPE.split("def apply_rope")[0]
        + f"""
class Attention(torch.nn.Module):
    def forward(self, q, k, sin, cos):
        return apply_rope(k, {a}, {b}), apply_rope(q, {a}, {b})
""",
        mod.__dict__,
    )
    mod.Attention.__module__ = mod.__name__
    sys.modules[mod.__name__] = mod
    return mod


def test_each_rotary_form_is_found_with_what_it_computes():
    forms = {
        src: written.find_rotary(torch.nn.Sequential(_rope_module(src).Attention()))
        for src in (_HF_ROPE, _PAIRS, _LAST_PART)
    }
    assert [r.form for r in forms[_HF_ROPE]] == [written.RopeForm()]
    assert [r.form for r in forms[_PAIRS]] == [written.RopeForm(interleaved=1)]
    # the last part rotated is llama's rotation at full width, and no partial one
    assert [r.form for r in forms[_LAST_PART]] == [written.RopeForm(partial=False)]
    (gptj,) = written.find_rotary(torch.nn.Sequential(_one_module().Attention()))
    assert gptj.form == written.RopeForm(single=True, interleaved=2, sin_first=True)
    (swapped,) = written.find_rotary(torch.nn.Sequential(_one_module("cos", "sin").Attention()))
    assert swapped.form.single and not swapped.form.sin_first
    # one tensor a call rotated by halves: not GPT-J's, not found
    assert written.find_rotary(torch.nn.Sequential(_one_module(turn="rotate_half").Attention())) == ()


def test_a_function_that_rotates_another_part_is_not_routed_on_a_narrower_cos():
    mod = _rope_module(_LAST_PART)
    model = torch.nn.Sequential(mod.Attention())
    b, s, h, d = 2, 8, 2, 16
    q = torch.randn(b, s, h * d).view(b, s, h, d).transpose(1, 2)
    k = torch.randn(b, s, h * d).view(b, s, h, d).transpose(1, 2)
    angle = torch.randn(1, s, 4)
    cos, sin = torch.cat((angle, angle), -1).cos(), torch.cat((angle, angle), -1).sin()
    expected = model[0](q, k, cos, sin)
    router = swap.Router([kernels.get("rope")], swap.KernelTable("float32", "c"), model=model)
    with torch.inference_mode(), router:
        got = model[0](q, k, cos, sin)
    assert not router.ran and list(router.fell_back) == [("rope", "")]
    assert "narrower" in next(iter(router.fell_back[("rope", "")]))
    assert all(torch.equal(g, e) for g, e in zip(got, expected))  # as written


# ---------------------------------------------------------------- real models' rotary calls

_TINY = {
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "intermediate_size": 128,
    "vocab_size": 128,
    "max_position_embeddings": 64,
}  # attention as each transformers version builds it: 5.17 refuses SDPA for GPT-J and CodeGen
# transformers class, config, and the calls two layers make (GPT-J and CodeGen rotate k, then q)
MODELS = {
    "gpt_neox": ("GPTNeoXModel", {"rotary_pct": 0.25}, 2),  # a quarter of q, k inside the packed qkv
    "phi3": ("Phi3Model", {"partial_rotary_factor": 0.5, "num_key_value_heads": 2, "pad_token_id": 0}, 2),
    "gptj": ("GPTJModel", {"rotary_dim": 8}, 4),  # 8 of 16 dims, pairs, one tensor a call
    "llama": ("LlamaModel", {"num_key_value_heads": 2}, 2),
    "phi": ("PhiModel", {"partial_rotary_factor": 0.5}, 2),  # q[..., :8] sliced by the model
    "codegen": ("CodeGenModel", {"rotary_dim": 8}, 4),
    "cohere": ("CohereModel", {"num_key_value_heads": 2}, 2),  # pairs, cos and sin per dim
    "roformer": ("RoFormerModel", {}, 2),  # a static method on one sin|cos table, pairs
}


def _model(name: str, batch: int = 2, seq: int = 16):
    import transformers

    cls, extra, _ = MODELS[name]
    torch.manual_seed(0)
    config = getattr(transformers, cls.replace("Model", "Config"))(**_TINY, **extra)
    model = getattr(transformers, cls)(config).eval()
    ids = torch.randint(0, 100, (batch, seq), generator=torch.Generator().manual_seed(0))
    return model, ids


def _routed_shapes(model, ids) -> dict:
    """The rope shapes a router with no kernels sees, with their calls."""
    router = swap.Router([kernels.get("rope")], swap.KernelTable("float32", "c"), model=model)
    with torch.inference_mode(), router:
        model(ids)
    assert set(router.fell_back) == {k for k in router.fell_back if k[1]}, router.fell_back  # each call has a shape
    return {k[1]: sum(v.values()) for k, v in router.fell_back.items()}


def _route_with(model, ids, table):
    with torch.inference_mode():
        expected = model(ids).last_hidden_state
        router = swap.Router([kernels.get("rope")], table, model=model)
        with router:
            got = model(ids).last_hidden_state
    return router, got, expected


@pytest.mark.parametrize("name", list(MODELS))
def test_real_models_rotary_calls_run_in_tilelang_each_counted(name):
    model, ids = _model(name)
    shapes = _routed_shapes(model, ids)
    assert len(shapes) == 1 and sum(shapes.values()) == MODELS[name][2], shapes
    fam = kernels.get("rope")
    table = swap.KernelTable("float32", "c")
    for text in shapes:
        shape = parse_shape(text)
        table.add(
            "rope",
            shape,
            fam.search_space(shape, "float32", CPU)[0],
            fam.build(shape, "float32", fam.search_space(shape, "float32", CPU)[0], "c"),
        )
    router, got, expected = _route_with(model, ids, table)
    assert dict(router.ran) == {("rope", t): n for t, n in shapes.items()} and not router.fell_back
    # q and k read where they lie: no input copied; a partial rotary's output comes back
    # contiguous, as the model's torch.cat returns it
    copied = {n for c in router.notes.values() for n in c}
    assert copied <= (
        {"output copied to contiguous, as torch.cat returns it"} if name in ("gpt_neox", "phi3") else set()
    ), router.notes
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    fam_shape = parse_shape(next(iter(shapes)))
    if name in ("gpt_neox", "phi3"):
        assert fam_shape[6] < fam_shape[4]  # a part rotated, the rest passed through
    if name in ("gptj", "codegen"):
        assert fam_shape[3] == 0 and fam_shape[7] == 2  # one tensor a call, pairs by GPT-J's table


def test_roformer_rotating_the_value_too_falls_back_saying_so_and_runs_as_written():
    import transformers

    torch.manual_seed(0)
    config = transformers.RoFormerConfig(**_TINY, rotary_value=True)
    model = transformers.RoFormerModel(config).eval()
    ids = torch.randint(0, 100, (2, 16), generator=torch.Generator().manual_seed(0))
    router, got, expected = _route_with(model, ids, swap.KernelTable("float32", "c"))
    assert not router.ran and sum(sum(v.values()) for v in router.fell_back.values()) == 2
    assert all("value rotated too" in why for v in router.fell_back.values() for why in v)
    assert torch.equal(got, expected)


def test_gpt_j_scan_runs_the_one_tensor_function_as_written():
    model, ids = _model("gptj")
    (rope,) = written.find_rotary(model)
    assert rope.name == "apply_rotary_pos_emb" and rope.form.single
    with torch.inference_mode():
        expected = model(ids).last_hidden_state
        scan = swap.Router([kernels.get("rope")], swap.KernelTable("float32", "c"), model=model, scan=True)
        with scan:
            again = model(ids).last_hidden_state
    assert not scan.ran and torch.equal(again, expected)


@pytest.mark.parametrize(
    "spec, shape, calls",
    [
        (
            (
                "hf:GPTNeoXModel,num_hidden_layers=2,hidden_size=64,intermediate_size=128,num_attention_heads=4,"
                "rotary_pct=0.25,max_position_embeddings=64,vocab_size=128"
            ),
            "2x16x4x4x16x0x4x0x192x48x192x48",
            2,
        ),
        (
            "hf:GPTJModel,n_layer=2,n_embd=64,n_head=4,rotary_dim=8,n_positions=64,vocab_size=128",
            "2x16x4x0x8x0x8x2x64x16x0x0",
            4,
        ),
        (
            (
                "hf:Phi3Model,num_hidden_layers=2,hidden_size=64,intermediate_size=128,num_attention_heads=4,"
                "num_key_value_heads=2,partial_rotary_factor=0.5,max_position_embeddings=64,vocab_size=128,pad_token_id=0"
            ),
            "2x16x4x2x16x0x8x0x128x16x128x16",
            2,
        ),
    ],
    ids=["gpt_neox", "gptj", "phi3"],
)
def test_the_profile_names_partial_and_interleaved_rotary_shapes(spec, shape, calls):
    m = load_model(spec, batch_size=2, seq_len=16)
    hot = profiling.hot_ops(m, families=("rope",), iters=1)
    rope = {o.family: o for o in hot.ops}["rope"]
    assert rope.shapes == (shape,) and rope.calls == calls and hot.selected == ("rope",)
    assert "aten::mul" in rope.aten_ops


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt_neox", "gptj"])
def test_tuned_and_verified_rotary_kernels_route_the_model(name):
    from evaluator.tuning import search as tuning, verify

    model, ids = _model(name)
    fam = kernels.get("rope")
    table = swap.KernelTable("float32", "c")
    for text in _routed_shapes(model, ids):
        shape = parse_shape(text)
        tk, kernel = tuning.tune(fam, shape, "float32", CPU, budget_s=20, fine_rounds=0)
        res = verify.verify(fam, shape, "float32", tk.config, "c", "cpu")
        assert res.passed and len(res.cases) == 4, [c for c in res.cases if not c.passed]
        table.add("rope", shape, tk.config, kernel, verified=res.passed)
    router, got, expected = _route_with(model, ids, table)
    assert sum(router.ran.values()) == MODELS[name][2] and not router.fell_back
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_a_written_out_layernorm_is_profiled_as_layernorm():
    from evaluator.models import LoadedModel
    from evaluator.results import ModelSpec

    model = LoadedModel(
        ModelSpec("written-ln", "file", 2, None, "float32", 0, "x"),
        torch.nn.Sequential(_LayerNorm(64)).eval(),
        (torch.randn(2, 4, 64),),
        "cpu",
    )
    hot = profiling.hot_ops(model, iters=3)
    (ln,) = [o for o in hot.ops if o.family == "layernorm"]
    assert ln.shapes == ("8x64",) and ln.calls == 1
