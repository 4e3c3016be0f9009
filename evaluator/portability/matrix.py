"""Reading a `Portability` matrix: per target as data, in sentences, as a table, as numbers.

In: a `Portability` (fresh from check.py, or from a run's results.json). Out:
`target_facts`, what the matrix says about each target as data (which kernels build,
which run as they are, which need re-tuning and with what, which fail and why), from
which both the summary sentences here (`_with_summary`) and the report's own-language
sentences are written; `rows`, `cell_text` and `format_matrix` for printing; `metrics`,
the checklist numbers (`METRIC_INFO` says what each means), and `explain`, their
evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..results import KernelConfig, PortCell, Portability, shape_str

STATUSES = ("lowers", "needs_retuning", "fails")
FAILURE_CLASSES = ("resources", "codegen", "feature", "numerical")


def kernel_label(family: str, shape: Sequence[int], dtype: str) -> str:
    return f"{family} {shape_str(tuple(shape))} {dtype}"


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
        out.append(
            TargetFacts(
                target=t,
                name=p.target_names.get(t, t),
                kernels=len(p.kernels),
                builds=tuple(x.label for x in mine if x.builds),
                as_is=tuple(x.label for x in mine if x.as_is),
                retune=tuple(Retune(x.label, x.primary, x.fix) for x in mine if x.builds and not x.as_is),
                failures=tuple(Failure(cls, reason, tuple(labels)) for (cls, reason), labels in failed.items()),
                notes=tuple(dict.fromkeys(c.note for x in mine for c in x.cells if c.note and c.status == "lowers")),
            )
        )
    return out


def with_summary(p: Portability) -> Portability:
    from dataclasses import replace

    n = len(p.kernels)
    facts = target_facts(p)
    lines = []
    good_targets = [f.target for f in facts if len(f.builds) == f.kernels]
    lines.append(
        f"{len(good_targets)} of {len(p.targets)} targets build every rewritten kernel"
        + (f" ({', '.join(good_targets)})" if good_targets else "")
        + f"; TileLang {p.tilelang}, {p.lowerings} lowerings in {p.seconds:.1f} s."
    )
    for f in facts:
        text = f"{len(f.builds)} of {n} rewritten kernels build for {f.name}"
        if f.retune:
            parts = [
                f"{r.label}'s {r.cell.config_kind} config {_short_reason(r.cell)}"
                + (f" ({_config_str(r.fix)} fits and lowers)" if r.fix else "")
                for r in f.retune
            ]
            text += f"; {len(f.retune)} need{'s' if len(f.retune) == 1 else ''} re-tuning there: " + "; ".join(parts)
        # One clause per distinct reason, naming the kernels it stops.
        for fail in f.failures:
            labels = fail.labels
            who = "all of them" if len(labels) == n and n > 1 else ", ".join(labels)
            text += (
                f"; {who} fail{'s' if len(labels) == 1 and who != 'all of them' else ''} "
                f"({fail.failure_class}: {fail.reason})"
            )
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
            cells = {
                c.target: c
                for c in p.cells
                if kernel_label(c.family, c.shape, c.dtype) == label and c.config_kind == kind
            }
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
    "portability.targets_ok": (
        "fraction",
        "share of the checked targets where every rewritten kernel lowers "
        "with a config that fits the target's published limits",
    ),
    "portability.kernels_ok": (
        "fraction",
        "share of rewritten kernels that lower, with a config that fits, on every checked target",
    ),
    "portability.as_is": (
        "fraction",
        "share of (kernel, target) pairs where the tuned config (the default "
        "when none was tuned) lowers and fits unchanged",
    ),
    "portability.needs_retuning": (
        "pairs",
        "(kernel, target) pairs that build only with another config (the tuned one breaks a limit or does not lower)",
    ),
    "portability.fails": ("pairs", "(kernel, target) pairs where no config lowers and fits"),
    "portability.fails.resources": (
        "pairs",
        "failing pairs whose config breaks a shared-memory, register or thread limit",
    ),
    "portability.fails.codegen": ("pairs", "failing pairs stopped by a TileLang code-generation gap"),
    "portability.fails.feature": ("pairs", "failing pairs stopped by a missing feature, dtype or backend"),
    "portability.fails.numerical": (
        "pairs",
        "failing pairs whose kernel ran on the local device and did not match PyTorch",
    ),
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
