"""Compiling the kernels stage's next kernels while it verifies and times the current one.

In: the stage's work, in its order (a family and a shape each), the dtype, the hardware
and the tuning cache's lookup. Out: `Ahead`, whose threads build, for each shape in turn,
the config the tuner will try first (the cached winner where the tuning cache has one,
else the tuner's first candidate, `search.first_candidate`) and the awkward shape
verify will check that config on; `close()` drops what has not started and waits for
what has. Nothing is returned: every build goes through the families' once-per-process
cache (`kernels.common.OnceCache`), so the stage's own build of the same kernel waits for
this one instead of compiling it again, and TileLang's disk cache serves the tuner's
isolated workers. A failed build is left for the stage to meet and report.

Why: at a small budget, or on a rerun the tuning cache answers, a kernel's time in the
stage is mostly two compiles (its config and verify's awkward shape, 5 to 13 s each with
nvcc) beside a few seconds of timing; ResNet-50's 43 kernels took about 20 s each on an
H100. Compiling ahead overlaps them with the previous kernel's verification and timing.
On a GPU the timings are CUDA-graph replays, read off the device's clock, so compiling
beside them leaves them as they are; on a CPU the timing shares the cores, so the stage
compiles ahead only on CUDA.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Callable, Iterable

from ..kernels import KernelFamily
from ..results import Hardware, KernelConfig, Shape
from . import verify
from .search import first_candidate

# Two compiles a kernel against a few seconds of timing: four threads stay ahead of the
# stage without taking the cores its own tuning batches compile on.
THREADS = 4

Lookup = Callable[[KernelFamily, Shape], KernelConfig | None]


class Ahead:
    """Background builds of the stage's work, started in order on `threads` threads."""

    def __init__(
        self,
        work: Iterable[tuple[KernelFamily, Shape]],
        dtype: str,
        hw: Hardware,
        lookup: Lookup | None = None,
        threads: int = THREADS,
    ) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="evaluator-compile-ahead")
        self._stop = threading.Event()
        self.built: list[tuple[str, Shape]] = []  # what finished building, in the order it did
        self.futures: list[Future] = [
            self._pool.submit(self._one, fam, tuple(shape), dtype, hw, lookup) for fam, shape in work
        ]

    def _one(self, family: KernelFamily, shape: Shape, dtype: str, hw: Hardware, lookup: Lookup | None) -> None:
        if self._stop.is_set():
            return
        try:
            config = (lookup(family, shape) if lookup else None) or first_candidate(family, shape, dtype, hw)
            if config is None:
                return
            family.build(shape, dtype, config, hw.target)
            self.built.append((family.name, shape))
            if self._stop.is_set():
                return
            awkward = verify.awkward_for(family, shape, dtype, config, hw.target)
            family.build(awkward, dtype, config, hw.target)
            self.built.append((family.name, awkward))
        except Exception:
            pass  # the stage builds this kernel itself and reports what went wrong there

    def wait(self) -> None:
        """Until every build has finished (or failed)."""
        wait(self.futures)

    def close(self) -> None:
        """Drop the builds not started; wait for the ones running (a compile cannot be
        interrupted, and the stage may be about to use it)."""
        self._stop.set()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def abandon(self) -> None:
        """Drop the builds not started and return at once (the ones running finish on
        their own threads)."""
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> "Ahead":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
