"""The one frozen `Config`, built once at the edge (the CLI), with a slice per stage.

In: raw option values from the command line. Out: a validated `Config`; every cheap
check (model name, families, checklist file, upstream path, device) happens here so a
mistake costs a one-line error before any minutes of profiling and compiling.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from .bench import TimingPolicy
from .errors import ConfigError
from .kernels.base import DTYPE_ALIASES



@dataclass(frozen=True)
class ModelSettings:
    name: str
    batch_size: int | None = None
    seq_len: int | None = None
    dtype: str = "float32"
    seed: int = 0


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
class OutputSettings:
    # Relative to where `evaluate` runs (resolved in build): a wheel install has no
    # checkout to write into.
    reports: Path = Path("reports")
    store: Path = Path("reports") / "baselines"
    checklist: Path = Path(__file__).resolve().parent / "checklists" / "default.yaml"
    lang: str = "en"
    pdf: bool = True
    fail_on: str = "never"  # "never" | "no-go" | "conditional"
    regression_threshold: float = 0.05  # smallest relative change against the last baseline that counts


@dataclass(frozen=True)
class Config:
    model: ModelSettings
    device: str  # "cpu" | "cuda", resolved
    profile: ProfileSettings = field(default_factory=ProfileSettings)
    tune: TuneSettings = field(default_factory=TuneSettings)
    bench: BenchSettings = field(default_factory=BenchSettings)
    upstream: UpstreamSettings = field(default_factory=UpstreamSettings)
    output: OutputSettings = field(default_factory=OutputSettings)

    def settings_dict(self) -> dict:
        """What goes into the baseline manifest: everything that changes a measurement."""
        return {
            "device": self.device, "batch_size": self.model.batch_size, "seq_len": self.model.seq_len,
            "dtype": self.model.dtype, "seed": self.model.seed, "ops": self.profile.ops,
            "families": list(self.profile.families), "profile_iters": self.profile.iters,
            "max_shapes": self.profile.max_shapes, "tune_budget_s": self.tune.budget_s,
            "seeds": list(self.bench.seeds), "sweep": self.bench.sweep, "e2e": self.bench.e2e,
            "soak_s": self.bench.soak_s, "timing": self.bench.timing.describe(self.device),
            "regression_threshold": self.output.regression_threshold,
            "checklist": str(self.output.checklist), "upstream": self.upstream.repo, "fork": self.upstream.fork,
        }


def parse_as_of(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"--as-of '{text}' is not a date; use YYYY-MM-DD or an ISO timestamp") from None
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


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
          reports: Path | None = None, store: Path | None = None, checklist: Path | None = None,
          lang: str = "en", pdf: bool = True, fail_on: str = "never", seed: int = 0,
          regression_threshold: float = 0.05, fine_rounds: int | None = None,
          isolate: str = "auto") -> Config:
    from . import hardware, kernels, models

    if model not in models.ZOO and ":" not in model:
        raise ConfigError(f"unknown model '{model}'; use one of {', '.join(models.ZOO)}, "
                          "or pkg.module:factory, or path/to/file.py:factory")
    dev = hardware.resolve_device(device)
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
    checklist = Path(checklist) if checklist else out.checklist
    shipped = out.checklist.parent / f"{checklist}.yaml"
    if not checklist.is_file() and len(checklist.parts) == 1 and shipped.is_file():
        checklist = shipped  # a shipped checklist by name: --checklist production
    if not checklist.is_file():
        raise ConfigError(f"checklist '{checklist}' does not exist; give a YAML file or a shipped name "
                          f"({', '.join(sorted(p.stem for p in out.checklist.parent.glob('*.yaml')))})")
    from . import checklist as checklist_mod
    checklist_mod.load(checklist)  # a checklist that does not validate fails now, not after the run
    _check_repo("--upstream", upstream)
    _check_repo("--fork", fork)
    reports = (Path(reports) if reports else out.reports).resolve()
    return Config(
        model=ModelSettings(model, batch_size, seq_len, DTYPE_ALIASES[dtype], seed),
        device=dev,
        profile=ProfileSettings(ops=ops, families=fams, iters=profile_iters, max_shapes=max_shapes),
        tune=TuneSettings(budget_s=budget, use_cache=not no_cache,
                          fine_rounds=fine_rounds if fine_rounds is not None else (3 if dev == "cuda" else 1),
                          isolate=ISOLATE[isolate]),
        bench=BenchSettings(timing=TimingPolicy(warmup=warmup, reps=reps), sweep=sweep, e2e=e2e,
                            soak_s=soak_seconds if soak_seconds is not None else (60.0 if dev == "cuda" else 5.0)),
        upstream=UpstreamSettings(upstream, fork, parse_as_of(as_of), branch),
        output=OutputSettings(reports=reports, store=Path(store) if store else reports / "baselines",
                              checklist=checklist, lang=lang, pdf=pdf, fail_on=fail_on,
                              regression_threshold=regression_threshold),
    )
