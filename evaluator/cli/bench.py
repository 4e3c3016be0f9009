"""`evaluate bench` and `evaluate port`: one kernel family on its own.

In: a family, shapes, a dtype; for bench a device, the target built for (--target), a tuning budget and a torch.compile
mode, for port the accelerators to lower for and optionally a tuned config. Out: bench
tunes the family and times it against PyTorch eager and torch.compile on this machine;
port lowers it for other accelerators, never running it there. A table, or JSON with --json; bad input is one line,
exit 2.
"""

from __future__ import annotations

import json
from typing import Optional

import typer

from ..config import DEFAULTS
from .options import COMPILE_HELP, DTYPE_HELP, FAMILIES_HELP, GPU_DTYPE, TARGET_HELP, TARGETS_HELP
from .output import RichReporter, bench_table, console, err_console, portability_table, progress


def parse_shape(text: str, names: tuple[str, ...], error: type[Exception]):
    """--shape "4096x4096x4096" -> (4096, 4096, 4096); `error` with what was expected. Sizes
    that are flags or layouts may be 0 (attention's causal, a convolution's padding, bmm's
    transposes...): which, each family's own check says (pipeline.fit_shape)."""
    from ..results import parse_shape

    expected = "x".join(names)
    try:
        shape = parse_shape(text)
    except ValueError as exc:
        raise error(f"--shape {text} is not a shape; write integer sizes joined by x, {expected}") from exc
    if not shape or any(v < 0 for v in shape):
        raise error(f"--shape {text}: the sizes must be positive integers (flags 0 or 1), {expected}")
    return shape


def bench_command(
    family: str = typer.Option(..., help=f"Kernel family: {FAMILIES_HELP}."),
    shape: list[str] = typer.Option(
        [], help="Problem shape like 4096x4096x4096 (repeatable); default: standard shapes."
    ),
    dtype: Optional[str] = typer.Option(None, help=DTYPE_HELP),
    device: str = typer.Option(DEFAULTS["device"], help="auto, cpu or cuda."),
    target: Optional[str] = typer.Option(None, "--target", help=TARGET_HELP),
    budget: float = typer.Option(DEFAULTS["budget"], help="Tuning budget per shape, in seconds."),
    # bench's own default, not a run's --reps: a kernel alone is cheap to time for longer.
    reps: int = typer.Option(50, help="Timed repetitions."),
    compile_mode: Optional[str] = typer.Option(None, "--compile-mode", help=COMPILE_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Tune and benchmark one kernel family alone against PyTorch (and torch.compile)."""
    from .. import config as config_mod
    from ..device import hardware
    from .. import kernels, pipeline
    from ..errors import ConfigError
    from ..kernels.base import DTYPE_ALIASES
    from ..results import to_dict
    from ..measuring.timing import TimingPolicy

    fam = kernels.get(family)  # an unknown family: one line naming the known ones
    config_mod.check_count("--reps", reps, 1)
    config_mod.check_seconds("--budget", budget)
    config_mod.check_compile_mode(compile_mode)
    # Fitted here, not inside the progress display, whose stop would leave a blank line above the error.
    shapes = [pipeline.fit_shape(fam, parse_shape(text, fam.shape_names, ConfigError)) for text in shape]
    dev = hardware.resolve_device(device)
    hardware.choose_target(dev, target)  # a target this device cannot run: one line, before any tuning
    dt = DTYPE_ALIASES.get(dtype or config_mod.device_defaults(dev)["dtype"])
    if dt is None:
        raise ConfigError(f"unknown dtype '{dtype}'; use fp32, fp16 or bf16")
    policy = TimingPolicy(reps=reps, compile_mode=compile_mode or config_mod.device_defaults(dev)["compile_mode"])
    with progress(err_console) as p:
        rows = pipeline.bench_family(
            family, shapes, dt, dev, budget_s=budget, policy=policy, reporter=RichReporter(p), target=target
        )
    if json_out:
        print(json.dumps([{"tuned": to_dict(t), "bench": to_dict(b)} for t, b in rows], indent=1))
        return
    console.print(bench_table(family, dt, rows))


def port_command(
    family: str = typer.Option(..., help=f"Kernel family: {FAMILIES_HELP}."),
    shape: str = typer.Option(
        ...,
        help="Problem shape, e.g. 4096x4096x4096 for gemm (MxNxK); the family's "
        "sizes joined by x, as in `evaluate bench`.",
    ),
    dtype: str = typer.Option(GPU_DTYPE, help="fp16, bf16 or fp32 (what the kernel would run at there)."),
    targets: Optional[str] = typer.Option(None, "--targets", help=TARGETS_HELP),
    config: Optional[str] = typer.Option(
        None,
        "--config",
        help="A tuned config as a JSON object, checked as "
        "'tuned' beside each target's default, e.g. "
        '\'{"block_M": 128, "block_N": 256, "block_K": 64}\'.',
    ),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Lower one kernel for accelerators that are not on this machine: the kernel x target
    matrix (lowers / needs re-tuning / fails, and why), lowered, never run."""
    from .. import config as config_mod
    from .. import kernels, pipeline, portability
    from ..errors import ConfigError
    from ..kernels.base import DTYPE_ALIASES
    from ..results import to_dict

    fam = kernels.get(family)  # an unknown family: one line naming the known ones
    shp = pipeline.fit_shape(fam, parse_shape(shape, fam.shape_names, ConfigError))
    dt = DTYPE_ALIASES.get(dtype)
    if dt is None:
        raise ConfigError(f"unknown dtype '{dtype}'; use fp16, bf16 or fp32")
    keys = config_mod.parse_targets(targets)
    if not keys:
        raise ConfigError(
            "--targets none leaves nothing to check; name targets, all, or leave --targets out for the default set"
        )
    tuned = _tuned_config(config)
    if tuned:
        _check_config_keys(fam, shp, dt, tuned)
    # A line, not a spinner: lowering for HIP targets holds stderr for a moment (portability/lowering.py).
    err_console.print(
        f"Lowering {family} {'x'.join(map(str, shp))} {dt} for {', '.join(keys)} (compiled, not run)…",
        markup=False,
        highlight=False,
    )
    p = portability.port(family, shp, dt, keys, config=tuned)
    if json_out:
        print(json.dumps({**to_dict(p), "metrics": portability.metrics(p)}, indent=1))
        return
    console.print(portability_table(p))
    for line in p.summary:  # one line each, whatever the width, so scripts can grep them
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def _tuned_config(text: str | None) -> dict | None:
    """--config: a JSON object of config keys, or None when not given."""
    from ..errors import ConfigError

    if text is None:
        return None
    try:
        tuned = json.loads(text)
    except ValueError as exc:
        raise ConfigError(
            f'--config is not JSON ({exc.msg}); give an object such as \'{{"block_M": 128, "num_stages": 3}}\''
        ) from None
    if not isinstance(tuned, dict) or not tuned:
        raise ConfigError("--config must be a JSON object of config keys, e.g. '{\"block_M\": 128}'")
    return tuned


def _check_config_keys(fam, shape, dtype: str, tuned: dict) -> None:
    """A --config key no GPU schedule of the family knows, or a word where the key takes a
    number, is the user's typo: one line now, not a "fails" cell per target that reads
    like a portability finding."""
    from ..errors import ConfigError, KernelError

    defaults = dict(fam.params)
    for target in ("cuda:sm_80", "cuda:sm_90a", "hip:gfx942", "maca"):
        try:
            defaults.update(fam.schedule(shape, dtype, target).defaults)
        except KernelError:  # no schedule for that target: it knows no keys
            continue
    unknown = sorted(set(tuned) - set(defaults))
    if unknown:
        raise ConfigError(
            f"--config: {fam.name} has no config key {', '.join(map(repr, unknown))}; "
            f"its keys: {', '.join(sorted(defaults))}"
        )
    numeric = (int, float)  # bool is an int
    wrong = sorted(k for k, v in tuned.items() if isinstance(defaults[k], numeric) and not isinstance(v, numeric))
    if wrong:
        raise ConfigError(f"--config: {', '.join(map(repr, wrong))} must be a number (or true/false), e.g. 128")
