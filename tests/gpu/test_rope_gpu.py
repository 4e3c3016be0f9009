"""The rope family's variants on CUDA against PyTorch: GPT-NeoX's and Phi-3's partial
rotation of q and k read in place from the packed projection, Phi-2's sliced q, Cohere's
interleaved pairs and GPT-J's one tensor a call off its sin|cos table, at the widths of
the models that use them, fp16 and bf16, model and awkward sequence lengths; and the
rotary calls of real transformers models (GPT-NeoX, Phi-3, GPT-J) routed to them inside
CUDA-graph capture (GPT-J's with the host numbers its eager mask copies filled on the
device), every call counted, outputs matching."""

import pytest
import torch

from evaluator.measuring import bench
from evaluator import kernels
from evaluator.routing import router as swap, written
from evaluator.tuning import verify
from evaluator.kernels.rope import plan
from evaluator.results import parse_shape

FAM = kernels.get("rope")
DTYPES = ("float16", "bfloat16")
# (batch, seq, q_heads, kv_heads, head_dim, per_batch, rotary_dim, interleaved, q_row, q_head, k_row, k_head)
SHAPES = {
    "neox-1.4b": (4, 512, 16, 16, 128, 0, 32, 0, 6144, 384, 6144, 384),  # q, k in the packed qkv [b, s, h, 3d]
    "gptj-6b": (4, 512, 16, 0, 64, 0, 64, 2, 4096, 256, 0, 0),  # q[..., :64] of 256, pairs off the table
    "phi3-mini": (4, 509, 32, 32, 96, 0, 48, 0, 9216, 96, 9216, 96),  # half of each head, fused qkv_proj rows
    "phi-2": (4, 509, 32, 32, 32, 1, 32, 0, 2560, 80, 2560, 80),  # q[..., :32] of 80 sliced by the model
    "cohere": (2, 509, 32, 8, 128, 0, 128, 1),  # pairs, cos and sin per dim
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(SHAPES))
def test_rope_variants_match_pytorch_on_gpu(name, dtype, hw):
    shape = SHAPES[name]
    space = FAM.search_space(shape, dtype, hw)
    for cfg in space[:2]:
        res = verify.verify(FAM, shape, dtype, cfg, hw.target, "cuda", seeds=(0, 1))
        assert res.passed, (cfg, [c for c in res.cases if not c.passed])
    inputs = FAM.make_inputs(shape, dtype, "cuda", 0)
    out = FAM.build(shape, dtype, space[0], hw.target)(*inputs)
    rot = shape[6]
    for o, x in zip(out if isinstance(out, tuple) else (out,), inputs[: 2 if shape[3] else 1]):
        o = o.transpose(1, 2) if shape[3] else o
        assert torch.equal(o[..., rot:], x.view(o.shape)[..., rot:])  # the rest copied, bit for bit


# transformers class, config, the rope calls two layers make (GPT-J rotates k, then q)
MODELS = {
    "gpt_neox": ("GPTNeoXModel", {"rotary_pct": 0.25}, 2),
    "phi3": ("Phi3Model", {"partial_rotary_factor": 0.5, "num_key_value_heads": 2, "pad_token_id": 0}, 2),
    "gptj": ("GPTJModel", {"rotary_dim": 32}, 4),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_models_rotary_calls_run_in_tilelang_under_graph_capture_on_gpu(name, hw):
    import transformers

    cls, extra, calls = MODELS[name]
    config = getattr(transformers, cls.replace("Model", "Config"))(
        num_hidden_layers=2,
        hidden_size=256,
        num_attention_heads=4,
        intermediate_size=512,
        vocab_size=1000,
        max_position_embeddings=256,
        **extra,
    )  # the attention each transformers version supports: GPT-J has no SDPA path in 5.17
    model = getattr(transformers, cls)(config).cuda().half().eval()
    inputs = (torch.randint(0, 1000, (4, 128), device="cuda"),)
    table = swap.KernelTable("float16", hw.target)
    router = swap.Router([FAM], table, model=model)
    with torch.inference_mode(), router:
        model(*inputs)
    shapes = [k[1] for k in router.fell_back]
    assert len(shapes) == 1 and shapes[0], router.fell_back  # one shape, named
    shape = parse_shape(shapes[0])
    assert shape[6] < 64 and (shape[3] == 0) == (name == "gptj"), shape  # part of each head; GPT-J: one tensor
    cfg = FAM.search_space(shape, "float16", hw)[0]
    table.add("rope", shape, cfg, FAM.build(shape, "float16", cfg, hw.target))
    router.reset()
    e2e = bench.end_to_end(
        model,
        inputs,
        "cuda",
        4,
        router,
        dtype="float16",
        profiled_ms={},
        total_profiled_ms=1.0,
        op_ratios={},
        shares={},
        policy=bench.TimingPolicy(reps=5, max_seconds=1.0),
    )
    assert e2e.outputs_match, (e2e.error, e2e.rel_l2_err, e2e.rel_max_err)
    assert e2e.views[0].method == "cuda_graph", e2e.flags
    if not _captures(model, inputs):  # the model copies host numbers each pass (GPT-J's eager mask, transformers 5.x)
        assert any(f.startswith("graph captured with the numbers the model copies") for f in e2e.flags), e2e.flags
    # every call in TileLang; a partial rotation's outputs copied to the layout torch.cat returns, and said so
    copied = {"output copied to contiguous, as torch.cat returns it": calls} if shape[3] and shape[6] < shape[4] else {}
    ran = {(c.family, c.shape): (c.tilelang, c.fallback, c.notes) for c in e2e.calls if c.family == "rope"}
    assert ran == {("rope", shapes[0]): (calls, {}, copied)}, ran


def _captures(model, inputs) -> bool:
    """Whether the model, with no call routed, can be captured in a CUDA graph."""
    stream = torch.cuda.Stream()
    with torch.inference_mode(), torch.cuda.stream(stream):
        model(*inputs)  # warm-up off the capture, as CUDA graphs ask
    torch.cuda.synchronize()
    try:
        with torch.inference_mode(), torch.cuda.graph(torch.cuda.CUDAGraph()):
            model(*inputs)
    except RuntimeError:
        return False
    return True


def test_views_stay_views_on_gpu():
    # the packed qkv's q and k, 16-byte aligned, reach the kernel as the views they are
    b, s, h, d = 2, 64, 4, 64
    n = b * s * h * 3 * d
    base = torch.randn(n + 8, device="cuda", dtype=torch.float16)
    partial = written.RopeForm(partial=True)
    angle = torch.randn(1, s, 8, device="cuda")
    cos, sin = torch.cat((angle, angle), -1).cos().half(), torch.cat((angle, angle), -1).sin().half()
    q, k, _ = base[:n].view(b, s, h, 3 * d).transpose(1, 2).chunk(3, dim=-1)
    found = plan(q, k, cos, sin, partial)
    assert found.notes == () and found.inputs[1].data_ptr() == k.data_ptr() and len(found.shape) == 12
    # the same views 2 bytes off a 16-byte boundary are copied (the kernel's vector loads
    # need alignment), and said
    q, k, _ = base[1 : n + 1].view(b, s, h, 3 * d).transpose(1, 2).chunk(3, dim=-1)
    off = plan(q, k, cos, sin, partial)
    assert off.notes == ("input copied to contiguous",) and len(off.shape) == 8  # dense: no strides in the shape
