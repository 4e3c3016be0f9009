"""The catalogue of every metric a checklist may name, in one mapping.

In: the metrics of each area (metrics_*.py). Out: `METRICS`, name -> `Metric`, in the
order `describe_metrics` and `evaluate checklist metrics` list them; a new metric is an
entry in its area's module, and a new area a list added here.
"""

from __future__ import annotations

from .metric import Metric
from .metrics_baselines import BASELINES
from .metrics_e2e import E2E, SOAK
from .metrics_kernels import KERNELS, OPS, PROFILE
from .metrics_portability import PORTABILITY
from .metrics_upstream import FORK, UPSTREAM

METRICS: dict[str, Metric] = {
    m.name: m for m in [*KERNELS, *OPS, *E2E, *PROFILE, *SOAK, *PORTABILITY, *UPSTREAM, *FORK, *BASELINES]
}


def describe_metrics() -> str:
    """The catalogue as plain text, for `evaluate checklist metrics`."""
    width = max(len(n) for n in METRICS)
    uw = max(len(m.unit) for m in METRICS.values())
    return "\n".join(f"{m.name:<{width}}  {m.unit:<{uw}}  {m.meaning}" for m in METRICS.values())
