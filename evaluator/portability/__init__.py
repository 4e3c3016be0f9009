"""Readiness before the hardware arrives: will each rewritten kernel build on each target,
and what must be re-tuned there?

In: kernels as (family name, shape, dtype, tuned config or None) tuples (or the run's
`TunedKernel` records) and target keys or `targets.TargetSpec`s. Out: a frozen
`Portability` — one `PortCell` per kernel x config ("tuned", and the family's "default":
the first entry of its search space for that target) x target, each "lowers",
"needs_retuning" or "fails" with a failure class ("resources", "codegen", "feature",
"numerical") and the one-line reason, a config of the target's own search space that fits
and lowers where the cell's config does not, summary sentences per target, and the
checklist numbers (`metrics`) and printable matrix (`rows`, `format_matrix`), and
`target_facts`, the same matrix read per target as data (the report words it in its own
language). `PortCell` and `Portability` live in results/kernels.py with the rest of a run (a
run's results.json carries the matrix) and are re-exported here.

How: TileLang lowers a program for a target that is not on the machine (its whole pass
pipeline, layout inference and code generation; no nvcc/hipcc, no device). A config that
lowers can still be unable to launch: the family's own sizing (`reject_reason` against a
`Hardware` built from the target's published limits) and the lowered kernel's shared
memory request and thread count are checked against the target's limits. A kernel whose
matrix multiply lowered to scalar loops (no tensor/matrix-core instruction in the source)
is a feature gap, not a success. Lowerings run in a thread pool and are cached per
(family, shape, dtype, config, target) for the life of the process.

The modules, in the order a check uses them:
  check.py     the entry points (`check`, `port`, `from_tuned`): kernels x targets in a thread pool
  cells.py     one kernel on one target: each config judged, a fitting one searched for
  lowering.py  one lowering, cached and counted; failure words (`first_line`, `classify`)
  matrix.py    reading the matrix: `target_facts`, the summary, `rows`, `metrics`, `explain`
Callers use the names re-exported here (`from evaluator import portability as P`).
"""

from __future__ import annotations

# The records live in results/kernels.py with the rest of a run; re-exported here, where they are made.
from ..results import KernelConfig, PortCell, Portability, Shape, parse_shape, shape_str  # noqa: F401
from .cells import MAX_FIT_TRIES  # noqa: F401
from .check import check, from_tuned, port  # noqa: F401
from .lowering import cache_size, classify, clear_cache, first_line, matrix_instruction  # noqa: F401
from .matrix import (  # noqa: F401
    FAILURE_CLASSES,
    METRIC_INFO,
    STATUSES,
    Failure,
    Retune,
    TargetFacts,
    with_summary,
    cell_text,
    config_str,
    explain,
    format_matrix,
    kernel_label,
    metrics,
    rows,
    target_facts,
)

__all__ = [
    "KernelConfig",
    "PortCell",
    "Portability",
    "Shape",
    "parse_shape",
    "shape_str",
    "MAX_FIT_TRIES",
    "check",
    "from_tuned",
    "port",
    "cache_size",
    "classify",
    "clear_cache",
    "first_line",
    "matrix_instruction",
    "FAILURE_CLASSES",
    "METRIC_INFO",
    "STATUSES",
    "Failure",
    "Retune",
    "TargetFacts",
    "cell_text",
    "config_str",
    "explain",
    "format_matrix",
    "kernel_label",
    "metrics",
    "rows",
    "target_facts",
]
