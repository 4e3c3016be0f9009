"""The operator router's bookkeeping: kernel lookup with its fallback reasons, kernel
parameters built on demand, call counts and coverage. Family routes are tested with
their families (tests/kernels/); real third-party models in tests/test_e2e_models.py."""

import torch

from evaluator import hardware, kernels, swap
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
    counts = [CallCount("gemm", "a", tilelang=3, fallback={"x": 1}, profiled_ms=4.0),
              CallCount("gemm", "b", tilelang=0, fallback={"shape not tuned": 2}, profiled_ms=2.0),
              CallCount("softmax", "c", tilelang=1, profiled_ms=0.0)]
    assert abs(swap.coverage(counts, 10.0) - 0.3) < 1e-9
    assert swap.coverage(counts, 0.0) == 0.0


def test_derived_weights_are_made_once_and_remade_after_an_update():
    w = torch.nn.Parameter(torch.randn(3, 5))
    made = []

    def make(t):
        made.append(1)
        return t.t().contiguous()

    a = swap.DERIVED.get(w, "t", make)
    b = swap.DERIVED.get(w, "t", make)
    assert a is b and len(made) == 1
    with torch.no_grad():
        w.add_(1)
    c = swap.DERIVED.get(w, "t", make)
    assert len(made) == 2 and torch.equal(c, w.detach().t())
