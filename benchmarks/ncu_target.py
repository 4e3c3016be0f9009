"""One TileLang kernel and PyTorch's call for the same problem, run a few times inside an
NVTX range, for Nsight Compute to profile side by side (the evidence behind a missed
speed target: achieved occupancy, tensor-pipe use, stall reasons).

    ncu --clock-control none --nvtx --nvtx-include "evidence/" --section SpeedOfLight \\
        --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis \\
        python3 benchmarks/ncu_target.py gemm 3152x768x3072 '{"block_M": 128, ...}'

The config is a JSON object (the sweep's or the tuner's best); the shape is the family's
shape written with x. Inputs are made before the range, so only the two sides are profiled.
"""

from __future__ import annotations

import json
import sys

import torch

from evaluator.device import hardware
from evaluator import kernels


def main() -> None:
    family, shape_s, cfg_s = sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "{}"
    fam = kernels.get(family)
    shape = tuple(int(x) for x in shape_s.split("x"))
    hw = hardware.detect("cuda")
    kernel = fam.build(shape, "float16", json.loads(cfg_s), hw.target)
    inputs = fam.make_inputs(shape, "float16", "cuda", 0)
    kernel(*inputs), fam.reference(*inputs)  # warm: lazy init, cuBLAS heuristics
    torch.cuda.synchronize()
    with torch.cuda.nvtx.range("evidence"):
        for _ in range(2):
            kernel(*inputs)
            fam.reference(*inputs)
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
