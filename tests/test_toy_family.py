"""Adding a kernel family is one file plus its test: the toy family (tests/toy_family.py),
registered here and nowhere else, goes through the real pipeline like a shipped family —
profiled from its aten op, tuned, verified, routed into a model at the operator, and
reported — with no change to profiling, tuning, verification, the router or the CLI.

In: the toy family and a tiny model that calls F.hardtanh. Out: pass/fail. The run is
small (one 64x48 shape, a 2 s tuning budget, no soak, no PDF): seconds on 2 cores.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
import torch

import toy_family
from evaluator import config as config
from evaluator.device import hardware
from evaluator import kernels, pipeline
from evaluator.profiling import profile as profiling
from evaluator.tuning import verify
from evaluator.errors import KernelError

MODEL = f"{Path(toy_family.__file__).resolve()}:make"


@pytest.fixture
def toy():
    kernels.register(toy_family.FAMILY)
    yield toy_family.FAMILY
    kernels.unregister("toy")


def _text(path: Path) -> str:
    """The report's words, without markup, on one line."""
    words = html.unescape(re.sub(r"<[^>]+>", " ", path.read_text()))
    return re.sub(r"\s+", " ", words)


def test_registering_is_what_makes_profiling_see_the_family():
    assert profiling.classify("aten::hardtanh", [[4, 8]]) is None
    kernels.register(toy_family.FAMILY)
    try:
        assert profiling.classify("aten::hardtanh", [[4, 8]]) == "toy"
        assert kernels.family_for_aten("aten::hardtanh") is toy_family.FAMILY
        with pytest.raises(KernelError, match="'toy' is already registered"):
            kernels.register(toy_family.ToyFamily())
    finally:
        kernels.unregister("toy")
    assert "toy" not in kernels.REGISTRY and profiling.classify("aten::hardtanh", [[4, 8]]) is None


def test_the_toy_kernel_is_real_and_refuses_what_it_has_no_schedule_for(toy):
    hw = hardware.detect("cpu")
    res = verify.verify(toy, (64, 48), "float32", {"block_rows": 4}, hw.target, "cpu")
    assert res.passed and len(res.cases) == 4
    # A kernel parameter other than the default builds a variant (what the router does for a call).
    kernel = toy.build((5, 7), "float32", {"min_val": -0.5, "max_val": 2.0}, "c")
    x = torch.linspace(-3, 3, 35).reshape(5, 7)
    torch.testing.assert_close(kernel(x), torch.nn.functional.hardtanh(x, -0.5, 2.0))
    assert "no GPU schedule" in toy.reject_reason(
        (64, 48), "float16", {}, hardware.Hardware(target="cuda", device="cuda", name="gpu", platform="gpu")
    )
    assert "unknown config keys" in toy.reject_reason((64, 48), "float32", {"tile": 8}, hw)


@pytest.mark.slow
def test_the_pipeline_profiles_tunes_verifies_routes_and_reports_it(toy, tmp_path):
    cfg = config.build(
        model=MODEL,
        families="toy",
        budget=2,
        soak_seconds=0,
        pdf=False,
        reports=tmp_path,
        label="tiny-hardtanh",
        reps=5,
        compile_mode="none",
    )
    out = pipeline.run(cfg)
    r = out.result
    assert not r.stage_errors
    # profiled: batch 4 x seq 16 rows of 48, from aten::hardtanh
    op = next(o for o in r.hot_ops.ops if o.family == "toy")
    assert op.has_kernel and op.shapes == ("64x48",) and op.aten_ops == ("aten::hardtanh",)
    assert r.hot_ops.selected == ("toy",)
    # tuned, and the winner is a config that ran
    (tk,) = r.tuned
    ok = [c for c in tk.candidates if c.status == "ok"]
    assert tk.family == "toy" and tk.shape == (64, 48) and ok
    assert tk.config == min(ok, key=lambda c: c.latency_ms).config
    # verified on every seed and an awkward shape
    (vr,) = r.verify
    assert vr.family == "toy" and vr.passed and any(c.shape != (64, 48) for c in vr.cases)
    # routed: the model's F.hardtanh ran in TileLang and the outputs match
    assert r.e2e.tilelang_calls > 0 and r.e2e.outputs_match
    assert [(c.family, c.shape, c.tilelang) for c in r.e2e.calls] == [("toy", "64x48", r.e2e.tilelang_calls)]
    # reported
    assert re.search(r"\btoy 64x48\b", _text(out.html))
