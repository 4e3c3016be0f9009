"""The kernel registry: importing the package registers every family module in it, every
registered family is a `KernelFamily` with usable metadata, aten ops map to the family
that covers them, and a name or an aten op can be registered only once.

In: the registry as imported. Out: pass/fail. Nothing here compiles a kernel.
"""

from __future__ import annotations

import pkgutil

import pytest
import torch

from evaluator import kernels
from evaluator.routing import written
from evaluator.errors import KernelError, UnknownFamilyError
from evaluator.kernels import REGISTRY, family_for_aten, get, register, unregister
from evaluator.kernels.base import KernelFamily
from tests.hardware import CPU, H200


def test_expected_families_registered():
    assert {"gemm", "softmax", "layernorm", "rmsnorm"} <= set(REGISTRY)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_family_satisfies_protocol(name):
    fam = REGISTRY[name]
    assert isinstance(fam, KernelFamily)
    assert fam.name == name and fam.title
    assert isinstance(fam.aten_ops, frozenset) and all(op.startswith("aten::") for op in fam.aten_ops)
    # a family with no aten op of its own (a fused variant) names the one whose shapes it
    # takes, or is found in the model by what it computes (evaluator.routing.written: rope)
    assert fam.aten_ops or (fam.profile_family != name and fam.profile_family in REGISTRY) or name in written.FAMILIES
    shape = fam.standard_shapes("cpu")[0]
    # Trailing layout sizes may be left out (conv2d's nchw, attention's row pitches).
    assert len(fam.shape_names) - fam.optional_dims <= len(shape) <= len(fam.shape_names)
    inputs = fam.make_inputs(shape, "float32", "cpu", 0)
    ref = fam.reference(*inputs)
    # one tensor, or a tuple where the calls a fused kernel replaces return several (add_layernorm)
    refs = ref if isinstance(ref, tuple) else (ref,)
    assert refs and all(isinstance(r, torch.Tensor) and torch.isfinite(r).all() for r in refs)
    assert fam.flops(shape) > 0 and fam.bytes(shape, "float32") > 0
    assert fam.bytes(shape, "float16") < fam.bytes(shape, "float32")
    for dtype in ("float32", "float16", "bfloat16"):
        atol, rtol = fam.tolerance(dtype)
        assert 0 < atol < 1 and 0 < rtol < 1
    awk = fam.awkward_shape(shape)
    # Some dimensions cannot be awkward (attention's head dim feeds the tensor cores,
    # flags and strides are small ints): families name the ones that can.
    dims = fam.awkward_dims
    assert len(awk) == len(shape) and all(awk[fam.shape_names.index(n)] % 16 for n in dims)
    shapes = fam.awkward_shapes(shape)
    if fam.awkward_kept:  # the last keeps those dims at the model's size, the others awkward
        *shapes, last = shapes
        at = fam.shape_names.index
        assert all(last[at(n)] == shape[at(n)] for n in fam.awkward_kept)
        assert all(last[at(n)] % 16 for n in dims if n not in fam.awkward_kept)
    assert shapes[0] == awk and all(s[fam.shape_names.index(n)] % 16 for s in shapes for n in dims)
    # With awkward_align: above, aligned, below, aligned below; without: above, below.
    if fam.awkward_align:
        assert all(s[fam.shape_names.index(n)] % fam.awkward_align == 0 for s in shapes[1::2] for n in dims)
    lower = shapes[2:] if fam.awkward_align else shapes[1:]
    assert all(s[fam.shape_names.index(n)] <= shape[fam.shape_names.index(n)] for s in lower for n in dims)
    cpu_space = fam.search_space(shape, "float32", CPU)
    assert 1 <= len(cpu_space) <= 4 and all(isinstance(c, dict) for c in cpu_space)
    gpu_space = fam.search_space(fam.standard_shapes("cuda")[1], "float16", H200)
    assert 1 <= len(gpu_space) <= 28  # gemm's: 24 and four Hopper ping-pong tiles
    for device in ("cpu", "cuda"):
        assert 3 <= len(fam.standard_shapes(device)) <= 5


def test_family_for_aten():
    assert family_for_aten("aten::linear").name == "gemm"
    assert family_for_aten("aten::addmm").name == "gemm"
    assert family_for_aten("aten::softmax").name == "softmax"
    assert family_for_aten("aten::_softmax").name == "softmax"
    assert family_for_aten("aten::layer_norm").name == "layernorm"
    assert family_for_aten("aten::native_layer_norm").name == "layernorm"
    assert family_for_aten("aten::rms_norm").name == "rmsnorm"
    assert family_for_aten("aten::gelu") is None
    # a matmul by a weight is a linear layer; two batched operands are attention-style bmm
    assert family_for_aten("aten::matmul", [[2, 8, 16], [16, 4]]).name == "gemm"
    assert family_for_aten("aten::matmul", [[2, 8, 16], [2, 16, 4]]).name == "bmm"


def test_aten_ops_do_not_overlap():
    seen: dict[str, str] = {}
    for fam in REGISTRY.values():
        for op in fam.aten_ops:
            assert op not in seen, f"{op} claimed by {seen.get(op)} and {fam.name}"
            seen[op] = fam.name


def test_get_unknown_family():
    assert get("gemm") is REGISTRY["gemm"]
    with pytest.raises(UnknownFamilyError, match="gemm"):
        get("conv9d")


def test_every_family_module_in_the_package_registers_itself():
    modules = {m.name for m in pkgutil.iter_modules(kernels.__path__) if m.ispkg}
    assert modules and modules == {type(f).__module__.rsplit(".", 1)[1] for f in REGISTRY.values()}


def test_register_refuses_a_taken_name_an_overlapping_op_and_a_non_family():
    before = dict(REGISTRY)
    with pytest.raises(KernelError, match="'softmax' is already registered") as taken:
        register(type(get("softmax"))())
    assert "\n" not in str(taken.value)

    class Greedy(type(get("softmax"))):
        name = "greedy_softmax"

    with pytest.raises(KernelError, match="covers aten::_softmax, aten::softmax, which 'softmax' already covers"):
        register(Greedy())
    with pytest.raises(KernelError, match="subclass evaluator.kernels.base.KernelFamily"):
        register(object())
    assert REGISTRY == before


def test_unregister():
    before = dict(REGISTRY)
    fam = unregister("rmsnorm")
    try:
        assert "rmsnorm" not in REGISTRY and family_for_aten("aten::rms_norm") is None
        assert register(fam) is fam and get("rmsnorm") is fam
    finally:
        REGISTRY.clear()
        REGISTRY.update(before)  # the original order, for the tests that run after this one
    with pytest.raises(UnknownFamilyError, match="conv9d"):
        unregister("conv9d")
