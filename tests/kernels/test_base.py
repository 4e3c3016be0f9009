"""The family base class: the defaults of its optional members, and the one build path
(check the shape and dtype, pick the schedule, fill and check the config, then compile or
screen) that every registered family uses rather than a copy of its own.

In: a minimal family defined here, and the registry. Out: pass/fail. Nothing compiles:
the minimal family's program factory returns what it was given.
"""

from __future__ import annotations

import re

import pytest

from evaluator.errors import KernelError
from evaluator.kernels import REGISTRY
from evaluator.kernels.base import KernelFamily, Schedule
from evaluator.results import Hardware
from tests.hardware import CPU

GPU = Hardware(target="cuda", device="cuda", name="gpu", platform="gpu", smem_per_block=1024)


def _echo(shape, dtype, cfg):
    return ("program", shape, dtype, cfg)


class Minimal(KernelFamily):
    """Only what the base class requires, one CPU schedule, and a stack limit."""

    name = "minimal"
    title = "Minimal"
    shape_names = ("n", "flag")
    aten_ops = frozenset({"aten::minimal"})
    cpu_schedule = Schedule({"block": 8, "wide": False}, _echo)

    @property
    def awkward_dims(self):
        return ("n",)

    def standard_shapes(self, device):
        return [(16, 1)]

    def make_inputs(self, shape, dtype, device, seed):
        return ()

    def reference(self, *inputs):
        return None

    def search_space(self, shape, dtype, hardware):
        return [{}]

    def flops(self, shape):
        return 1.0

    def bytes(self, shape, dtype):
        return 1.0

    def tolerance(self, dtype, shape=None):
        return (1e-6, 1e-6)

    def input_shapes(self, shape):
        return [tuple(shape)]

    def config_error(self, shape, dtype, config, target):
        return "block must be a power of two" if config["block"] & (config["block"] - 1) else None

    def limits_error(self, shape, dtype, config, hardware):
        return "block over the stack budget" if config["block"] > 64 else None


class WithParams(Minimal):
    name = "with_params"
    params = {"eps": 1e-5}


def test_optional_members_have_defaults():
    fam = Minimal()
    assert fam.profile_family == "minimal" and dict(fam.params) == {} and fam.functions == ()
    assert fam.problem_shape("aten::minimal", [[16]], [None]) is None
    assert fam.covers("aten::minimal") and not fam.covers("aten::other")
    assert isinstance(fam.route(print, (), {}, "float32"), str)
    assert fam.reject_reason((16, 1), "float32", {}, CPU) is None
    # only the dims named in awkward_dims move, to sizes that are not multiples of 16
    assert fam.awkward_shape((64, 1)) == (71, 1)


def test_resolve_fills_the_config_and_program_builds_from_it():
    fam = Minimal()
    r = fam.resolve([16, 1], "fp32", {"wide": True}, "c")
    assert r.shape == (16, 1) and r.dtype == "float32" and r.config == {"block": 8, "wide": True}
    assert fam.program((16, 1), "float32", {"block": 4}, "c") == (
        "program",
        (16, 1),
        "float32",
        {"block": 4, "wide": False},
    )


def test_kernel_parameters_ride_along_in_the_config():
    fam = WithParams()
    assert fam.resolve((16, 1), "float32", {}, "c").config == {"block": 8, "wide": False, "eps": 1e-5}
    assert fam.resolve((16, 1), "float32", {"eps": 1e-12}, "c").config["eps"] == 1e-12


@pytest.mark.parametrize(
    "shape, dtype, config, target, words",
    [
        ((16,), "float32", {}, "c", "minimal: shape must be 2 positive ints (n, flag)"),
        ((16, 1), "bfloat16", {}, "c", "bfloat16 is not supported on TileLang's CPU backend"),
        ((16, 1), "float16", {}, "cuda", "minimal: no GPU schedule (target 'cuda')"),
        ((16, 1), "float32", {"tile": 1}, "c", "minimal: unknown config keys ['tile']"),
        ((16, 1), "float32", {"block": 12}, "c", "minimal: block must be a power of two"),
    ],
)
def test_resolve_refuses_with_one_line_before_compiling(shape, dtype, config, target, words):
    fam = Minimal()
    with pytest.raises(KernelError, match=re.escape(words)):
        fam.resolve(shape, dtype, config, target)
    hw = CPU if target == "c" else GPU
    assert words in fam.reject_reason(shape, dtype, config, hw)


def test_device_limits_reject_but_do_not_stop_a_build():
    fam = Minimal()
    assert fam.reject_reason((16, 1), "float32", {"block": 128}, CPU) == "minimal: block over the stack budget"
    assert fam.program((16, 1), "float32", {"block": 128}, "c")[3]["block"] == 128  # lowering tests still inspect it


def test_a_family_missing_a_required_member_cannot_be_made():
    class Incomplete(KernelFamily):
        name, title, shape_names = "incomplete", "Incomplete", ("n",)

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_family_uses_the_shared_build_path(name):
    cls = type(REGISTRY[name])
    for member in ("resolve", "program", "build", "reject_reason"):
        assert getattr(cls, member) is getattr(KernelFamily, member), f"{name} overrides {member}"
