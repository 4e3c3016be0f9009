"""The entry points: every kernel's configs lowered for every target, in a thread pool.

In: kernels as (family name, shape, dtype, tuned config or None) tuples or the run's
`TunedKernel` records, and target keys, specs or None for the default set. Out: the
frozen `Portability` (cells.py judges each kernel on each target; matrix.py writes the
summary sentences), with the targets' names, limits and sources, the TileLang version,
the seconds taken and the lowerings run. Unknown targets or families raise ConfigError
before any lowering.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable

from .. import kernels as registry
from ..device import targets as T
from ..errors import ConfigError
from ..results import KernelConfig, Portability, Shape, parse_shape
from .cells import cells_for
from .lowering import COUNT, COUNT_LOCK, quiet_builder, without_rocm_warning
from .matrix import with_summary, kernel_label


def _normalize(kernels: Iterable[Any]) -> list[tuple[str, Shape, str, KernelConfig | None]]:
    """(family, shape, dtype, tuned config) from tuples or TunedKernel records. A config
    tuned for the CPU (C backend) says nothing about a GPU: it is dropped there and only
    the family's default for each target is checked."""
    from ..kernels import common as C
    from ..kernels.base import is_cpu_target

    out = []
    for k in kernels:
        if hasattr(k, "family") and hasattr(k, "config"):  # results.TunedKernel
            family, shape, dtype, config = k.family, k.shape, k.dtype, k.config
            if config is not None and is_cpu_target(str(getattr(k, "target", "") or "cuda")):
                config = None
        else:
            family, shape, dtype, config = (tuple(k) + (None,))[:4]
        registry.get(family)  # an unknown family: one line naming the known ones
        if isinstance(shape, str):
            shape = parse_shape(shape)
        out.append((family, tuple(int(s) for s in shape), C.canonical_dtype(dtype), dict(config) if config else None))
    return out


def from_tuned(tuned: Iterable[Any], per_family: int = 1) -> list[Any]:
    """The run's TunedKernel records to check: the first `per_family` shapes of each family
    (the pipeline tunes the hottest model shapes first), so a model with a dozen GEMM
    shapes costs a few lowerings per target, not dozens."""
    seen: dict[str, int] = {}
    out = []
    for t in tuned:
        if seen.get(t.family, 0) < per_family:
            seen[t.family] = seen.get(t.family, 0) + 1
            out.append(t)
    return out


def check(
    kernels: Iterable[Any],
    targets: Iterable[str | T.TargetSpec] | str | None = None,
    *,
    workers: int | None = None,
    numerics: Callable[..., str | None] | None = None,
) -> Portability:
    """Lower every kernel's tuned and default config for every target and judge them.

    `kernels`: (family, shape, dtype, tuned config or None) tuples, or TunedKernel records.
    `targets`: keys, specs, a comma-separated string, or None for the default set.
    `numerics(family, shape, dtype, config) -> reason | None`: optional, run for the
    "local" target only (the one device that can execute), a mismatch fails the cell as
    "numerical". Unknown targets or families raise ConfigError before any lowering.
    """
    t0 = time.perf_counter()
    specs = T.resolve(targets)
    items = _normalize(kernels)
    if not items:
        raise ConfigError("no kernels to check; give at least one (family, shape, dtype, config)")
    with COUNT_LOCK:
        count0 = COUNT[0]
    jobs = [(item, spec) for item in items for spec in specs]
    workers = workers or max(1, min(len(jobs), os.cpu_count() or 1, 4))

    def run(job):
        (fam_name, shape, dtype, tuned), spec = job
        return cells_for(registry.get(fam_name), shape, dtype, tuned, spec, numerics)

    hip = any(s.kind == "hip" and not T.backend_gap(s) for s in specs)
    with quiet_builder(), without_rocm_warning(hip):
        if workers == 1:
            results = [run(j) for j in jobs]
        else:
            # TVM's target and pass contexts are thread-local, so lowerings may overlap.
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="portability") as pool:
                results = list(pool.map(run, jobs))
    cells = tuple(c for group in results for c in group)
    labels = tuple(dict.fromkeys(kernel_label(f, s, d) for f, s, d, _ in items))
    with COUNT_LOCK:
        lowered = COUNT[0] - count0
    p = Portability(
        targets=tuple(s.key for s in specs),
        kernels=labels,
        cells=cells,
        summary=(),
        target_names={s.key: s.name for s in specs},
        target_limits={s.key: s.describe() for s in specs},
        target_sources={s.key: s.source + (f"; {s.notes}" if s.notes else "") for s in specs},
        tilelang=_tilelang_version(),
        seconds=round(time.perf_counter() - t0, 2),
        lowerings=lowered,
    )
    return with_summary(p)


def port(
    family: str,
    shape: Shape | str,
    dtype: str = "float16",
    targets: Iterable[str | T.TargetSpec] | str | None = None,
    *,
    config: KernelConfig | None = None,
    workers: int | None = None,
) -> Portability:
    """One family at one shape on the targets (the `evaluate port` command); `config`
    is checked as the "tuned" one when given, the family's default per target always."""
    return check([(family, shape, dtype, config)], targets, workers=workers)


def _tilelang_version() -> str:
    try:
        import tilelang

        return str(getattr(tilelang, "__version__", "unknown"))
    except Exception as exc:
        return f"unavailable ({type(exc).__name__})"
