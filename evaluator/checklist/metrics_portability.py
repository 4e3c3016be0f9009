"""The metrics of the portability matrix: the rewritten kernels lowered for other
accelerators and judged against their published limits, never run there.

In: a `RunResult`'s portability (evaluator/portability/ makes the numbers and their
evidence). Out: the `PORTABILITY` metrics: over all targets, and one per known target
(`portability.<key>.kernels_ok`) so a checklist can require the accelerators a team
deploys on; None when the stage did not run or did not check that target.
"""

from __future__ import annotations

from typing import Callable

from .. import portability as _portability
from ..device import targets as _targets
from ..results import RunResult
from .metric import Metric, stage_note


def _port(name: str) -> Callable[[RunResult], float | None]:
    def measure(r: RunResult) -> float | None:
        return None if r.portability is None else _portability.metrics(r.portability).get(name)

    return measure


def _port_explain(name: str) -> Callable[[RunResult], str]:
    def explain(r: RunResult) -> str:
        p = r.portability
        if p is None:
            if isinstance(r.settings, dict) and r.settings.get("targets") == []:
                return "portability not checked (--targets none)"
            return stage_note(r, "portability", "portability stage not run")
        key = name.split(".")[1] if name.count(".") == 2 else ""
        if key and key not in p.targets:
            return f"{key} was not among the targets checked ({', '.join(p.targets)})"
        return _portability.explain(p, name)

    return explain


def _port_metric(name: str, meaning: str | None = None) -> Metric:
    unit, text = _portability.METRIC_INFO.get(name, ("fraction", ""))
    return Metric(name, unit, meaning or text, _port(name), _port_explain(name))


PORTABILITY = [
    _port_metric("portability.targets_ok"),
    _port_metric("portability.kernels_ok"),
    *(
        _port_metric(
            f"portability.{key}.kernels_ok",
            f"share of rewritten kernels that lower, with a config that fits its published limits, "
            f"for {spec.name} ({spec.arch}); not evaluated when {key} was not among --targets",
        )
        for key, spec in _targets.TARGETS.items()
    ),
]
