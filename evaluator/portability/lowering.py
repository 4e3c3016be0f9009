"""Lowering one kernel config for one target, cached, and the words for what went wrong.

In: a kernel family, a shape, a dtype, a config and a `targets.TargetSpec`. Out: a
`_Lowered` (built or not, the one-line error and its failure class, the matrix-core
instruction in the generated source, the shared memory and threads it launches with, the
seconds it took), once per (family, shape, dtype, config, target) per process; the
lowerings counted (`_COUNT`) and timed per thread (`_spent`) for the cells and the timing
line; `first_line` and `classify` for any exception; and the two context managers that
keep TileLang's failure dumps and TVM's ROCm warning out of the progress bars. TileLang
lowers for a target that is not on the machine: its whole pass pipeline, layout
inference and code generation, no nvcc/hipcc, no device.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from ..device import targets as T
from ..errors import KernelError
from ..kernels.common import OnceCache
from ..results import KernelConfig, Shape


@dataclass(frozen=True)
class Lowered:
    ok: bool
    error: str = ""  # first meaningful line, "<Type>: <message>"
    error_class: str = ""
    instruction: str = ""
    uses_gemm: bool = False  # the program has a T.gemm (so it should use matrix cores)
    smem_bytes: int | None = None
    threads: int | None = None
    seconds: float = 0.0


_CACHE = OnceCache()
_STATS = threading.local()


def clear_cache() -> None:
    _CACHE.clear()


def cache_size() -> int:
    return len(_CACHE)


def _freeze(config: KernelConfig | None) -> tuple:
    return tuple(sorted((str(k), repr(v)) for k, v in (config or {}).items()))


def lower_cached(family: Any, shape: Shape, dtype: str, config: KernelConfig, spec: T.TargetSpec) -> Lowered:
    """One lowering per (family, shape, dtype, config, target) per process; a second
    caller of the same key waits for the first instead of lowering twice."""
    key = (family.name, tuple(shape), dtype, _freeze(config), spec.target_json())
    return _CACHE.get(key, lambda: _lower(family, shape, dtype, config, spec))


COUNT = [0]  # lowerings run in this process (cache misses), for the timing line
COUNT_LOCK = threading.Lock()


def _lower(family: Any, shape: Shape, dtype: str, config: KernelConfig, spec: T.TargetSpec) -> Lowered:
    out = _lower_once(family, shape, dtype, config, spec)
    # Accounted per thread, so each cell knows what its own lowerings cost.
    _STATS.spent = getattr(_STATS, "spent", 0.0) + out.seconds
    with COUNT_LOCK:
        COUNT[0] += 1
    return out


def _lower_once(family: Any, shape: Shape, dtype: str, config: KernelConfig, spec: T.TargetSpec) -> Lowered:
    t0 = time.perf_counter()
    try:
        # The arch goes with the kind, so a config that needs one (the sm_90-only ping-pong
        # GEMM on an A100) is refused by the family's own check in a sentence, before
        # TileLang's lowering fails on it with an internal error.
        prim = family.program(shape, dtype, config, _family_target(spec))
    except Exception as exc:  # the family refuses the config for this kind of target
        msg = first_line(exc)
        return Lowered(ok=False, error=msg, error_class=classify(msg), seconds=time.perf_counter() - t0)
    try:
        import tilelang

        tvm_target = _tvm_target(spec.target_json())
        # tilelang.lower, unlike tilelang.compile, does not enter the target context
        # itself, and its vectorize planner then fails with "Target context required".
        with tvm_target:
            artifact = tilelang.lower(prim, target=tvm_target)
        source = artifact.kernel_source or ""
    except Exception as exc:
        msg = first_line(exc)
        # A lowering error is a code-generation gap unless it names a dtype, a backend or a limit.
        cls = classify(msg, default="codegen")
        return Lowered(ok=False, error=msg, error_class=cls, seconds=time.perf_counter() - t0)
    smem, threads = _launch_needs(artifact, source)
    return Lowered(
        ok=True,
        instruction=matrix_instruction(source),
        uses_gemm=_uses_gemm(prim),
        smem_bytes=smem,
        threads=threads,
        seconds=time.perf_counter() - t0,
    )


def _family_target(spec: T.TargetSpec) -> str:
    """The target string families take ("cuda -arch=sm_80", "hip -mcpu=gfx942"), the same
    the spec's Hardware record carries (`TargetSpec.hardware`)."""
    return spec.hardware().target


@functools.lru_cache(maxsize=None)
def _tvm_target(target_json: str) -> Any:
    """One TVM Target per target for the process: TVM prints "Unable to detect ROCm
    version" on stderr each time a HIP target is made on a machine without ROCm, which
    would be a line per lowering in the middle of the progress bars. Targets are
    immutable, so the lowering threads can share one."""
    import json

    import tilelang  # noqa: F401  (puts its bundled tvm on the path)
    from tvm.target import Target

    return Target(json.loads(target_json))


def _uses_gemm(prim: Any) -> bool:
    try:
        return re.search(r"\bT\.gemm\w*\(", prim.script()) is not None
    except Exception:
        return False


def matrix_instruction(source: str) -> str:
    """The tensor/matrix-core instruction family in generated kernel source, or ""."""
    if "tcgen05" in source:
        return "tcgen05"
    if "wgmma" in source:
        return "wgmma"
    if re.search(r"mfma", source, re.IGNORECASE):
        return "mfma"
    if "mma_sync" in source or "mma.sync" in source or "tl::mma" in source:
        return "mma.sync"
    return ""


_TYPE_BYTES = {
    "char": 1,
    "uchar": 1,
    "int8_t": 1,
    "uint8_t": 1,
    "half_t": 2,
    "half": 2,
    "bfloat16_t": 2,
    "__half": 2,
    "__nv_bfloat16": 2,
    "short": 2,
    "float": 4,
    "int": 4,
    "uint": 4,
    "unsigned": 4,
    "double": 8,
    "int64_t": 8,
    "uint64_t": 8,
}
_STATIC_SHARED = re.compile(r"__shared__\s+(?:__align__\(\d+\)\s+)?(\w+)\s+\w+\[(\d+)\]")


def _launch_needs(artifact: Any, source: str) -> tuple[int | None, int | None]:
    """Shared memory (dynamic, from the device functions' attributes, plus static arrays in
    the source) and threads per block the lowered kernel launches with; the largest over
    its device functions."""
    smem, threads = None, None
    try:
        for _, func in artifact.device_mod.functions.items():
            attrs = func.attrs or {}
            dyn = int(attrs["dyn_shared_memory_buf"]) if "dyn_shared_memory_buf" in attrs else 0
            extent = attrs["thread_extent"] if "thread_extent" in attrs else {}
            n = 1
            for axis in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
                if axis in extent:
                    n *= int(extent[axis])
            smem = max(smem or 0, dyn)
            threads = max(threads or 0, n)
    except Exception:
        pass  # attributes are a TileLang internal: without them only the family's sizing is checked
    static = sum(_TYPE_BYTES.get(t, 4) * int(n) for t, n in _STATIC_SHARED.findall(source))
    if static:
        smem = (smem or 0) + static
    return smem, threads


_NOISE = re.compile(r"^(Traceback|File \"|During handling|The above exception|Stack trace|\d+: |at |-+$|\^+$)")


def first_line(exc: BaseException) -> str:
    """'<Type>: <first meaningful line>' of an exception, at most 240 characters; the
    type is left out for our own KernelError, whose messages already say who failed."""
    lines = [ln.strip() for ln in str(exc).splitlines()]
    line = next((ln for ln in lines if ln and not _NOISE.match(ln)), "") or type(exc).__name__
    line = re.sub(r"^TileLang lowering failed for target '[^']*': ", "", line)
    line = line.rstrip(":").strip()
    text = line if isinstance(exc, KernelError) else f"{type(exc).__name__}: {line}"
    return text if len(text) <= 240 else text[:237] + "..."


_FEATURE_WORDS = re.compile(
    r"dtype|float32|float16|bfloat16|\bfp(16|32)\b|\bbf16\b|not supported|unsupported|no \w+ schedule|"
    r"no gpu schedule|backend|target kind|needs cuda sm_\d+",
    re.IGNORECASE,
)
_RESOURCE_WORDS = re.compile(
    r"shared memory|\blds\b|register|spill|threads|warpgroup|stack|exceed|too (many|small|large)|out of", re.IGNORECASE
)


def classify(message: str, default: str = "codegen") -> str:
    """Failure class of a one-line reason: a dtype/backend the target lacks is a feature
    gap; a limit (shared memory, registers, threads) is resources; anything else, an
    intrinsic or pass that cannot handle the program, is codegen."""
    if _FEATURE_WORDS.search(message):
        return "feature"
    if _RESOURCE_WORDS.search(message):
        return "resources"
    return default


@contextlib.contextmanager
def quiet_builder():
    """TileLang logs the whole generated builder source at CRITICAL when a program fails
    to build; one line per failure is what the matrix keeps, so drop that dump here."""
    logger = logging.getLogger("tilelang.language.eager.builder")

    class _Drop(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return not str(record.getMessage()).startswith("Failed to build prim_func")

    f = _Drop()
    logger.addFilter(f)
    try:
        yield
    finally:
        logger.removeFilter(f)


_ROCM_NOISE = "Unable to detect ROCm version"
_FD_LOCK = threading.Lock()


@contextlib.contextmanager
def without_rocm_warning(active: bool):
    """TVM's C++ logger writes "Warning: Unable to detect ROCm version, assuming >= 3.5"
    straight to file descriptor 2 whenever a HIP target is made on a machine without
    ROCm (several times per lowering, with no level to turn it off), through the middle
    of the pipeline's progress bars. While HIP targets are lowered, fd 2 goes to a
    temporary file; afterwards everything else written there is passed on unchanged."""
    if not active:
        yield
        return
    import sys
    import tempfile

    with _FD_LOCK:
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (OSError, ValueError, AttributeError):  # no fd 2 to redirect (embedded interpreter)
            yield
            return
        with tempfile.TemporaryFile() as tmp:
            os.dup2(tmp.fileno(), 2)
            try:
                yield
            finally:
                try:
                    sys.stderr.flush()
                except (OSError, ValueError, AttributeError):
                    pass
                os.dup2(saved, 2)
                os.close(saved)
                tmp.seek(0)
                kept = [
                    ln
                    for ln in tmp.read().decode("utf-8", "replace").splitlines(keepends=True)
                    if _ROCM_NOISE not in ln
                ]
                if kept:
                    os.write(2, "".join(kept).encode("utf-8"))


def lowering_seconds() -> float:
    """Seconds this thread has spent lowering so far."""
    return getattr(_STATS, "spent", 0.0)
