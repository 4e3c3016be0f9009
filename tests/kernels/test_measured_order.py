"""Each family's first config against the committed H200 sweep: a run with little or no
tuning budget gets the first config, so it must be one the sweep measured within 3% of
the best reachable on the shapes real models run.

In: the H200 sweeps under reports/examples/kernels/ (every config compiled, verified and
timed against PyTorch by benchmarks/kernel_sweep.py; a later file's row replaces an
earlier one's for the same family and shape), and the families' search spaces for an
H200. From h200-2026-12-01/: attention and conv2d in both layouts
(kernel_sweep_conv2d_attention.json); conv2d again with its stream and TileLang-transpose
configs, and attention on the q/k/v views models pass (kernel_sweep_views_conv2d_own.json);
ResNet-50's convolutions (kernel_sweep_resnet50_llama.json, its conv2d rows); every model
shape's GEMM with the ping-pong schedule beside the family's own space
(kernel_sweep_pingpong.json). From h200-2026-12-02/: the fused GEMM patterns models run
(gemm_gelu, gemm_gelu_tanh, with the plain GEMM at ViT-B's 3152x3072x768;
kernel_sweep_fused.json), ping-pong with and without stream-K (kernel_sweep_streamk.json),
ping-pong tiles sized for the SMs beside the space (kernel_sweep_pingwave.json). From
h200-2026-12-03/: the tiles of y's transpose (kernel_sweep_swap.json), 48-token tiles at
bert-base's and ViT-B's shapes (kernel_sweep_swap_attention.json), and attention and
softmax built with fast math (kernel_sweep_attention_views_rows.json).
Out: pass/fail.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluator import kernels
from tests.hardware import H200

KERNELS = Path(__file__).parents[2] / "reports/examples/kernels"
# (file, the families taken from it): the ResNet-50 sweep also holds llama's GEMMs, whose
# first config there is not within 3% (0.81x against 0.84x at 512x2048x5632); the ping-pong
# sweep's GEMM rows cover those shapes.
SWEEPS = [
    ("h200-2026-12-01/kernel_sweep_conv2d_attention.json", None),
    ("h200-2026-12-01/kernel_sweep_views_conv2d_own.json", None),
    ("h200-2026-12-01/kernel_sweep_resnet50_llama.json", {"conv2d"}),
    ("h200-2026-12-01/kernel_sweep_pingpong.json", {"gemm"}),
    ("h200-2026-12-02/kernel_sweep_fused.json", None),
    ("h200-2026-12-02/kernel_sweep_streamk.json", {"gemm"}),
    ("h200-2026-12-02/kernel_sweep_pingwave.json", {"gemm"}),
    ("h200-2026-12-03/kernel_sweep_swap.json", {"gemm"}),
    # Its attention rows are of attention built without fast math: gemm only.
    ("h200-2026-12-03/kernel_sweep_swap_attention.json", {"gemm"}),
    # Attention and softmax built with fast math, every model shape.
    ("h200-2026-12-03/kernel_sweep_attention_views_rows.json", {"attention", "softmax", "layernorm", "rmsnorm"}),
]
# Rows where the model, not the op sweep, decided the first config: at ViT-B's
# 3152x3072x768 the sweep's best gemm_gelu tile (ping-pong, 1.02x) ran 48.7 us inside the
# model against 39.4 us for the wave tile the family leads with (0.92x in the sweep);
# the model ran 1.033x against 1.107x (reports/examples/benchmarks/h200-2026-12-02/graph_gaps_*.log).
IN_MODEL = {("gemm_gelu", (3152, 3072, 768))}
ROWS = list(
    {
        (r["family"], tuple(r["shape"])): r
        for name, families in SWEEPS
        for r in json.loads((KERNELS / name).read_text())["rows"]
        if (families is None or r["family"] in families) and (r["family"], tuple(r["shape"])) not in IN_MODEL
    }.values()
)


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['family']}-{'x'.join(map(str, r['shape']))}" for r in ROWS])
def test_first_config_was_measured_near_the_best(row):
    fam = kernels.get(row["family"])
    shape = tuple(row["shape"])
    defaults = fam.schedule(shape, "float16", "cuda").defaults

    def full(cfg):
        return {**defaults, **cfg}

    first = full(fam.search_space(shape, "float16", H200)[0])
    measured = {json.dumps(full(c), sort_keys=True): ratio for c, ratio in row["top"]}
    key = json.dumps(first, sort_keys=True)
    assert key in measured, f"the first config {first} is not among the sweep's eight fastest"
    assert measured[key] >= 0.97 * row["ratio_best"], (first, measured[key], row["ratio_best"])
