"""benchmarks/capture_path.py: the recorder that lists a forward pass's torch calls and its
SDPA calls (the capturing side needs CUDA; the device run is the H200 evidence).

In: a tiny transformers BertModel on CPU. Out: its calls counted with their dtypes, and
one SDPA description per layer with its mask and the backend PyTorch picks.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("capture_path", ROOT / "benchmarks" / "capture_path.py")
cp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cp)


def test_recorder_counts_calls_and_describes_each_attention_call():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                  vocab_size=100)
    model = transformers.BertModel(cfg).eval()
    ids = torch.randint(0, 100, (2, 8))
    rec = cp.Recorder()
    with torch.inference_mode(), rec:
        model(ids)
    assert len(rec.sdpa) == 2, rec.sdpa  # one per layer
    q_shape, _, q_dtype = rec.sdpa[0]["q"]
    assert q_shape == [2, 2, 8, 16] and q_dtype == "torch.float32"
    assert rec.sdpa[0]["dropout_p"] == 0.0 and rec.sdpa[0]["backend"]
    linears = {k: n for k, n in rec.calls.items() if k.startswith("linear(")}
    assert sum(linears.values()) >= 2 * 6 and all("float32" in k for k in linears), linears
    assert not any("__get__" in k for k in rec.calls)


def test_a_mask_is_described_by_dtype_and_shape():
    rec = cp.Recorder()
    q = torch.randn(1, 2, 4, 8)
    mask = torch.ones(1, 1, 4, 4, dtype=torch.bool)
    with rec:
        torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    assert rec.sdpa[0]["mask"][:2] == ["torch.bool", [1, 1, 4, 4]]
