"""A fleet sweep: a plan of models x settings x platforms, one evaluation per Ray task.

In: a plan file (YAML, below), optionally the address of an existing Ray cluster, and a
`Reporter` for progress. Out: a `FleetResult` with one `Cell` per model x platform (ok or
failed, verdict, end-to-end speedup, baseline id, run folder, report, one-line error),
each run's baseline recorded in the plan's shared store, and `summary()`'s `fleet.html`
(the verdict matrix, each cell linking that run's report) and `fleet.json`.

    name: nightly                 # names the sweep folder <reports>/<name>-<timestamp>/
    reports: reports/fleet        # output folder (default: reports)
    store: baselines              # the shared baseline store (default: <reports>/baselines)
    defaults: {budget: 2, soak_seconds: 0, pdf: false}   # any `evaluate` option, CLI names
    models:
      - bert-tiny                 # a spec as --model takes it
      - {model: hf:BertModel, batch_size: 8, name: hf-bert}   # spec, overrides, --name
    platforms:                    # default: one platform "this machine", device auto
      - {name: cpu, device: cpu, resources: {num_cpus: 1}}
      - {name: h200, device: cuda, resources: {num_gpus: 1}, options: {dtype: bf16}}

Relative paths in a plan (reports, store, a `file.py:factory` model, `hf:DIR`, a checklist
file) are relative to the plan file's folder, so a plan runs the same from any folder.
A cell's options are the defaults, then its platform's `options`, then its model's
overrides. Everything that can be checked before a minute is spent is checked by
`load_plan` (the schema, option names and types, and `config.build` on every cell), each
mistake one line naming the file and the field. Each cell runs `config.build` and
`pipeline.run` in a fresh Ray worker process (`max_calls=1`: no TileLang, torch or CUDA
state leaks from one model into the next) holding its platform's resources: `num_gpus=1`
places one run per GPU, `num_cpus=1` one per core on a machine without a GPU. Whatever
goes wrong inside a task, or with the task itself (a crashed worker, a platform no node
of the cluster can host), becomes a red cell with its error; the sweep always finishes.
On a cluster the reports folder, the store and model files must be on a filesystem every
node and the driver mount (the summary reads each run's files from the driver). A CPU
run computes with as many threads as its platform's num_cpus (Ray sets OMP_NUM_THREADS).

Ray is an optional extra (`pip install -e '.[fleet]'`); without it, `run_plan` and
`require_ray` raise one `ConfigError` line saying what to install.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import os
import re
import socket
import time
import traceback
import typing
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from .errors import ConfigError, DeviceError, EvaluatorError

if TYPE_CHECKING:  # the pipeline imports torch; the plan checks and the summary do not need it
    from .pipeline import Reporter

__all__ = ["Plan", "ModelEntry", "Platform", "Cell", "FleetResult", "load_plan", "run_plan", "summary",
           "load_summary", "require_ray", "check_fail_on", "exit_code", "RAY_MISSING", "FAIL_ON"]

# --fail-on: exit 1 on that outcome or worse; a run that failed is worse than NO-GO.
FAIL_ON = ("never", "failed", "no-go", "conditional")
RAY_MISSING = "evaluate fleet needs Ray: pip install -e '.[fleet]' (or pip install 'ray[default]')"
DEFAULT_PLATFORM = "this machine"
SCHEMA_VERSION = 1
# Options a plan sets through its own fields, never through `defaults` or overrides.
_PLAN_FIELDS = {"model": "a model's spec is its `model` (or the string itself)",
                "device": "a platform's `device` sets it",
                "reports": "the plan's `reports` sets it", "store": "the plan's `store` sets it"}
_ERROR_CHARS = 300


# ---------------------------------------------------------------- the plan


@dataclass(frozen=True)
class ModelEntry:
    """One row of the matrix: the spec that loads the model, and its option overrides."""

    name: str  # its label: the row's name, the baseline id's model part (--name)
    spec: str  # as --model takes it, relative paths made absolute
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Platform:
    """One column of the matrix: where its runs go and what each holds while it runs."""

    name: str
    device: str = "auto"  # "auto" | "cpu" | "cuda", resolved inside the task
    # Ray resources per run: num_cpus, num_gpus, memory (bytes), or a custom resource
    # name. Empty: one GPU where the cluster has GPUs, else one CPU (decided at run time).
    resources: dict[str, float] = field(default_factory=dict)
    accelerator_type: str | None = None  # Ray's accelerator type, e.g. "H100", on a mixed cluster
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    name: str
    path: Path  # the plan file
    reports: Path
    store: Path
    defaults: dict[str, Any]
    models: tuple[ModelEntry, ...]
    platforms: tuple[Platform, ...]

    def options(self, model: ModelEntry, platform: Platform) -> dict[str, Any]:
        """The `evaluate` options of one cell: defaults, then the platform's, then the model's."""
        return {**self.defaults, **platform.options, **model.options}


class _ModelRow(BaseModel):
    model_config = ConfigDict(extra="allow")  # the extra keys are the model's option overrides
    model: str = Field(min_length=1)
    name: str | None = None


class _PlatformRow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    resources: dict[str, float] = Field(default_factory=dict)
    accelerator_type: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("resources")
    @classmethod
    def _positive(cls, value: dict[str, float]) -> dict[str, float]:
        for key, amount in value.items():
            if not amount >= 0:
                raise ValueError(f"{key} must be 0 or more, got {amount}")
        return value


class _PlanFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    reports: str = "reports"
    store: str | None = None
    defaults: dict[str, Any] = Field(default_factory=dict)
    models: list[_ModelRow] = Field(min_length=1)
    platforms: list[_PlatformRow] = Field(default_factory=list)

    @field_validator("models", mode="before")
    @classmethod
    def _strings_are_specs(cls, value: Any) -> Any:
        # "bert-tiny" is short for {model: bert-tiny}: errors then point at models[i].model.
        if isinstance(value, list):
            return [{"model": v} if isinstance(v, str) else v for v in value]
        return value


def _where(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _fail(path: Path, where: str, message: str) -> ConfigError:
    return ConfigError(_one_line(f"{path}: {where}: {message}", limit=500))


def _schema_error(path: Path, exc: ValidationError) -> ConfigError:
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    if err["type"] == "extra_forbidden":
        known = {(): _PlanFile, ("platforms",): _PlatformRow}.get(tuple(p for p in loc[:-1] if isinstance(p, str)))
        names = list(known.model_fields) if known else []
        close = difflib.get_close_matches(str(loc[-1]), names, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        return _fail(path, _where(loc), f"unknown field; {hint}a {'platform' if 'platforms' in loc else 'plan'} "
                                        f"takes {', '.join(names)}")
    return _fail(path, _where(loc), err["msg"])


def _option_types() -> dict[str, Any]:
    from . import config

    return typing.get_type_hints(config.build)


def _options(path: Path, where: str, raw: dict[str, Any], types: dict[str, Any], base: Path, *,
             model_row: bool = False) -> dict[str, Any]:
    """Plan option names (CLI spellings welcome: soak-seconds, no-pdf) -> config.build keywords,
    each value checked against build's own annotation."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = str(key).replace("-", "_")
        if name == "no_pdf":  # the CLI's --no-pdf
            name, value = "pdf", not value if isinstance(value, bool) else value
        if name == "name" and model_row:
            name = "label"
        elif name in ("name", "label"):
            raise _fail(path, f"{where}.{key}", "a model's name goes in its own entry: {model: SPEC, name: NAME}")
        if name in _PLAN_FIELDS:
            raise _fail(path, f"{where}.{key}", f"not an option here; {_PLAN_FIELDS[name]}")
        if name not in types or name == "return":
            choices = sorted(n for n in types if n not in _PLAN_FIELDS and n not in ("return", "label"))
            close = difflib.get_close_matches(name, choices, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise _fail(path, f"{where}.{key}", f"unknown evaluate option; {hint}options: {', '.join(choices)}")
        if name in ("families", "targets") and isinstance(value, list):
            value = ",".join(map(str, value))  # YAML's [gemm, softmax] for the CLI's gemm,softmax
        try:
            value = TypeAdapter(types[name]).validate_python(value)
        except ValidationError as exc:
            raise _fail(path, f"{where}.{key}", exc.errors()[0]["msg"]) from None
        if name == "checklist" and value is not None and (len(Path(value).parts) > 1 or Path(value).suffix):
            value = _resolve(base, str(value))  # a file; a bare name (default, production) stays a name
        out[name] = value
    return out


def _is_url(text: str) -> bool:
    return "://" in text or text.startswith("git@")


def _resolve(base: Path, text: str) -> Path:
    p = Path(text).expanduser()
    return p if p.is_absolute() else (base / p).resolve()


def _resolve_spec(base: Path, spec: str) -> str:
    """Model specs with a file or folder in them, made absolute against the plan's folder:
    the task may run in another working directory (or on another node)."""
    target, sep, attr = spec.rpartition(":")
    if sep and target.endswith(".py") and not Path(target).expanduser().is_absolute():
        return f"{_resolve(base, target)}:{attr}"
    if spec.startswith("hf:"):
        head, comma, rest = spec[3:].partition(",")
        if head and (base / head / "config.json").is_file() and not Path(head).is_absolute():
            return f"hf:{(base / head).resolve()}{comma}{rest}"
    return spec


def load_plan(path: str | os.PathLike, *, reports: str | os.PathLike | None = None,
              store: str | os.PathLike | None = None, check: bool = True) -> Plan:
    """Read and validate a plan file. Every error is one `ConfigError` line naming the file
    and the field. `reports` and `store` replace the plan's own (the command line's
    --reports and --store: relative to the working folder, as there). `check` also
    builds each cell's Config (the checks `evaluate` makes before a run: counts,
    durations, dtype, checklist, writable folders) so a typo costs a line now rather than
    a red cell after the rest of the sweep."""
    path = Path(path).expanduser()
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such plan file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the plan ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: not valid YAML{at} ({getattr(exc, 'problem', None) or 'syntax error'})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a plan is a mapping with name, models and optionally reports, store, "
                          "defaults, platforms")
    try:
        doc = _PlanFile.model_validate(raw)
    except ValidationError as exc:
        raise _schema_error(path, exc) from None

    base = path.resolve().parent
    types = _option_types()
    defaults = _options(path, "defaults", doc.defaults, types, base)
    reports = Path(reports).expanduser().resolve() if reports is not None else _resolve(base, doc.reports)
    if store is not None:
        store = Path(store).expanduser().absolute()
    elif doc.store and _is_url(doc.store):
        raise _fail(path, "store", f"'{doc.store}' is a git URL; a URL store is not supported yet: clone it "
                                   "(git clone URL DIR), give DIR as the store, and push after the sweep")
    else:
        store = _resolve(base, doc.store) if doc.store else reports / "baselines"

    from .config import default_label

    models, seen = [], {}
    for i, row in enumerate(doc.models):
        where = f"models[{i}]"
        extra = dict(row.model_extra or {})
        overrides = _options(path, where, extra, types, base, model_row=True)
        spec = _resolve_spec(base, row.model.strip())
        label = (row.name or "").strip() or default_label(row.model.strip())
        if label in seen:
            raise _fail(path, f"{where}.name", f"'{label}' is also models[{seen[label]}]; each row needs its own "
                                               "name: {model: SPEC, name: NAME}")
        seen[label] = i
        models.append(ModelEntry(name=label, spec=spec, options=overrides))

    platforms, names = [], {}
    for i, row in enumerate(doc.platforms or [_PlatformRow(name=DEFAULT_PLATFORM)]):
        where = f"platforms[{i}]"
        if row.name in names:
            raise _fail(path, f"{where}.name", f"'{row.name}' is also platforms[{names[row.name]}]")
        names[row.name] = i
        res = {k.replace("-", "_"): v for k, v in row.resources.items()}
        # A GPU run that holds no GPU would share GPU 0 with every other run; a CPU run
        # holding one leaves a GPU idle. Both are mistakes, said before any run.
        if row.device == "cuda" and not res.get("num_gpus"):
            raise _fail(path, f"{where}.resources", "a cuda platform needs num_gpus (e.g. {num_gpus: 1}) so that "
                                                    "Ray places one run per GPU")
        if row.device == "cpu" and res.get("num_gpus"):
            raise _fail(path, f"{where}.resources", "a cpu platform should not hold a GPU; use {num_cpus: 1}")
        opts = _options(path, f"{where}.options", row.options, types, base)
        platforms.append(Platform(name=row.name, device=row.device, resources=res,
                                  accelerator_type=row.accelerator_type, options=opts))

    plan = Plan(name=doc.name.strip(), path=path.resolve(), reports=reports, store=store, defaults=defaults,
                models=tuple(models), platforms=tuple(platforms))
    if check:
        _check_cells(plan)
    return plan


def _check_cells(plan: Plan) -> None:
    """config.build on every cell, in this process: its one-line errors, with the cell named."""
    from . import config

    for i, m in enumerate(plan.models):
        for p in plan.platforms:
            kwargs = dict(model=m.spec, label=m.name, reports=plan.reports, store=plan.store, **plan.options(m, p))
            try:
                try:
                    config.build(device=p.device, **kwargs)
                except DeviceError:
                    # The driver need not have the platform's device (a GPU cluster driven
                    # from a laptop); the other checks still apply.
                    config.build(device="cpu", **kwargs)
            except EvaluatorError as exc:
                raise _fail(plan.path, f"models[{i}] '{m.name}' on platform '{p.name}'", str(exc)) from None


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class Cell:
    """One model on one platform: the run it made, or why it failed."""

    model: str  # the model's name (row)
    platform: str  # the platform's name (column)
    status: str  # "ok" | "failed"
    spec: str = ""
    device: str = ""  # asked for ("auto" | "cpu" | "cuda")
    verdict: str | None = None  # "GO" | "CONDITIONAL GO" | "NO-GO"; also on a failed run that reached it
    speedup: float | None = None  # end to end, the verdict's view
    baseline: str | None = None  # baseline id in the store
    run_dir: Path | None = None
    report: Path | None = None  # report.html
    error: str = ""  # one line
    traceback: Path | None = None  # for an error that is not an EvaluatorError
    wall_s: float = 0.0  # inside the task: build, run, report
    host: str = ""  # the node it ran on
    hardware: str = ""  # the device it measured, e.g. "NVIDIA H200"
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class FleetResult:
    name: str
    plan: Path
    folder: Path  # the sweep folder: each cell's runs, and the summary by default
    store: Path
    ray: str  # "local (N CPUs)" or the cluster's address
    created: str  # ISO timestamp
    models: tuple[str, ...]  # rows, in plan order
    platforms: tuple[str, ...]  # columns, in plan order
    cells: tuple[Cell, ...]  # model-major, plan order
    wall_s: float = 0.0
    interrupted: bool = False
    schema_version: int = SCHEMA_VERSION

    def cell(self, model: str, platform: str) -> Cell:
        return next(c for c in self.cells if c.model == model and c.platform == platform)

    @property
    def failed(self) -> tuple[Cell, ...]:
        return tuple(c for c in self.cells if not c.ok)


def _one_line(text: str, limit: int = _ERROR_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error_line(exc: BaseException) -> str:
    # Our own errors are already a sentence for the user; anything else keeps its type.
    return _one_line(str(exc) if isinstance(exc, EvaluatorError) else f"{type(exc).__name__}: {exc}")


def _newest_run(cell_dir: Path) -> Path | None:
    runs = cell_dir / "runs"
    try:
        found = [p for p in runs.iterdir() if p.is_dir()]
    except OSError:
        return None
    return max(found, key=lambda p: p.stat().st_mtime, default=None)


def _run_cell(task: dict[str, Any]) -> Cell:
    """The body of one Ray task (also callable in-process): never raises, a failure is a Cell."""
    start = time.monotonic()
    base = dict(model=task["model"], platform=task["platform"], spec=task["spec"], device=task["device"],
                options=task["options"], host=socket.gethostname())
    cell_dir = Path(task["cell_dir"])
    try:
        from . import config, pipeline

        cfg = config.build(model=task["spec"], label=task["model"], device=task["device"], reports=cell_dir,
                           store=Path(task["store"]), **task["options"])
        outcome = pipeline.run(cfg)
        r = outcome.result
        return Cell(**base, status="ok", verdict=r.verdict.decision if r.verdict else None,
                    speedup=r.e2e.speedup if r.e2e else None, baseline=r.baseline.tag if r.baseline else None,
                    run_dir=outcome.run_dir, report=outcome.html, hardware=r.environment.hardware.name,
                    wall_s=time.monotonic() - start)
    except (Exception, SystemExit) as exc:  # a factory calling sys.exit() is a failed model too
        # What the run finished is still linked: a baseline that failed to record at the
        # very end leaves its report and verdict behind.
        run_dir = _newest_run(cell_dir)
        verdict = speedup = None
        hardware = ""
        try:
            data = json.loads((run_dir / "results.json").read_text()) if run_dir else {}
            verdict = (data.get("verdict") or {}).get("decision")
            speedup = (data.get("e2e") or {}).get("speedup")
            hardware = ((data.get("environment") or {}).get("hardware") or {}).get("name", "")
        except (OSError, ValueError, AttributeError):
            pass
        report = run_dir / "report.html" if run_dir and (run_dir / "report.html").is_file() else None
        error, tb = _error_line(exc), None
        if not isinstance(exc, EvaluatorError):  # a bug or a model that raised: keep the whole story
            tb = (run_dir or cell_dir) / "traceback.txt"
            try:
                tb.parent.mkdir(parents=True, exist_ok=True)
                tb.write_text("".join(traceback.format_exception(exc)))
                error = _one_line(error, _ERROR_CHARS - 40) + f" (full traceback in {tb.name})"
            except OSError:
                tb = None
        return Cell(**base, status="failed", verdict=verdict, speedup=speedup, run_dir=run_dir, report=report,
                    error=error, traceback=tb, hardware=hardware, wall_s=time.monotonic() - start)


# ---------------------------------------------------------------- running on Ray


def require_ray():
    """The ray module, or the one line that says what to install."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(RAY_MISSING) from exc
    return ray


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:60] or "x"


def _ray_options(resources: dict[str, float], accelerator_type: str | None) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    custom = {}
    for key, amount in resources.items():
        if key in ("num_cpus", "num_gpus", "memory"):
            opts[key] = amount
        else:
            custom[key] = amount
    if custom:
        opts["resources"] = custom
    if accelerator_type:
        opts["accelerator_type"] = accelerator_type
    return opts


def _needs(opts: dict[str, Any]) -> dict[str, float]:
    """What a node must offer for these task options, in Ray's resource names."""
    need = {"CPU": opts.get("num_cpus", 1)}  # a Ray task holds one CPU unless told otherwise
    if opts.get("num_gpus"):
        need["GPU"] = opts["num_gpus"]
    if opts.get("memory"):
        need["memory"] = opts["memory"]
    need.update(opts.get("resources", {}))
    if opts.get("accelerator_type"):
        need[f"accelerator_type:{opts['accelerator_type']}"] = 0.001
    return {k: v for k, v in need.items() if v}


def _infeasible(need: dict[str, float], nodes: list[dict]) -> str:
    """Why no live node can ever run a task needing `need`, or "" when one can. Ray would
    otherwise keep such a task pending forever and the sweep would never end."""
    offers = [n.get("Resources", {}) for n in nodes if n.get("Alive", True)]
    if any(all(o.get(k, 0) >= v for k, v in need.items()) for o in offers):
        return ""
    asked = ", ".join(f"{k} {v:g}" for k, v in need.items())
    seen = "; ".join(", ".join(f"{k} {v:g}" for k, v in sorted(o.items()) if k in ("CPU", "GPU") or
                               (k not in ("memory", "object_store_memory") and not k.startswith("node:")))
                     for o in offers) or "no live node"
    return f"no node of the Ray cluster offers {asked} (nodes offer: {seen}); fix the platform's resources"


def run_plan(plan: Plan, *, ray_address: str | None = None, reporter: "Reporter | None" = None,
             num_cpus: int | None = None) -> FleetResult:
    """Run every cell of the plan as a Ray task and collect one Cell each, in plan order.

    Connects to `ray_address` when given, uses a Ray already initialised in this process,
    or starts a local one (shut down again at the end). Cells are written under
    `<plan.reports>/<plan name>-<timestamp>/<model>--<platform>/runs/<run id>/`; each run
    records its baseline in `plan.store`. Ctrl-C cancels what is still running, writes the
    summary of what finished and re-raises with `run_dir` set to the sweep folder.
    """
    from . import baseline
    from .pipeline import Reporter

    ray = require_ray()
    rep = reporter or Reporter()
    # Initialised once here rather than raced by the first tasks, and a store that cannot
    # take baselines is one line now instead of a red matrix later.
    baseline.open_store(plan.store)
    created = datetime.now(timezone.utc)
    stem = f"{_slug(plan.name)}-{created.strftime('%Y%m%d-%H%M%S')}"
    folder = plan.reports / stem
    for n in range(2, 100):  # the same plan started twice within a second gets a folder each
        try:
            folder.mkdir(parents=True)
            break
        except FileExistsError:
            folder = plan.reports / f"{stem}-{n}"
        except OSError as exc:
            raise ConfigError(f"cannot create the sweep folder {folder} ({exc.strerror}); give the plan a "
                              "writable reports folder") from None
    else:
        raise ConfigError(f"{plan.reports} already holds {stem} and 98 more like it; clean the reports folder")

    started = False
    if ray.is_initialized():
        where = "the Ray already running in this process"
    elif ray_address:
        try:
            ray.init(address=ray_address, log_to_driver=False, logging_level=logging.WARNING)
        except Exception as exc:  # ConnectionError, a bad address, a version mismatch
            raise ConfigError(f"--ray {ray_address}: cannot connect to the Ray cluster ({_error_line(exc)})") from exc
        started, where = True, ray_address
    else:
        cpus = num_cpus or os.cpu_count() or 1
        try:
            ray.init(num_cpus=cpus, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False,
                     logging_level=logging.WARNING)
        except Exception as exc:  # no room in /tmp, ports taken, a broken install
            raise ConfigError(f"cannot start a local Ray ({_error_line(exc)}); or give --ray ADDRESS of a "
                              "running cluster") from exc
        started, where = True, f"local ({cpus} CPUs)"

    t0 = time.monotonic()
    cells: dict[tuple[str, str], Cell] = {}
    pending: dict[Any, tuple[str, str]] = {}
    try:
        nodes = ray.nodes()
        has_gpu = any(n.get("Resources", {}).get("GPU", 0) > 0 for n in nodes if n.get("Alive", True))
        # A fresh worker per run (max_calls=1) and no retries: a model that fails fails
        # once, and it takes nothing of another run's state (TileLang, torch, CUDA) with it.
        remote = ray.remote(max_calls=1, max_retries=0)(_run_cell)
        dirs: set[str] = set()
        rep.stage(f"Fleet {plan.name}: {len(plan.models) * len(plan.platforms)} runs on Ray, {where}",
                  total=len(plan.models) * len(plan.platforms))
        for m in plan.models:
            for p in plan.platforms:
                resources = p.resources or ({"num_gpus": 1} if has_gpu and p.device != "cpu" else {"num_cpus": 1})
                opts = _ray_options(resources, p.accelerator_type)
                cell_name = f"{_slug(m.name)}--{_slug(p.name)}"
                while cell_name in dirs:  # two names that slug alike still get a folder each
                    cell_name += "_"
                dirs.add(cell_name)
                task = dict(model=m.name, platform=p.name, spec=m.spec, device=p.device,
                            options=plan.options(m, p), cell_dir=str(folder / cell_name), store=str(plan.store))
                why = _infeasible(_needs(opts), nodes)
                if why:
                    cells[(m.name, p.name)] = Cell(model=m.name, platform=p.name, status="failed", spec=m.spec,
                                                   device=p.device, error=why, options=task["options"])
                    rep.advance()
                    rep.info(_cell_line(cells[(m.name, p.name)]))
                    continue
                ref = remote.options(**opts, name=f"evaluate {m.name} on {p.name}").remote(task)
                pending[ref] = (m.name, p.name)
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                key = pending.pop(ref)
                try:
                    cell = ray.get(ref)
                except Exception as exc:  # the task itself died: a crashed or killed worker, lost node
                    m = next(x for x in plan.models if x.name == key[0])
                    p = next(x for x in plan.platforms if x.name == key[1])
                    cell = Cell(model=key[0], platform=key[1], status="failed", spec=m.spec, device=p.device,
                                error=_ray_error(exc), options=plan.options(m, p))
                cells[key] = cell
                rep.advance()
                rep.info(_cell_line(cell))
        rep.done(f"{sum(c.ok for c in cells.values())} ok, {sum(not c.ok for c in cells.values())} failed")
    except KeyboardInterrupt as exc:
        for ref in pending:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # already finished or gone: nothing left to stop
                pass
        partial = _result(plan, folder, where, created, cells, time.monotonic() - t0, interrupted=True)
        try:
            summary(partial, folder)
        except Exception:  # the interrupt is what the user must hear about
            pass
        exc.run_dir = folder  # the CLI names it: "interrupted; finished stages are kept in ..."
        raise
    finally:
        if started:
            ray.shutdown()
    return _result(plan, folder, where, created, cells, time.monotonic() - t0)


def check_fail_on(fail_on: str) -> str:
    """--fail-on, checked before the sweep rather than after it."""
    if fail_on not in FAIL_ON:
        raise ConfigError(f"--fail-on '{fail_on}' is not allowed; use {', '.join(FAIL_ON)}")
    return fail_on


def exit_code(result: FleetResult, fail_on: str = "never") -> int:
    """The command's exit code: 1 when a cell is at `fail_on` or worse, else 0 (as
    `evaluate --fail-on`: 1 is only ever the outcome the gate rejects)."""
    check_fail_on(fail_on)
    rejected = {"never": (), "failed": (), "no-go": ("NO-GO",), "conditional": ("NO-GO", "CONDITIONAL GO")}[fail_on]
    bad = [c for c in result.cells if (fail_on != "never" and not c.ok) or (c.ok and c.verdict in rejected)]
    return 1 if bad else 0


def _ray_error(exc: BaseException) -> str:
    # Ray's messages carry a traceback and advice over many lines; the first says what happened.
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return _one_line(f"{type(exc).__name__}: {lines[0] if lines else 'the task failed'}")


def _cell_line(c: Cell) -> str:
    """One line per finished cell for the reporter (rich markup: the CLI's reporter prints it)."""
    from rich.markup import escape  # an error quoting "[...]" must not be read as markup

    if not c.ok:
        return f"[red]{escape(c.model)} on {escape(c.platform)}: failed: {escape(c.error)}[/]"
    speed = f", {c.speedup:.3g}x end to end" if c.speedup else ""
    return escape(f"{c.model} on {c.platform}: {c.verdict}{speed} ({c.wall_s:.0f} s, {c.baseline or 'no baseline'})")


def _result(plan: Plan, folder: Path, where: str, created: datetime, cells: dict[tuple[str, str], Cell],
            wall_s: float, *, interrupted: bool = False) -> FleetResult:
    ordered = []
    for m in plan.models:
        for p in plan.platforms:
            ordered.append(cells.get((m.name, p.name)) or Cell(
                model=m.name, platform=p.name, status="failed", spec=m.spec, device=p.device,
                error="interrupted before it finished", options=plan.options(m, p)))
    return FleetResult(name=plan.name, plan=plan.path, folder=folder, store=plan.store, ray=where,
                       created=created.isoformat(timespec="seconds"), models=tuple(m.name for m in plan.models),
                       platforms=tuple(p.name for p in plan.platforms), cells=tuple(ordered), wall_s=wall_s,
                       interrupted=interrupted)


# ---------------------------------------------------------------- the summary


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def load_summary(path: str | os.PathLike) -> FleetResult:
    """A FleetResult back from its fleet.json (to re-render or compare sweeps)."""
    return TypeAdapter(FleetResult).validate_python(json.loads(Path(path).read_text()))


_VERDICT_CLASS = {"GO": "go", "CONDITIONAL GO": "cond", "NO-GO": "nogo"}


def _href(target: Path | None, out_dir: Path) -> str | None:
    # Relative, so the sweep folder can be copied or served as a whole and its links still work.
    if target is None or not Path(target).exists():
        return None
    return Path(os.path.relpath(Path(target).resolve(), out_dir.resolve())).as_posix()


def summary(result: FleetResult, out_dir: str | os.PathLike) -> Path:
    """Write fleet.html (the verdict matrix, model x platform) and fleet.json into `out_dir`;
    returns fleet.html. A team's templates/fleet.html.j2 (see resources.template_dirs)
    replaces the shipped one."""
    import jinja2

    from . import resources

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "fleet.json.tmp").write_text(json.dumps(_jsonable(dataclasses.asdict(result)), indent=1))
    (out / "fleet.json.tmp").replace(out / "fleet.json")

    def view(c: Cell) -> dict[str, Any]:
        return {"cell": c, "cls": "failed" if not c.ok else _VERDICT_CLASS.get(c.verdict or "", "none"),
                "report": _href(c.report, out), "traceback": _href(c.traceback, out),
                "results": _href(c.run_dir / "results.json" if c.run_dir else None, out),
                "speedup": f"{c.speedup:.3g}x" if c.speedup else "", "wall": f"{c.wall_s:.0f} s"}

    rows = [{"model": m, "cells": [view(result.cell(m, p)) for p in result.platforms]} for m in result.models]
    counts: dict[str, int] = {}
    for c in result.cells:
        k = "failed" if not c.ok else (c.verdict or "no verdict")
        counts[k] = counts.get(k, 0) + 1
    env = jinja2.Environment(loader=jinja2.FileSystemLoader([str(d) for d in resources.template_dirs()]),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    html = env.get_template("fleet.html.j2").render(
        r=result, rows=rows, counts=counts, cells=[view(c) for c in result.cells],
        options=lambda c: ", ".join(f"{k}={v}" for k, v in sorted(c.options.items())))
    (out / "fleet.html").write_text(html)
    return out / "fleet.html"
