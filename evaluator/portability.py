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
language). `PortCell` and `Portability` live in results.py with the rest of a run (a
run's results.json carries the matrix) and are re-exported here.

How: TileLang lowers a program for a target that is not on the machine (its whole pass
pipeline, layout inference and code generation; no nvcc/hipcc, no device). A config that
lowers can still be unable to launch: the family's own sizing (`reject_reason` against a
`Hardware` built from the target's published limits) and the lowered kernel's shared
memory request and thread count are checked against the target's limits. A kernel whose
matrix multiply lowered to scalar loops (no tensor/matrix-core instruction in the source)
is a feature gap, not a success. Lowerings run in a thread pool and are cached per
(family, shape, dtype, config, target) for the life of the process.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from .kernels._common import OnceCache
from . import kernels as registry
from . import targets as T
from .errors import ConfigError, KernelError
# The records live in results.py with the rest of a run; re-exported here, where they are made.
from .results import KernelConfig, PortCell, Portability, Shape, parse_shape, shape_str  # noqa: F401

STATUSES = ("lowers", "needs_retuning", "fails")
FAILURE_CLASSES = ("resources", "codegen", "feature", "numerical")
# Configs of the target's search space tried, in the family's order, when looking for one
# that fits and lowers; each is a lowering (0.1-2 s), so the search is bounded.
MAX_FIT_TRIES = 6


def kernel_label(family: str, shape: Sequence[int], dtype: str) -> str:
    return f"{family} {shape_str(tuple(shape))} {dtype}"


# ---------------------------------------------------------------- lowering, cached


@dataclass(frozen=True)
class _Lowered:
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


def _lower_cached(family: Any, shape: Shape, dtype: str, config: KernelConfig, spec: T.TargetSpec) -> _Lowered:
    """One lowering per (family, shape, dtype, config, target) per process; a second
    caller of the same key waits for the first instead of lowering twice."""
    key = (family.name, tuple(shape), dtype, _freeze(config), spec.target_json())
    return _CACHE.get(key, lambda: _lower(family, shape, dtype, config, spec))


_COUNT = [0]  # lowerings run in this process (cache misses), for the timing line
_COUNT_LOCK = threading.Lock()


def _lower(family: Any, shape: Shape, dtype: str, config: KernelConfig, spec: T.TargetSpec) -> _Lowered:
    out = _lower_once(family, shape, dtype, config, spec)
    # Accounted per thread, so each cell knows what its own lowerings cost.
    _STATS.spent = getattr(_STATS, "spent", 0.0) + out.seconds
    with _COUNT_LOCK:
        _COUNT[0] += 1
    return out


def _lower_once(family: Any, shape: Shape, dtype: str, config: KernelConfig, spec: T.TargetSpec) -> _Lowered:
    t0 = time.perf_counter()
    try:
        prim = family.program(shape, dtype, config, spec.kind)
    except Exception as exc:  # the family refuses the config for this kind of target
        msg = first_line(exc)
        return _Lowered(ok=False, error=msg, error_class=classify(msg), seconds=time.perf_counter() - t0)
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
        return _Lowered(ok=False, error=msg, error_class=cls, seconds=time.perf_counter() - t0)
    smem, threads = _launch_needs(artifact, source)
    return _Lowered(ok=True, instruction=matrix_instruction(source), uses_gemm=_uses_gemm(prim),
                    smem_bytes=smem, threads=threads, seconds=time.perf_counter() - t0)


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


_TYPE_BYTES = {"char": 1, "uchar": 1, "int8_t": 1, "uint8_t": 1, "half_t": 2, "half": 2, "bfloat16_t": 2,
               "__half": 2, "__nv_bfloat16": 2, "short": 2, "float": 4, "int": 4, "uint": 4, "unsigned": 4,
               "double": 8, "int64_t": 8, "uint64_t": 8}
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
    r"no gpu schedule|backend|target kind", re.IGNORECASE)
_RESOURCE_WORDS = re.compile(
    r"shared memory|\blds\b|register|spill|threads|warpgroup|stack|exceed|too (many|small|large)|out of",
    re.IGNORECASE)


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
def _quiet_builder():
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
def _without_rocm_warning(active: bool):
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
                kept = [ln for ln in tmp.read().decode("utf-8", "replace").splitlines(keepends=True)
                        if _ROCM_NOISE not in ln]
                if kept:
                    os.write(2, "".join(kept).encode("utf-8"))


# ---------------------------------------------------------------- judging one config


def _kb(n: int) -> str:
    return f"{n / 1024:.0f} KB" if n % 1024 == 0 or n >= 10240 else f"{n / 1024:.1f} KB"


_NEED_BYTES = re.compile(r"needs (\d+) (?:B|bytes) of shared memory")


def _limit_phrase(spec: T.TargetSpec) -> str:
    return f"{spec.short} allows {_kb(spec.smem_per_block)} of {spec.smem_word} per {spec.block_word}"


def _judge(family: Any, shape: Shape, dtype: str, config: KernelConfig, spec: T.TargetSpec,
           numerics: Callable[..., str | None] | None) -> tuple[str, str, str, _Lowered, str]:
    """(status, failure class, reason, lowering, note) for one config on one target."""
    hw = spec.hardware()
    reject = None
    if hasattr(family, "reject_reason"):
        try:
            reject = family.reject_reason(shape, dtype, config, hw)
        except Exception as exc:  # a family bug must not hide the other cells
            reject = first_line(exc)
    low = _lower_cached(family, shape, dtype, config, spec)
    if not low.ok:
        return "fails", low.error_class, low.error, low, ""
    # It lowers; can it launch there?
    limits = []
    if reject:
        need = _NEED_BYTES.search(reject)
        if need and spec.smem_per_block:
            text = f"uses {_kb(int(need.group(1)))} of shared memory; {_limit_phrase(spec)}"
            if low.smem_bytes is not None:
                text += f" (the lowered kernel itself requests {_kb(low.smem_bytes)})"
            limits.append(text)
        elif classify(reject, default="resources") == "feature":
            return "fails", "feature", reject, low, ""
        else:
            limits.append(reject)
    if not limits and low.smem_bytes and spec.smem_per_block and low.smem_bytes > spec.smem_per_block:
        limits.append(f"the lowered kernel requests {_kb(low.smem_bytes)} of shared memory; {_limit_phrase(spec)}")
    if low.threads and spec.max_threads_per_block and low.threads > spec.max_threads_per_block:
        limits.append(f"launches {low.threads} threads per block; {spec.short} allows {spec.max_threads_per_block}")
    if limits:
        return "needs_retuning", "resources", "; ".join(limits), low, ""
    # A T.gemm that became scalar loops builds, but it is not the kernel that was tuned.
    if low.uses_gemm and not low.instruction:
        lacks = {"bfloat16": not spec.bf16, "float16": not spec.fp16}.get(dtype, False)
        why = (f"{spec.short}'s {spec.matrix_cores or 'matrix cores'} take no {dtype}" if lacks
               else f"no matrix-core instruction for {dtype} on {spec.arch}")
        return "fails", "feature", f"{why}: T.gemm lowered to scalar FMA loops", low, ""
    note = ""
    if low.uses_gemm and spec.matrix_instruction and low.instruction != spec.matrix_instruction:
        # It builds and runs, but speed measured where the tuned instruction was used
        # does not carry over.
        note = (f"T.gemm lowered to {low.instruction}, not {spec.short}'s {spec.matrix_instruction}: "
                f"speed measured elsewhere does not carry over")
    if numerics is not None and spec.key == "local":
        # Only the local device can run the kernel; the hook compares it with PyTorch.
        try:
            mismatch = numerics(family.name, shape, dtype, config)
        except Exception as exc:
            mismatch = first_line(exc)
        if mismatch:
            return "fails", "numerical", mismatch, low, note
    return "lowers", "", "", low, note


# ---------------------------------------------------------------- one kernel on one target


def _cells_for(family: Any, shape: Shape, dtype: str, tuned: KernelConfig | None, spec: T.TargetSpec,
               numerics: Callable[..., str | None] | None) -> list[PortCell]:
    base = dict(family=family.name, shape=tuple(shape), dtype=dtype, target=spec.key)
    kinds = ([("tuned", tuned)] if tuned is not None else []) + [("default", None)]
    gap = T.backend_gap(spec)
    if gap:
        return [PortCell(**base, config_kind=k, status="fails", failure_class="feature", reason=gap,
                         config=dict(c) if c is not None else None) for k, c in kinds]
    hw = spec.hardware()
    try:
        space = list(family.search_space(shape, dtype, hw))
        space_error = "" if space else _empty_space_reason(family, shape, dtype, hw, spec)
    except Exception as exc:
        space, space_error = [], first_line(exc)
    cells: list[PortCell] = []
    fitting: KernelConfig | None | bool = False  # False: not searched yet
    for kind, config in kinds:
        if kind == "default":
            if not space:
                cells.append(PortCell(**base, config_kind=kind, status="fails",
                                      failure_class=classify(space_error, default="feature"), reason=space_error))
                continue
            config = space[0]
        spent0 = _spent()
        status, cls, reason, low, note = _judge(family, shape, dtype, config, spec, numerics)
        fit = None
        # Another config cannot give the target a dtype or a backend it lacks: search
        # only for limits, code-generation gaps and numerical mismatches.
        if status != "lowers" and cls != "feature":
            if fitting is False:
                fitting = _find_fitting(family, shape, dtype, space, spec, numerics)
            fit = fitting if fitting and fitting != config else None
        cells.append(PortCell(**base, config_kind=kind, status=status, failure_class=cls, reason=reason,
                              config=dict(config), fitting_config=dict(fit) if fit else None,
                              instruction=low.instruction, smem_bytes=low.smem_bytes, threads=low.threads,
                              note=note, lower_s=round(_spent() - spent0, 3)))
    return cells


def _empty_space_reason(family: Any, shape: Shape, dtype: str, hw: Any, spec: T.TargetSpec) -> str:
    """Why the family offers no config for the target: its own reject reason for its
    defaults when it has one (e.g. no float32 GPU schedule), else a plain sentence."""
    if hasattr(family, "reject_reason"):
        try:
            why = family.reject_reason(shape, dtype, {}, hw)
        except Exception as exc:
            why = first_line(exc)
        if why:
            return why
    return f"{family.name} has no config for {dtype} on {spec.short} (its search space is empty)"


def _find_fitting(family: Any, shape: Shape, dtype: str, space: list[KernelConfig], spec: T.TargetSpec,
                  numerics: Callable[..., str | None] | None) -> KernelConfig | None:
    """The first config of the target's search space (the family's order: best guess
    first) that fits the target's limits and lowers cleanly."""
    for config in space[:MAX_FIT_TRIES]:
        status, *_ = _judge(family, shape, dtype, config, spec, numerics)
        if status == "lowers":
            return config
    return None


def _spent() -> float:
    return getattr(_STATS, "spent", 0.0)


# ---------------------------------------------------------------- the entry points


def _normalize(kernels: Iterable[Any]) -> list[tuple[str, Shape, str, KernelConfig | None]]:
    """(family, shape, dtype, tuned config) from tuples or TunedKernel records. A config
    tuned for the CPU (C backend) says nothing about a GPU: it is dropped there and only
    the family's default for each target is checked."""
    from .kernels import _common as C
    from .kernels.base import is_cpu_target

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
        out.append((family, tuple(int(s) for s in shape), C.canonical_dtype(dtype),
                    dict(config) if config else None))
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


def check(kernels: Iterable[Any], targets: Iterable[str | T.TargetSpec] | str | None = None, *,
          workers: int | None = None, numerics: Callable[..., str | None] | None = None) -> Portability:
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
    with _COUNT_LOCK:
        count0 = _COUNT[0]
    jobs = [(item, spec) for item in items for spec in specs]
    workers = workers or max(1, min(len(jobs), os.cpu_count() or 1, 4))

    def run(job):
        (fam_name, shape, dtype, tuned), spec = job
        return _cells_for(registry.get(fam_name), shape, dtype, tuned, spec, numerics)

    hip = any(s.kind == "hip" and not T.backend_gap(s) for s in specs)
    with _quiet_builder(), _without_rocm_warning(hip):
        if workers == 1:
            results = [run(j) for j in jobs]
        else:
            # TVM's target and pass contexts are thread-local, so lowerings may overlap.
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="portability") as pool:
                results = list(pool.map(run, jobs))
    cells = tuple(c for group in results for c in group)
    labels = tuple(dict.fromkeys(kernel_label(f, s, d) for f, s, d, _ in items))
    with _COUNT_LOCK:
        lowered = _COUNT[0] - count0
    p = Portability(
        targets=tuple(s.key for s in specs), kernels=labels, cells=cells, summary=(),
        target_names={s.key: s.name for s in specs}, target_limits={s.key: s.describe() for s in specs},
        target_sources={s.key: s.source + (f"; {s.notes}" if s.notes else "") for s in specs},
        tilelang=_tilelang_version(), seconds=round(time.perf_counter() - t0, 2), lowerings=lowered,
    )
    return _with_summary(p)


def port(family: str, shape: Shape | str, dtype: str = "float16",
         targets: Iterable[str | T.TargetSpec] | str | None = None, *, config: KernelConfig | None = None,
         workers: int | None = None) -> Portability:
    """One family at one shape on the targets (the `evaluate port` command); `config`
    is checked as the "tuned" one when given, the family's default per target always."""
    return check([(family, shape, dtype, config)], targets, workers=workers)


def _tilelang_version() -> str:
    try:
        import tilelang

        return str(getattr(tilelang, "__version__", "unknown"))
    except Exception as exc:
        return f"unavailable ({type(exc).__name__})"


# ---------------------------------------------------------------- reading the matrix


@dataclass(frozen=True)
class _Pair:
    """One kernel on one target, all its cells read together."""

    label: str
    target: str
    primary: PortCell  # the tuned cell when there is one, else the default
    cells: tuple[PortCell, ...]

    @property
    def as_is(self) -> bool:
        return self.primary.status == "lowers"

    @property
    def builds(self) -> bool:
        """Some config fits and lowers there: the tuned, the default, or a fitting one."""
        return any(c.status == "lowers" or c.fitting_config for c in self.cells)

    @property
    def fix(self) -> KernelConfig | None:
        ok = [c.config for c in self.cells if c.status == "lowers" and c.config_kind != self.primary.config_kind]
        return self.primary.fitting_config or (ok[0] if ok else None)


def _pairs(p: Portability) -> list[_Pair]:
    out = []
    for label in p.kernels:
        for t in p.targets:
            cells = tuple(c for c in p.cells if c.target == t and kernel_label(c.family, c.shape, c.dtype) == label)
            if not cells:
                continue
            primary = next((c for c in cells if c.config_kind == "tuned"), cells[0])
            out.append(_Pair(label, t, primary, cells))
    return out


def _config_str(config: KernelConfig | None) -> str:
    if not config:
        return "—"
    keys = ("block_M", "block_N", "block_K", "block_rows", "num_stages", "threads", "chunk", "split_k")
    shown = [f"{k}={config[k]}" for k in keys if k in config]
    return ", ".join(shown) or ", ".join(f"{k}={v}" for k, v in config.items())


config_str = _config_str  # the tile sizes, stages and threads of a config, for reports


@dataclass(frozen=True)
class Retune:
    """A kernel that builds on a target only with another config than the one it has."""

    label: str
    cell: PortCell  # the tuned cell (the default when nothing was tuned): what breaks
    fix: KernelConfig | None  # a config that fits and lowers there, when one was found


@dataclass(frozen=True)
class Failure:
    """One distinct reason no config builds on a target, and the kernels it stops."""

    failure_class: str
    reason: str
    labels: tuple[str, ...]


@dataclass(frozen=True)
class TargetFacts:
    """What the matrix says about one target, as data: the summary sentence here and the
    report's sentences (in its own language) are both written from it."""

    target: str
    name: str
    kernels: int  # kernels checked
    builds: tuple[str, ...]  # labels with some config that fits and lowers there
    as_is: tuple[str, ...]  # labels whose own config (tuned, else default) lowers unchanged
    retune: tuple[Retune, ...]
    failures: tuple[Failure, ...]
    notes: tuple[str, ...]  # caveats of cells that lower (instruction below the target's best)


def target_facts(p: Portability) -> list[TargetFacts]:
    """One `TargetFacts` per target, in the order the targets were asked."""
    pairs = _pairs(p)
    out = []
    for t in p.targets:
        mine = [x for x in pairs if x.target == t]
        failed: dict[tuple[str, str], list[str]] = {}
        for x in mine:
            if not x.builds:
                failed.setdefault((x.primary.failure_class, x.primary.reason), []).append(x.label)
        out.append(TargetFacts(
            target=t, name=p.target_names.get(t, t), kernels=len(p.kernels),
            builds=tuple(x.label for x in mine if x.builds), as_is=tuple(x.label for x in mine if x.as_is),
            retune=tuple(Retune(x.label, x.primary, x.fix) for x in mine if x.builds and not x.as_is),
            failures=tuple(Failure(cls, reason, tuple(labels)) for (cls, reason), labels in failed.items()),
            notes=tuple(dict.fromkeys(c.note for x in mine for c in x.cells if c.note and c.status == "lowers"))))
    return out


def _with_summary(p: Portability) -> Portability:
    from dataclasses import replace

    n = len(p.kernels)
    facts = target_facts(p)
    lines = []
    good_targets = [f.target for f in facts if len(f.builds) == f.kernels]
    lines.append(f"{len(good_targets)} of {len(p.targets)} targets build every rewritten kernel"
                 + (f" ({', '.join(good_targets)})" if good_targets else "")
                 + f"; TileLang {p.tilelang}, {p.lowerings} lowerings in {p.seconds:.1f} s.")
    for f in facts:
        text = f"{len(f.builds)} of {n} rewritten kernels build for {f.name}"
        if f.retune:
            parts = [f"{r.label}'s {r.cell.config_kind} config {_short_reason(r.cell)}"
                     + (f" ({_config_str(r.fix)} fits and lowers)" if r.fix else "") for r in f.retune]
            text += f"; {len(f.retune)} need{'s' if len(f.retune) == 1 else ''} re-tuning there: " + "; ".join(parts)
        # One clause per distinct reason, naming the kernels it stops.
        for fail in f.failures:
            labels = fail.labels
            who = "all of them" if len(labels) == n and n > 1 else ", ".join(labels)
            text += (f"; {who} fail{'s' if len(labels) == 1 and who != 'all of them' else ''} "
                     f"({fail.failure_class}: {fail.reason})")
        if f.notes:
            text += "; note: " + "; ".join(f.notes)
        lines.append(text + ".")
    return replace(p, summary=tuple(lines))


def _short_reason(cell: PortCell) -> str:
    if cell.status == "needs_retuning":
        return cell.reason
    return f"fails to lower ({cell.failure_class}: {cell.reason})"


def rows(p: Portability) -> list[dict[str, str]]:
    """The matrix for printing: one row per kernel and config kind, one column per target
    key, plus "kernel" and "config". Cell text: "lowers (wgmma)", "re-tune: <reason>",
    "fails (codegen): <reason>"."""
    out = []
    for label in p.kernels:
        for kind in ("tuned", "default"):
            cells = {c.target: c for c in p.cells
                     if kernel_label(c.family, c.shape, c.dtype) == label and c.config_kind == kind}
            if not cells:
                continue
            row = {"kernel": label, "config": kind}
            for t in p.targets:
                c = cells.get(t)
                row[t] = "—" if c is None else cell_text(c)
            out.append(row)
    return out


def cell_text(c: PortCell) -> str:
    if c.status == "lowers":
        return "lowers" + (f" ({c.instruction})" if c.instruction else "")
    fit = f" → fits: {_config_str(c.fitting_config)}" if c.fitting_config else ""
    if c.status == "needs_retuning":
        return f"re-tune: {c.reason}{fit}"
    return f"fails ({c.failure_class}): {c.reason}{fit}"


def format_matrix(p: Portability, width: int = 38) -> str:
    """A plain-text table of `rows(p)` (cells cut to `width`) followed by the summary."""
    table = rows(p)
    cols = ["kernel", "config"] + list(p.targets)

    def cut(s: str) -> str:
        return s if len(s) <= width else s[: width - 1] + "…"

    widths = {c: max(len(c), *(len(cut(r[c])) for r in table)) if table else len(c) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols)]
    lines += ["  ".join(cut(r[c]).ljust(widths[c]) for c in cols) for r in table]
    return "\n".join(lines + [""] + list(p.summary))


# ---------------------------------------------------------------- checklist numbers

# name -> (unit, meaning), for the checklist catalogue; per-target numbers follow the
# pattern "portability.<target>.kernels_ok" for every target checked.
METRIC_INFO: dict[str, tuple[str, str]] = {
    "portability.targets_ok": ("fraction", "share of the checked targets where every rewritten kernel lowers "
                               "with a config that fits the target's published limits"),
    "portability.kernels_ok": ("fraction", "share of rewritten kernels that lower, with a config that fits, "
                               "on every checked target"),
    "portability.as_is": ("fraction", "share of (kernel, target) pairs where the tuned config (the default "
                          "when none was tuned) lowers and fits unchanged"),
    "portability.needs_retuning": ("pairs", "(kernel, target) pairs that build only with another config "
                                   "(the tuned one breaks a limit or does not lower)"),
    "portability.fails": ("pairs", "(kernel, target) pairs where no config lowers and fits"),
    "portability.fails.resources": ("pairs", "failing pairs whose config breaks a shared-memory, register "
                                    "or thread limit"),
    "portability.fails.codegen": ("pairs", "failing pairs stopped by a TileLang code-generation gap"),
    "portability.fails.feature": ("pairs", "failing pairs stopped by a missing feature, dtype or backend"),
    "portability.fails.numerical": ("pairs", "failing pairs whose kernel ran on the local device and "
                                    "did not match PyTorch"),
    "portability.targets": ("targets", "number of targets checked"),
}


def metrics(p: Portability) -> dict[str, float]:
    pairs = _pairs(p)
    out: dict[str, float] = {}
    if not pairs:
        return out
    by_target = {t: [x for x in pairs if x.target == t] for t in p.targets}
    by_kernel = {k: [x for x in pairs if x.label == k] for k in p.kernels}
    out["portability.targets_ok"] = sum(all(x.builds for x in xs) for xs in by_target.values()) / len(by_target)
    out["portability.kernels_ok"] = sum(all(x.builds for x in xs) for xs in by_kernel.values()) / len(by_kernel)
    out["portability.as_is"] = sum(x.as_is for x in pairs) / len(pairs)
    out["portability.needs_retuning"] = float(sum(x.builds and not x.as_is for x in pairs))
    failed = [x for x in pairs if not x.builds]
    out["portability.fails"] = float(len(failed))
    for cls in FAILURE_CLASSES:
        out[f"portability.fails.{cls}"] = float(sum(x.primary.failure_class == cls for x in failed))
    out["portability.targets"] = float(len(p.targets))
    for t, xs in by_target.items():
        out[f"portability.{t}.kernels_ok"] = sum(x.builds for x in xs) / len(xs)
    return out


def explain(p: Portability | None, name: str = "") -> str:
    """Evidence for a checklist item: the summary line of the target it names, else all."""
    if p is None:
        return "portability not checked"
    parts = name.split(".")
    if len(parts) == 3 and parts[1] in p.targets:
        idx = p.targets.index(parts[1])
        return p.summary[1 + idx] if len(p.summary) > 1 + idx else ""
    return " ".join(p.summary)
