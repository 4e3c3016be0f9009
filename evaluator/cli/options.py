"""Option texts shared by several commands, and the defaults they show.

In: config.py's `device_defaults` and `OutputSettings`, where every default is written once.
Out: help texts that state those defaults (the ones that depend on the device, which
typer cannot show as `[default: ...]`) and the options several commands share. Nothing
here imports torch: `evaluate --help` stays instant.
"""

from __future__ import annotations

import typer

from ..config import OutputSettings, device_defaults, dtype_flag

_CPU, _CUDA = device_defaults("cpu"), device_defaults("cuda")

# The families are the registry's (kernels.REGISTRY), which imports torch: --help names the
# command that lists them rather than a copy of the list. The targets are spelled out (a
# few, rarely added); tests/test_cli_commands.py checks them against targets.TARGETS.
FAMILIES_HELP = "a registered kernel family (`evaluate families` lists them)"
TARGETS_HELP = (
    "Accelerators to lower the rewritten kernels for (not run there): comma-separated keys of "
    "a100, h100, h200, b200, v100, t4, mi250x, mi300x, c500, local (this machine's GPU); all; or "
    "none to skip. Default: a100, h100, mi300x, c500, plus this machine's GPU."
)

# --target: the forms device/arch.py parses (FORMS), spelled out here so --help imports no torch.
TARGET_HELP = (
    "TileLang target the kernels are built for: cuda:sm_XY (e.g. cuda:sm_80, cuda:sm_90a), "
    "hip:gfxNNN (e.g. hip:gfx942), maca or c, one this device can run. Default: the device's own "
    "(CUDA with its compute capability, HIP with its gfx arch on ROCm, MACA on MetaX, c on the CPU)."
)

DTYPE_HELP = f"fp32, fp16 or bf16 (default: {dtype_flag(_CPU['dtype'])} on CPU, {dtype_flag(_CUDA['dtype'])} on CUDA)."
FINE_ROUNDS_HELP = (
    f"Rounds of neighbours around the best coarse config (default {_CUDA['fine_rounds']} on "
    f"CUDA, {_CPU['fine_rounds']} on CPU; 0: coarse grid only)."
)
COMPILE_HELP = (
    f"torch.compile of the PyTorch code as a third side beside TileLang and PyTorch eager, timed the "
    f"same way: max-autotune, default, or none to skip it (default: {_CUDA['compile_mode']} on CUDA, "
    f"{_CPU['compile_mode']} on CPU)."
)
LENGTHS_HELP = (
    "A padded batch, as served: each sequence's length drawn (seeded) in LO-HI, e.g. 16-128, "
    "padded to --seq-len behind an attention_mask (1 for tokens, 0 for padding). For models whose "
    "forward takes attention_mask (hf:BertModel...); default: every sequence --seq-len long."
)
LAYOUT_HELP = (
    "The memory layout the model runs in, the same for PyTorch eager, torch.compile and TileLang: "
    "auto (default: channels-last for a convolutional net on a GPU, as torch.compile lays it out; "
    "as given otherwise), as-given, or channels-last."
)
SOAK_HELP = f"Soak length (default {_CUDA['soak_seconds']:g} s on CUDA, {_CPU['soak_seconds']:g} s on CPU; 0 skips)."
REPORTS_HELP = f"Output folder (default: {OutputSettings.reports}/)."
RUN_STORE_HELP = (
    "Baseline store: a folder, or a shared remote's git URL or bare repository "
    f"(default: <reports>/{OutputSettings.store.relative_to(OutputSettings.reports)})."
)
# `evaluate port` checks kernels for GPUs: at the dtype a model runs at on one.
GPU_DTYPE = dtype_flag(_CUDA["dtype"])

# The store the readers and `baseline push/pull` use.
STORE_OPT = typer.Option(
    None,
    "--store",
    help="Baseline store: a folder (a git repository), or a shared "
    "remote's git URL or bare repository, used through a local clone in "
    f"~/.cache/evaluator/stores. Default: {OutputSettings.store}.",
)
