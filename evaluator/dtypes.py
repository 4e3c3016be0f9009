"""The dtypes the evaluator runs kernels in, by name.

In: a dtype as a user or a torch tensor names it ("fp16", "half", "float16",
torch.float16). Out: the canonical name ("float16"), its size in bytes and the torch
dtype. The kernels, the router and the model loader all read dtypes here.
"""

from __future__ import annotations

import torch

TORCH_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
DTYPE_ALIASES = {
    "fp32": "float32",
    "float": "float32",
    "float32": "float32",
    "fp16": "float16",
    "half": "float16",
    "float16": "float16",
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
}
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def torch_dtype(name: str) -> torch.dtype:
    return TORCH_DTYPES[DTYPE_ALIASES.get(name, name)]
