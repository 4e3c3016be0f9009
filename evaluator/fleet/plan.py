"""The plan: models x settings x platforms, read from YAML and checked before anything runs.

In: a plan file (its format is in the package docstring) and the command line's
--reports and --store. Out: a frozen `Plan` (its `ModelEntry` rows and `Platform`
columns, `Plan.options` giving one cell's `evaluate` options), relative paths made
absolute against the plan's folder, every option name and type checked against
`config.build`'s own annotations, and `config.build` run on every cell; each mistake a
one-line `ConfigError` naming the file and the field.
"""

from __future__ import annotations

import difflib
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from ..errors import ConfigError, DeviceError, EvaluatorError
from .records import one_line

DEFAULT_PLATFORM = "this machine"
# Options a plan sets through its own fields, never through `defaults` or overrides.
_PLAN_FIELDS = {
    "model": "a model's spec is its `model` (or the string itself)",
    "device": "a platform's `device` sets it",
    "reports": "the plan's `reports` sets it",
    "store": "the plan's `store` sets it",
}


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
    return ConfigError(one_line(f"{path}: {where}: {message}", limit=500))


def _schema_error(path: Path, exc: ValidationError) -> ConfigError:
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    if err["type"] == "extra_forbidden":
        known = {(): _PlanFile, ("platforms",): _PlatformRow}.get(tuple(p for p in loc[:-1] if isinstance(p, str)))
        names = list(known.model_fields) if known else []
        close = difflib.get_close_matches(str(loc[-1]), names, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        return _fail(
            path,
            _where(loc),
            f"unknown field; {hint}a {'platform' if 'platforms' in loc else 'plan'} takes {', '.join(names)}",
        )
    return _fail(path, _where(loc), err["msg"])


def _option_types() -> dict[str, Any]:
    from .. import config as config

    return typing.get_type_hints(config.build)


def _options(
    path: Path, where: str, raw: dict[str, Any], types: dict[str, Any], base: Path, *, model_row: bool = False
) -> dict[str, Any]:
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


def load_plan(
    path: str | os.PathLike,
    *,
    reports: str | os.PathLike | None = None,
    store: str | os.PathLike | None = None,
    check: bool = True,
) -> Plan:
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
    except ValueError as exc:  # a scalar that reads as a date and is none (2026-13-45)
        raise ConfigError(f"{path}: a value reads as a date but is none ({exc}); write dates as YYYY-MM-DD") from None
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{path}: a plan is a mapping with name, models and optionally reports, store, defaults, platforms"
        )
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
        raise _fail(
            path,
            "store",
            f"'{doc.store}' is a git URL; a URL store is not supported yet: clone it "
            "(git clone URL DIR), give DIR as the store, and push after the sweep",
        )
    else:
        store = _resolve(base, doc.store) if doc.store else reports / "baselines"

    from ..config import default_label

    models, seen = [], {}
    for i, row in enumerate(doc.models):
        where = f"models[{i}]"
        extra = dict(row.model_extra or {})
        overrides = _options(path, where, extra, types, base, model_row=True)
        spec = _resolve_spec(base, row.model.strip())
        label = (row.name or "").strip() or default_label(row.model.strip())
        if label in seen:
            raise _fail(
                path,
                f"{where}.name",
                f"'{label}' is also models[{seen[label]}]; each row needs its own name: {{model: SPEC, name: NAME}}",
            )
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
            raise _fail(
                path,
                f"{where}.resources",
                "a cuda platform needs num_gpus (e.g. {num_gpus: 1}) so that Ray places one run per GPU",
            )
        if row.device == "cpu" and res.get("num_gpus"):
            raise _fail(path, f"{where}.resources", "a cpu platform should not hold a GPU; use {num_cpus: 1}")
        opts = _options(path, f"{where}.options", row.options, types, base)
        platforms.append(
            Platform(
                name=row.name, device=row.device, resources=res, accelerator_type=row.accelerator_type, options=opts
            )
        )

    plan = Plan(
        name=doc.name.strip(),
        path=path.resolve(),
        reports=reports,
        store=store,
        defaults=defaults,
        models=tuple(models),
        platforms=tuple(platforms),
    )
    if check:
        _check_cells(plan)
    return plan


def _check_cells(plan: Plan) -> None:
    """config.build on every cell, in this process: its one-line errors, with the cell named."""
    from .. import config as config

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
