"""The one frozen `Config`, built once at the edge (the CLI), with a slice per stage.

In: raw option values from the command line. Out: a validated `Config`, or a
`ConfigError` whose message is one sentence naming the option and what it expects. Every
cheap check (model name, counts and durations, families, checklist, upstream path,
device, portability targets, whether the reports folder and the baseline store can be
written) happens here, so a mistake costs a one-line error before any minutes of
profiling and compiling, and a store that cannot take the baseline is found before the
run rather than at its end.
"""

from __future__ import annotations

import json

import math
import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .bench import TimingPolicy
from .errors import ConfigError, EvaluatorError
from .kernels.base import DTYPE_ALIASES
from .resources import SHIPPED_CHECKLISTS


def default_label(spec: str) -> str:
    """The name a model goes by in baseline ids and reports when `--name` is not given.

    A factory file's folder is left out, so the same model keeps one baseline history
    whichever folder (or checkout) it is run from: "path/to/hf_bert.py:make" ->
    "hf_bert:make". Zoo names, "pkg.mod:make" and "hf:Model,key=value" stay as they are.
    """
    target, sep, attr = spec.rpartition(":")
    if sep and target.endswith(".py"):
        return f"{Path(target).stem}:{attr}"
    return spec


@dataclass(frozen=True)
class ModelSettings:
    name: str  # the spec that loads the model: zoo name, pkg.mod:factory, path/file.py:factory
    batch_size: int | None = None
    seq_len: int | None = None
    dtype: str = "float32"
    seed: int = 0
    label: str = ""  # its name in baseline ids and reports; "" means default_label(name)

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", default_label(self.name))


@dataclass(frozen=True)
class ProfileSettings:
    ops: int = 2  # how many hot families to rewrite
    families: tuple[str, ...] = ()  # explicit choice, overrides `ops`
    iters: int = 3
    max_shapes: int = 6  # per family, the hottest distinct shapes first


@dataclass(frozen=True)
class TuneSettings:
    budget_s: float = 60.0  # per shape
    use_cache: bool = True
    # Rounds of neighbours around the best coarse config. One on CPU: its candidates are
    # single-threaded C and each round costs the demo tens of seconds.
    fine_rounds: int = 3
    isolate: bool | None = None  # candidates in a worker process; None: on CUDA only


@dataclass(frozen=True)
class BenchSettings:
    timing: TimingPolicy = field(default_factory=TimingPolicy)
    seeds: tuple[int, ...] = (0, 1, 2)
    sweep: bool = False  # also benchmark each family's standard shapes
    e2e: bool = True
    soak_s: float = 5.0


@dataclass(frozen=True)
class UpstreamSettings:
    repo: str | None = None
    fork: str | None = None
    as_of: datetime | None = None
    branch: str | None = None


@dataclass(frozen=True)
class PortabilitySettings:
    # Target keys (targets.py) the rewritten kernels are lowered for; () skips the stage
    # (--targets none); None is the module's default set, resolved when the stage runs.
    targets: tuple[str, ...] | None = None
    # The dtype they are checked at; None: the run's own. A CPU run measures float32, but
    # the model runs at float16 on a GPU (the GPU default), and float32 attention has no GPU
    # schedule at all: checking float32 would report a gap nobody deploys.
    dtype: str | None = None


@dataclass(frozen=True)
class OutputSettings:
    # Relative to where `evaluate` runs (resolved in build): a wheel install has no
    # checkout to write into.
    reports: Path = Path("reports")
    store: Path = Path("reports") / "baselines"
    checklist: Path = SHIPPED_CHECKLISTS / "default.yaml"
    lang: str = "en"
    pdf: bool = True
    fail_on: str = "never"  # "never" | "no-go" | "conditional"
    regression_threshold: float = 0.05  # smallest relative change against the last baseline that counts
    # A shared store: the git URL (or bare repository) --store named; `store` is then the
    # local clone the run records into, and `push` sends the baseline to the remote.
    store_remote: str | None = None
    push: bool = False


@dataclass(frozen=True)
class Config:
    model: ModelSettings
    device: str  # "cpu" | "cuda", resolved
    profile: ProfileSettings = field(default_factory=ProfileSettings)
    tune: TuneSettings = field(default_factory=TuneSettings)
    bench: BenchSettings = field(default_factory=BenchSettings)
    upstream: UpstreamSettings = field(default_factory=UpstreamSettings)
    output: OutputSettings = field(default_factory=OutputSettings)
    portability: PortabilitySettings = field(default_factory=PortabilitySettings)

    def settings_dict(self) -> dict:
        """What goes into the baseline manifest: everything that changes a measurement."""
        # fine_rounds and isolate change which config tuning finds; isolate is recorded as
        # resolved (auto is on for CUDA only, as tuning decides it).
        isolate = self.tune.isolate if self.tune.isolate is not None else self.device == "cuda"
        return {
            "model_label": self.model.label,
            "device": self.device, "batch_size": self.model.batch_size, "seq_len": self.model.seq_len,
            "dtype": self.model.dtype, "seed": self.model.seed, "ops": self.profile.ops,
            "families": list(self.profile.families), "profile_iters": self.profile.iters,
            "max_shapes": self.profile.max_shapes, "tune_budget_s": self.tune.budget_s,
            "fine_rounds": self.tune.fine_rounds, "isolate": isolate,
            "seeds": list(self.bench.seeds), "sweep": self.bench.sweep, "e2e": self.bench.e2e,
            "soak_s": self.bench.soak_s, "timing": self.bench.timing.describe(self.device),
            "regression_threshold": self.output.regression_threshold,
            "checklist": str(self.output.checklist), "upstream": self.upstream.repo, "fork": self.upstream.fork,
            "as_of": self.upstream.as_of.isoformat() if self.upstream.as_of else None,
            "branch": self.upstream.branch,
            # Which targets the portability matrix covers ([] = --targets none) and at what dtype.
            "targets": list(self.portability.targets) if self.portability.targets is not None else "default",
            "targets_dtype": self.portability.dtype or self.model.dtype,
        }


def parse_as_of(text: str | None) -> datetime | None:
    """None for no --as-of; else upstream's reading of it: a bare date is that whole day
    in UTC (until 23:59:59.999999), a timestamp is exact."""
    if not text:
        return None
    from . import upstream

    try:
        return upstream.parse_as_of(text)
    except EvaluatorError as exc:
        raise ConfigError(f"--as-of '{text}' is not a date; use YYYY-MM-DD (the whole day, UTC) or an "
                          "ISO timestamp such as 2026-01-31T12:00:00+00:00") from exc


# ---------------------------------------------------------------- checks, one per kind of option


def parse_targets(text: str | None, opt: str = "--targets") -> tuple[str, ...]:
    """--targets a100,h100|all|none -> target keys, () for none; None (not given) is the
    default set. Unknown names: one line naming the known targets, before any work."""
    from . import targets as T

    words = [w.strip().lower() for w in (text or "").split(",") if w.strip()]
    known = f"known targets: {', '.join(T.TARGETS)}, local (this machine's GPU), all, or none to skip the check"
    if text is not None and not words:
        raise ConfigError(f"{opt} was given no target; {known}")
    if "none" in words:
        if len(words) > 1:
            raise ConfigError(f"{opt} {text}: 'none' skips the portability check and cannot be combined with "
                              f"targets; {known}")
        return ()
    bad = [w for w in words if w not in T.TARGETS and w not in ("all", "local")]
    if bad:
        raise ConfigError(f"{opt} {text}: unknown target '{bad[0]}'; {known}")
    try:
        return tuple(s.key for s in T.resolve(words or None))
    except ConfigError as exc:  # 'local' on a machine without a GPU
        raise ConfigError(f"{opt} {text}: {exc}") from None


def check_count(opt: str, value: int | None, minimum: int) -> None:
    """An integer option that must be at least `minimum` (None: not given)."""
    if value is not None and value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer of at least {minimum}"
        raise ConfigError(f"{opt} must be {what}, got {value}")


def check_seconds(opt: str, value: float | None) -> None:
    """A duration in seconds: finite and not negative (0 is allowed: it means skip or minimum)."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise ConfigError(f"{opt} must be a number of seconds, 0 or more, got {value:g}")


def _can_write(folder: Path) -> bool:
    # os.access answers from the permission bits; ACLs, network filesystems and quotas can
    # still refuse a write, so also create (and drop) a temporary file. TemporaryFile is
    # unnamed on Linux (O_TMPFILE): a concurrent run listing the store never sees it.
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError:
        return False
    return True


def check_writable_folder(opt: str, path: Path) -> None:
    """A folder the run will write into: an existing writable folder, or one that can be
    created (its nearest existing parent is a writable folder). Nothing is created here."""
    path = Path(path).expanduser().absolute()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{opt} {path} is a file; give a folder (a new one, or an existing one you can write to)")
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{opt} {path} cannot be created: {parent} is a file; give a folder you can write to")
    if not _can_write(parent):
        if parent == path:
            raise ConfigError(f"{opt} {path} is not writable; give a folder you can write to (or fix its permissions)")
        raise ConfigError(f"{opt} {path} cannot be created: {parent} is not writable; give a folder you can write to")


def find_checklist(name_or_path: str | Path) -> Path:
    """--checklist: a file, or a name (a team's ./checklists/NAME.yaml before a shipped one)."""
    from . import resources

    found = resources.find_checklist(name_or_path)
    if found is None:
        raise ConfigError(f"checklist '{name_or_path}' does not exist; give a YAML file or a checklist name: "
                          f"{', '.join(resources.checklist_names())} (./checklists/NAME.yaml, then shipped)")
    return found


def _check_repo(opt: str, value: str | None) -> None:
    if not value or "://" in value or value.startswith("git@"):
        return  # URLs are cloned (and checked) by the upstream stage
    p = Path(value).expanduser()
    if not p.exists():
        raise ConfigError(f"{opt} '{value}' does not exist; give a local git clone or a URL")
    if not ((p / ".git").exists() or ((p / "HEAD").is_file() and (p / "objects").is_dir())):
        raise ConfigError(f"{opt} '{value}' is not a git repository; give the folder of a git clone")


ISOLATE = {"auto": None, "on": True, "off": False}


def build(*, model: str, device: str = "auto", batch_size: int | None = None, seq_len: int | None = None,
          dtype: str | None = None, ops: int = 2, families: str | None = None, profile_iters: int = 3,
          max_shapes: int = 6, budget: float = 60.0, no_cache: bool = False, reps: int = 20, warmup: int = 3,
          sweep: bool = False, e2e: bool = True, soak_seconds: float | None = None, upstream: str | None = None,
          fork: str | None = None, as_of: str | None = None, branch: str | None = None,
          reports: Path | None = None, store: str | Path | None = None, checklist: Path | None = None,
          lang: str = "en", pdf: bool = True, fail_on: str = "never", seed: int = 0,
          regression_threshold: float = 0.05, fine_rounds: int | None = None,
          isolate: str = "auto", label: str | None = None, targets: str | None = None, push: bool = False) -> Config:
    from . import baseline, hardware, kernels, models

    if model not in models.ZOO and ":" not in model:
        raise ConfigError(f"unknown model '{model}'; use one of {', '.join(models.ZOO)}, "
                          "or pkg.module:factory, or path/to/file.py:factory")
    label = default_label(model) if label is None else label.strip()
    try:
        baseline.model_slug(label)  # a name that cannot make a baseline id fails now, not after the run
    except EvaluatorError as exc:
        raise ConfigError(f"--name {label!r} cannot name a baseline; give a name with letters or digits, "
                          "e.g. --name bert-finetuned") from exc
    # Counts and durations first: --reps 0 used to surface as a StatisticsError at the
    # first timing, minutes in.
    check_count("--reps", reps, 1)
    check_count("warmup", warmup, 0)
    check_count("--max-shapes", max_shapes, 1)
    check_count("--profile-iters", profile_iters, 1)
    check_seconds("--budget", budget)
    check_seconds("--soak-seconds", soak_seconds)
    dev = hardware.resolve_device(device)
    explicit_dtype = dtype is not None
    if dtype is None:
        dtype = "float16" if dev == "cuda" else "float32"
    if dtype not in DTYPE_ALIASES:
        raise ConfigError(f"unknown dtype '{dtype}'; use fp32, fp16 or bf16")
    fams = tuple(f.strip() for f in families.split(",") if f.strip()) if families else ()
    for f in fams:
        kernels.get(f)
    if ops < 1:
        raise ConfigError("--ops must be at least 1")
    for opt, val in (("--batch-size", batch_size), ("--seq-len", seq_len)):
        if val is not None and val < 1:
            raise ConfigError(f"{opt} must be a positive integer, got {val}")
    if fail_on not in ("never", "no-go", "conditional"):
        raise ConfigError(f"--fail-on '{fail_on}' is not allowed; use never, no-go or conditional")
    if not 0 < regression_threshold < 10:
        raise ConfigError(f"--regression-threshold {regression_threshold} is out of range; give a fraction such as 0.05")
    if isolate not in ISOLATE:
        raise ConfigError(f"--isolate '{isolate}' is not allowed; use auto, on or off")
    if fine_rounds is not None and not 0 <= fine_rounds <= 10:
        raise ConfigError(f"--fine-rounds must be between 0 and 10, got {fine_rounds}")
    if lang not in ("en", "zh"):
        raise ConfigError(f"--lang '{lang}' is not available; use en or zh")
    out = OutputSettings()
    checklist = find_checklist(checklist) if checklist else out.checklist
    from . import checklist as checklist_mod
    checklist_mod.load(checklist)  # a checklist that does not validate fails now, not after the run
    _check_repo("--upstream", upstream)
    _check_repo("--fork", fork)
    as_of_time = parse_as_of(as_of)
    target_keys = parse_targets(targets)
    # Checked at the dtype asked for, or the one the model runs at on a GPU (see PortabilitySettings).
    target_dtype = DTYPE_ALIASES[dtype] if explicit_dtype or dev == "cuda" else "float16"
    reports = (Path(reports).expanduser() if reports else out.reports).resolve()
    # Where the results go: a run that cannot write its folder or its baseline would
    # otherwise find out at the very end and lose the minutes it measured.
    check_writable_folder("--reports", reports)
    from . import baseline

    store_remote = None
    if store is not None and baseline.is_remote(store):
        # A shared store: cloned now, so a bad URL or missing credentials fail before the run.
        check_writable_folder("--store", baseline.clone_path(store))
        store_remote, store = str(store), baseline.open_store(store).path
    else:
        store = Path(store).expanduser().absolute() if store else reports / "baselines"
        check_writable_folder("--store", store)
    if push and baseline.remote_of(store_remote or store) is None:
        raise ConfigError("--push needs a shared store: --store with a git URL or bare repository, "
                          "or a clone that has an origin")
    return Config(
        model=ModelSettings(model, batch_size, seq_len, DTYPE_ALIASES[dtype], seed, label),
        device=dev,
        profile=ProfileSettings(ops=ops, families=fams, iters=profile_iters, max_shapes=max_shapes),
        tune=TuneSettings(budget_s=budget, use_cache=not no_cache,
                          fine_rounds=fine_rounds if fine_rounds is not None else (3 if dev == "cuda" else 1),
                          isolate=ISOLATE[isolate]),
        bench=BenchSettings(timing=TimingPolicy(warmup=warmup, reps=reps), sweep=sweep, e2e=e2e,
                            soak_s=soak_seconds if soak_seconds is not None else (60.0 if dev == "cuda" else 5.0)),
        upstream=UpstreamSettings(upstream, fork, as_of_time, branch),
        output=OutputSettings(reports=reports, store=store,
                              checklist=checklist, lang=lang, pdf=pdf, fail_on=fail_on,
                              regression_threshold=regression_threshold, store_remote=store_remote, push=push),
        portability=PortabilitySettings(targets=target_keys, dtype=target_dtype),
    )


# ---------------------------------------------------------------- a run's config on disk


def to_json(cfg: Config) -> str:
    """The whole config as JSON, saved in the run folder so `--resume` rebuilds it exactly."""
    from pydantic import TypeAdapter

    return json.dumps(TypeAdapter(Config).dump_python(cfg, mode="json"), indent=1)


def from_json(text: str) -> Config:
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(Config).validate_python(json.loads(text))
    except (ValueError, ValidationError) as exc:
        raise ConfigError(f"the run's config.json does not load ({str(exc).splitlines()[0]}); "
                          "it was written by another version, start a new run") from exc
