"""The one frozen `Config`, built once at the edge (the CLI), with a slice per stage.

In: raw option values from the command line. Out: a validated `Config`, or a
`ConfigError` whose message is one sentence naming the option and what it expects. Every
cheap check (model name, counts and durations, families, checklist, upstream path,
device and the target its kernels are built for, portability targets, whether the
reports folder and the baseline store can be written and the store's repository is
whole) happens here, so a mistake costs a one-line error before any minutes of profiling
and compiling, and a store that cannot take the baseline is found before the run rather
than at its end.

Every option's default is written once, here: `DEFAULTS` for the fixed ones and
`device_defaults` for those that depend on the device. `build`'s keywords, the settings
dataclasses' fields and the command line's options (evaluator/cli) all read them, and
tests/test_config.py checks that they agree. This module imports neither torch nor a
kernel at the top, so the command line can read the defaults for `--help` at no cost.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .checks import (
    check_repo,
    check_count,
    check_folder_given,
    check_seconds,
    check_text_given,
    check_share,
    check_writable_folder,
    find_checklist,
    parse_as_of,
    parse_targets,
)
from ..errors import ConfigError, EvaluatorError
from ..resources import SHIPPED_CHECKLISTS

if TYPE_CHECKING:  # imported where needed: timing.py imports torch (a second on every --help)
    from ..measuring.timing import TimingPolicy


# ---------------------------------------------------------------- defaults, in one place

# `build`'s keyword -> its default. Options whose default is "not given" (None: --dtype,
# --batch-size, --soak-seconds, --fine-rounds, --compile-mode, --reports, --store,
# --checklist, --targets, --upstream...) are resolved in `build`: from the device (device_defaults), the model,
# the reports folder (OutputSettings) or the targets module.
DEFAULTS: dict[str, Any] = {
    "device": "auto",  # CUDA when torch sees one
    "seed": 0,
    "ops": 2,  # the two hottest families with a kernel
    "profile_iters": 3,
    # Per family, shapes hottest first until they hold this share of its profiled time
    # (every ResNet-50 convolution that matters); --max-shapes caps the count (not given: no cap).
    "shape_share": 0.95,
    "fuse": True,  # with a chosen family, its fused variants where the model has their pattern
    "budget": 60.0,  # tuning seconds per shape
    "no_cache": False,
    "isolate": "auto",  # see device_defaults
    "reps": 20,  # interleaved timing rounds per comparison
    "warmup": 3,
    "sweep": False,
    "e2e": True,
    "lang": "en",
    "pdf": True,
    "fail_on": "never",
    "regression_threshold": 0.05,  # smallest relative change against the last baseline that counts
    "push": False,
    # auto: channels-last for a convolutional net on a GPU, as given otherwise (models.choose_layout);
    # on a GPU channels_last made ResNet-50 faster on all three paths (docs/results.md, "Layout").
    "layout": "auto",
}

ISOLATE = {"auto": None, "on": True, "off": False}  # --isolate -> TuneSettings.isolate
# --compile-mode: torch.compile as a third side beside TileLang and PyTorch eager (compiled.py
# says what each is given to Inductor); "none" skips it.
COMPILE_MODES = ("max-autotune", "default", "none")
STORE_FOLDER = "baselines"  # the baseline store's folder inside --reports when --store is not given


def device_defaults(device: str) -> dict[str, Any]:
    """The defaults that depend on the resolved device ("cuda" or "cpu"), in one place.

    dtype: float16 on a GPU, what models are deployed at there; float32 on a CPU, where
    PyTorch runs them by default. soak_seconds: a minute on a GPU; 5 s on a CPU keeps the
    CPU demo at about two minutes. fine_rounds: neighbour rounds after the coarse grid;
    one on CPU, where each candidate is single-threaded C and a round costs the demo tens
    of seconds. isolate: what --isolate auto means (tuning.py decides the same way): a
    worker process on CUDA, where a bad candidate can poison the GPU context; in-process
    on CPU, where the worker's imports would cost more than the candidates. compile_mode:
    the torch.compile side; max-autotune on a GPU, what a team tuning for speed would
    compare with; default on a CPU, where max-autotune's GEMM templates do not apply and
    only add minutes of C++ builds.
    """
    if device == "cuda":
        return {
            "dtype": "float16",
            "soak_seconds": 60.0,
            "fine_rounds": 3,
            "isolate": True,
            "compile_mode": "max-autotune",
        }
    return {"dtype": "float32", "soak_seconds": 5.0, "fine_rounds": 1, "isolate": False, "compile_mode": "default"}


def dtype_flag(dtype: str) -> str:
    """ "float16" -> "fp16", "bfloat16" -> "bf16": a dtype as --dtype spells it, for help texts."""
    return dtype.replace("bfloat", "bf").replace("float", "fp")


# The settings dataclasses' device-dependent defaults are the CPU ones: a settings object
# made without `build` (a test, an old config.json lacking a field) is a CPU one.
_CPU = device_defaults("cpu")


def _default_timing() -> TimingPolicy:
    """BenchSettings' timing policy: the timer's own, at DEFAULTS' reps and warm-up."""
    from ..measuring.timing import TimingPolicy  # here, not at the top: it imports torch

    return TimingPolicy(warmup=DEFAULTS["warmup"], reps=DEFAULTS["reps"], compile_mode=_CPU["compile_mode"])


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


# ---------------------------------------------------------------- the settings, a slice per stage


@dataclass(frozen=True)
class ModelSettings:
    name: str  # the spec that loads the model: zoo name, pkg.mod:factory, path/file.py:factory
    batch_size: int | None = None
    seq_len: int | None = None
    dtype: str = _CPU["dtype"]
    seed: int = DEFAULTS["seed"]
    label: str = ""  # its name in baseline ids and reports; "" means default_label(name)
    # --lengths LO-HI: each sequence's length drawn in [LO, HI], padded to seq_len behind an
    # attention mask (a serving batch); None: every sequence is seq_len long.
    lengths: tuple[int, int] | None = None
    # --layout: "auto" (channels-last for a convolutional net on a GPU), "as-given" or
    # "channels-last", the same for eager, torch.compile and TileLang (models.choose_layout).
    layout: str = DEFAULTS["layout"]

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", default_label(self.name))


@dataclass(frozen=True)
class ProfileSettings:
    ops: int = DEFAULTS["ops"]  # how many hot families to rewrite
    families: tuple[str, ...] = ()  # explicit choice, overrides `ops`
    iters: int = DEFAULTS["profile_iters"]
    max_shapes: int | None = None  # per family, at most this many shapes (None: no cap)
    shape_share: float = DEFAULTS["shape_share"]  # per family, hottest shapes until this share of its time
    fuse: bool = DEFAULTS["fuse"]  # add the fused variants of the chosen families (profiling.fusions)


@dataclass(frozen=True)
class TuneSettings:
    budget_s: float = DEFAULTS["budget"]  # per shape
    use_cache: bool = not DEFAULTS["no_cache"]
    fine_rounds: int = _CPU["fine_rounds"]  # rounds of neighbours around the best coarse config
    isolate: bool | None = ISOLATE[DEFAULTS["isolate"]]  # candidates in a worker process; None: on CUDA only
    devices: tuple[int, ...] | None = None  # --gpus: candidates timed on these GPUs at once, re-timed on the first


@dataclass(frozen=True)
class BenchSettings:
    timing: TimingPolicy = field(default_factory=_default_timing)
    seeds: tuple[int, ...] = (0, 1, 2)
    sweep: bool = DEFAULTS["sweep"]  # also benchmark each family's standard shapes
    e2e: bool = DEFAULTS["e2e"]
    soak_s: float = _CPU["soak_seconds"]


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
    store: Path = Path("reports") / STORE_FOLDER
    checklist: Path = SHIPPED_CHECKLISTS / "default.yaml"
    lang: str = DEFAULTS["lang"]
    pdf: bool = DEFAULTS["pdf"]
    fail_on: str = DEFAULTS["fail_on"]  # "never" | "no-go" | "conditional"
    regression_threshold: float = DEFAULTS["regression_threshold"]
    # A shared store: the git URL (or bare repository) --store named; `store` is then the
    # local clone the run records into, and `push` sends the baseline to the remote.
    store_remote: str | None = None
    push: bool = DEFAULTS["push"]


# Config fields that settings_dict leaves out, and why: none changes a measured number or
# the verdict. tests/test_config.py fails when a settings dataclass gains a field that is
# neither recorded nor listed here.
NOT_RECORDED = {
    "model.name": "the --model spec is recorded with the model itself (ModelSpec: name, origin, spec_hash)",
    "bench.timing.graph_ms": "a constant of the timer, not an option: the evaluator version records it",
    "bench.timing.sample_ms_cpu": "a constant of the timer, not an option: the evaluator version records it",
    "output.reports": "where the run is written",
    "output.store": "where the baseline is recorded",
    "output.store_remote": "where the baseline is pushed",
    "output.push": "whether the baseline is pushed",
    "output.lang": "the report's language",
    "output.pdf": "whether a PDF is rendered",
    "output.fail_on": "the exit code, not the verdict",
}


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
    # --target as checked ("cuda:sm_80", "hip:gfx942", "maca", "c"); None: the device's own
    # (hardware.choose_target), which the run's Hardware record names either way.
    target: str | None = None

    def settings_dict(self) -> dict:
        """What goes into the baseline manifest: everything that changes a measurement or
        the verdict (every field but those in NOT_RECORDED)."""
        # fine_rounds, isolate and use_cache change which config tuning finds (a cached one
        # may come from another budget); isolate is recorded as resolved.
        isolate = self.tune.isolate if self.tune.isolate is not None else device_defaults(self.device)["isolate"]
        return {
            "model_label": self.model.label,
            "device": self.device,
            "batch_size": self.model.batch_size,
            "seq_len": self.model.seq_len,
            "lengths": list(self.model.lengths) if self.model.lengths else None,
            "layout": self.model.layout,
            "dtype": self.model.dtype,
            "seed": self.model.seed,
            "ops": self.profile.ops,
            "families": list(self.profile.families),
            "profile_iters": self.profile.iters,
            "max_shapes": self.profile.max_shapes,
            "shape_share": self.profile.shape_share,
            "fuse": self.profile.fuse,
            "tune_budget_s": self.tune.budget_s,
            "fine_rounds": self.tune.fine_rounds,
            "isolate": isolate,
            "use_cache": self.tune.use_cache,
            "tune_gpus": len(self.tune.devices) if self.tune.devices else 1,
            "seeds": list(self.bench.seeds),
            "sweep": self.bench.sweep,
            "e2e": self.bench.e2e,
            "soak_s": self.bench.soak_s,
            "timing": self.bench.timing.describe(self.device),
            # Apart from "timing": a third side adds a number and leaves the other two timed as
            # before, so runs with and without it stay comparable.
            "compile_mode": self.bench.timing.compile_mode,
            "regression_threshold": self.output.regression_threshold,
            "checklist": str(self.output.checklist),
            "upstream": self.upstream.repo,
            "fork": self.upstream.fork,
            "as_of": self.upstream.as_of.isoformat() if self.upstream.as_of else None,
            "branch": self.upstream.branch,
            # Which targets the portability matrix covers ([] = --targets none) and at what dtype.
            "targets": list(self.portability.targets) if self.portability.targets is not None else "default",
            "targets_dtype": self.portability.dtype or self.model.dtype,
            # Only when given: a run on the device's own target records what runs before it did.
            **({"target": self.target} if self.target else {}),
        }


def _check_label(model: str, label: str | None) -> str:
    """The model spec is one the loaders know, and its name can make a baseline id."""
    from .. import baseline, models

    if model not in models.ZOO and ":" not in model:
        raise ConfigError(
            f"unknown model '{model}'; use one of {', '.join(models.ZOO)}, "
            "or pkg.module:factory, or path/to/file.py:factory"
        )
    label = default_label(model) if label is None else label.strip()
    try:
        baseline.model_slug(label)  # a name that cannot make a baseline id fails now, not after the run
    except EvaluatorError as exc:
        raise ConfigError(
            f"--name {label!r} cannot name a baseline; give a name with letters or digits, e.g. --name bert-finetuned"
        ) from exc
    return label


def _check_choices(
    *,
    ops: int,
    batch_size: int | None,
    seq_len: int | None,
    fail_on: str,
    regression_threshold: float,
    isolate: str,
    fine_rounds: int | None,
    lang: str,
) -> None:
    """The options that take a number in a range or one of a few words."""
    if ops < 1:
        raise ConfigError("--ops must be at least 1")
    for opt, val in (("--batch-size", batch_size), ("--seq-len", seq_len)):
        if val is not None and val < 1:
            raise ConfigError(f"{opt} must be a positive integer, got {val}")
    if fail_on not in ("never", "no-go", "conditional"):
        raise ConfigError(f"--fail-on '{fail_on}' is not allowed; use never, no-go or conditional")
    if not 0 < regression_threshold < 10:
        raise ConfigError(
            f"--regression-threshold {regression_threshold} is out of range; give a fraction such as 0.05"
        )
    if isolate not in ISOLATE:
        raise ConfigError(f"--isolate '{isolate}' is not allowed; use auto, on or off")
    if fine_rounds is not None and not 0 <= fine_rounds <= 10:
        raise ConfigError(f"--fine-rounds must be between 0 and 10, got {fine_rounds}")
    if lang not in ("en", "zh"):
        raise ConfigError(f"--lang '{lang}' is not available; use en or zh")


def parse_lengths(text: str | None, seq_len: int | None) -> tuple[int, int] | None:
    """--lengths LO-HI -> (LO, HI) with 1 <= LO <= HI <= --seq-len (when given; the model's
    own length is checked where its inputs are made)."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", text)
    if not m:
        raise ConfigError(f"--lengths '{text}' is not LO-HI; give the shortest and longest sequence, e.g. 16-128")
    lo, hi = int(m.group(1)), int(m.group(2))
    if not 1 <= lo <= hi:
        raise ConfigError(f"--lengths {text}: LO must be at least 1 and at most HI, e.g. 16-128")
    if seq_len is not None and hi > seq_len:
        raise ConfigError(
            f"--lengths {text}: HI {hi} is longer than --seq-len {seq_len}, the length every sequence is padded to"
        )
    return lo, hi


def check_layout(layout: str) -> None:
    """--layout: one of results.LAYOUTS."""
    from ..results import LAYOUTS

    if layout not in LAYOUTS:
        raise ConfigError(
            f"--layout '{layout}' is not allowed; use auto (channels-last for a convolutional net on a GPU), "
            "as-given (the layout the model makes its inputs in) or channels-last"
        )


def check_compile_mode(mode: str | None) -> None:
    """--compile-mode: one of COMPILE_MODES (None: not given, the device's default)."""
    if mode is not None and mode not in COMPILE_MODES:
        raise ConfigError(
            f"--compile-mode '{mode}' is not allowed; use {', '.join(COMPILE_MODES[:-1])} "
            f"or {COMPILE_MODES[-1]} (none skips the torch.compile comparison)"
        )


def _output_folders(reports: str | Path | None, store: str | Path | None, push: bool) -> tuple[Path, Path, str | None]:
    """(reports folder, the store's local folder, the shared store's remote or None), each
    given (an empty string is not a folder) and checked writable: a run that cannot write its
    folder or its baseline would otherwise find out at the very end and lose the minutes it
    measured."""
    from .. import baseline

    check_folder_given("--reports", reports)
    check_folder_given("--store", store)
    reports = (Path(reports).expanduser() if reports else OutputSettings.reports).resolve()
    check_writable_folder("--reports", reports)
    store_remote = None
    if store is not None and baseline.is_remote(store):
        # A shared store: cloned now, so a bad URL or missing credentials fail before the run.
        check_writable_folder("--store", baseline.clone_path(store))
        store_remote, store = str(store), baseline.open_store(store).path
    else:
        store = Path(store).expanduser().absolute() if store else reports / STORE_FOLDER
        check_writable_folder("--store", store)
    # A damaged store (a garbage HEAD, missing objects) would fail only when recording, after the run.
    baseline.check_health(store)
    if push and baseline.remote_of(store_remote or store) is None:
        raise ConfigError(
            "--push needs a shared store: --store with a git URL or bare repository, or a clone that has an origin"
        )
    return reports, store, store_remote


def _devices(gpus: str | None, device: str, isolate: str) -> tuple[int, ...] | None:
    """--gpus: the GPUs tuning candidates are timed on at once (None: one GPU, as always)."""
    if gpus is None:
        return None
    if device != "cuda":
        raise ConfigError(f"--gpus {gpus} needs --device cuda; this run is on {device}")
    from ..tuning.gpus import parse_gpus, visible_gpus

    devices = tuple(parse_gpus(gpus, visible_gpus()))
    if len(devices) > 1 and isolate == "off":
        raise ConfigError("--gpus with several GPUs needs --isolate auto or on: each GPU gets its own worker")
    return devices


def build(
    *,
    model: str,
    device: str = DEFAULTS["device"],
    batch_size: int | None = None,
    seq_len: int | None = None,
    lengths: str | None = None,
    layout: str = DEFAULTS["layout"],
    dtype: str | None = None,
    ops: int = DEFAULTS["ops"],
    families: str | None = None,
    profile_iters: int = DEFAULTS["profile_iters"],
    max_shapes: int | None = None,
    shape_share: float = DEFAULTS["shape_share"],
    fuse: bool = DEFAULTS["fuse"],
    budget: float = DEFAULTS["budget"],
    no_cache: bool = DEFAULTS["no_cache"],
    reps: int = DEFAULTS["reps"],
    warmup: int = DEFAULTS["warmup"],
    sweep: bool = DEFAULTS["sweep"],
    e2e: bool = DEFAULTS["e2e"],
    soak_seconds: float | None = None,
    upstream: str | None = None,
    fork: str | None = None,
    as_of: str | None = None,
    branch: str | None = None,
    reports: str | Path | None = None,
    store: str | Path | None = None,
    checklist: Path | None = None,
    lang: str = DEFAULTS["lang"],
    pdf: bool = DEFAULTS["pdf"],
    fail_on: str = DEFAULTS["fail_on"],
    seed: int = DEFAULTS["seed"],
    regression_threshold: float = DEFAULTS["regression_threshold"],
    fine_rounds: int | None = None,
    isolate: str = DEFAULTS["isolate"],
    label: str | None = None,
    targets: str | None = None,
    push: bool = DEFAULTS["push"],
    gpus: str | None = None,
    compile_mode: str | None = None,
    target: str | None = None,
) -> Config:
    """The options by their command-line names (--name is `label`) -> a checked Config.
    fleet/plan.py reads this signature's annotations to check a plan's options."""
    from .. import checklist as checklist_mod, kernels
    from ..device import hardware
    from ..kernels.base import DTYPE_ALIASES
    from ..measuring.timing import TimingPolicy

    label = _check_label(model, label)
    # Counts and durations first: --reps 0 used to surface as a StatisticsError at the
    # first timing, minutes in.
    check_count("--reps", reps, 1)
    check_count("warmup", warmup, 0)
    if max_shapes is not None:
        check_count("--max-shapes", max_shapes, 1)
    check_share("--shape-share", shape_share)
    check_count("--profile-iters", profile_iters, 1)
    check_seconds("--budget", budget)
    check_seconds("--soak-seconds", soak_seconds)
    check_compile_mode(compile_mode)
    dev = hardware.resolve_device(device)
    # A target the device cannot run fails now, in one line naming the forms allowed.
    chosen = hardware.choose_target(dev, target).flag if target is not None else None
    by_device = device_defaults(dev)
    explicit_dtype = dtype is not None
    dtype = dtype if explicit_dtype else by_device["dtype"]
    if dtype not in DTYPE_ALIASES:
        raise ConfigError(f"unknown dtype '{dtype}'; use fp32, fp16 or bf16")
    if dev == "cpu" and DTYPE_ALIASES[dtype] == "bfloat16":
        # every candidate would be refused: a whole run for a verdict of nothing
        raise ConfigError(
            f"--dtype {dtype} on the CPU: TileLang's C backend has no bfloat16 type, so no kernel "
            "could be built; use fp32 or fp16 on the CPU, bf16 on a GPU"
        )
    # An empty value is refused rather than read as the option left out.
    for opt, value, example in (
        ("--families", families, "family names such as gemm,attention (`evaluate families` lists them)"),
        ("--checklist", checklist, "a checklist YAML or a name such as production"),
        ("--upstream", upstream, "a local clone of TileLang or its URL"),
        ("--fork", fork, "a local clone of the fork or its URL"),
        ("--as-of", as_of, "a date such as 2026-08-21"),
        ("--branch", branch, "a branch name such as main"),
    ):
        check_text_given(opt, value, example)
    fams = tuple(f.strip() for f in families.split(",") if f.strip()) if families else ()
    if families is not None and not fams:
        raise ConfigError(f"--families {families!r} names no family; give names such as gemm,attention")
    for f in fams:
        kernels.get(f)
    _check_choices(
        ops=ops,
        batch_size=batch_size,
        seq_len=seq_len,
        fail_on=fail_on,
        regression_threshold=regression_threshold,
        isolate=isolate,
        fine_rounds=fine_rounds,
        lang=lang,
    )
    padded = parse_lengths(lengths, seq_len)
    check_layout(layout)
    checklist = find_checklist(checklist) if checklist else OutputSettings.checklist
    checklist_mod.load(checklist)  # a checklist that does not validate fails now, not after the run
    check_repo("--upstream", upstream)
    check_repo("--fork", fork)
    as_of_time = parse_as_of(as_of)
    target_keys = parse_targets(targets)
    # Checked at the dtype asked for, or the one the model runs at on a GPU (see PortabilitySettings).
    target_dtype = DTYPE_ALIASES[dtype] if explicit_dtype or dev == "cuda" else device_defaults("cuda")["dtype"]
    reports, store, store_remote = _output_folders(reports, store, push)
    return Config(
        model=ModelSettings(model, batch_size, seq_len, DTYPE_ALIASES[dtype], seed, label, padded, layout),
        device=dev,
        profile=ProfileSettings(
            ops=ops, families=fams, iters=profile_iters, max_shapes=max_shapes, shape_share=shape_share, fuse=fuse
        ),
        tune=TuneSettings(
            budget_s=budget,
            use_cache=not no_cache,
            isolate=ISOLATE[isolate],
            fine_rounds=by_device["fine_rounds"] if fine_rounds is None else fine_rounds,
            devices=_devices(gpus, dev, isolate),
        ),
        bench=BenchSettings(
            timing=TimingPolicy(warmup=warmup, reps=reps, compile_mode=compile_mode or by_device["compile_mode"]),
            sweep=sweep,
            e2e=e2e,
            soak_s=by_device["soak_seconds"] if soak_seconds is None else soak_seconds,
        ),
        upstream=UpstreamSettings(upstream, fork, as_of_time, branch),
        output=OutputSettings(
            reports=reports,
            store=store,
            checklist=checklist,
            lang=lang,
            pdf=pdf,
            fail_on=fail_on,
            regression_threshold=regression_threshold,
            store_remote=store_remote,
            push=push,
        ),
        portability=PortabilitySettings(targets=target_keys, dtype=target_dtype),
        target=chosen,
    )


# ---------------------------------------------------------------- a run's config on disk


def _adapter():
    """pydantic's view of Config. BenchSettings names TimingPolicy in an annotation only
    (importing it at the top would bring torch into every --help), and pydantic resolves
    annotations from this module's globals: the name is put there before the schema is built."""
    from pydantic import TypeAdapter

    from ..measuring.timing import TimingPolicy

    globals()["TimingPolicy"] = TimingPolicy
    return TypeAdapter(Config)


def to_json(cfg: Config) -> str:
    """The whole config as JSON, saved in the run folder so `--resume` rebuilds it exactly."""
    return json.dumps(_adapter().dump_python(cfg, mode="json"), indent=1)


def from_json(text: str) -> Config:
    from pydantic import ValidationError

    try:
        data = json.loads(text)
        # A config.json without a layout records a run made in the layout as given: it resumes so.
        if isinstance(data, dict) and isinstance(data.get("model"), dict):
            data["model"].setdefault("layout", "as-given")
        return _adapter().validate_python(data)
    except (ValueError, ValidationError) as exc:
        raise ConfigError(
            f"the run's config.json does not load ({str(exc).splitlines()[0]}); "
            "it was written by another version, start a new run"
        ) from exc
