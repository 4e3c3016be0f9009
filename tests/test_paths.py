"""evaluator/paths.py: the recorder of a forward pass's torch calls, and the note that says
when a model runs another program under torch.compile than eagerly.

In: tiny transformers BertModels and a hand-written module that branches on
torch.compiler.is_compiling(), on the CPU. Out: counted calls, SDPA descriptions, notes.
benchmarks/capture_path.py uses the same recorder on a CUDA graph's capture (the H200
evidence is reports/examples/benchmarks/h200-2026-12-02/capture_path_hf-bert.json).
"""

from __future__ import annotations

import pytest
import torch

from evaluator.measuring import compile_path as paths


def _bert(**kw):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=100, **kw
    )
    return transformers.BertModel(cfg).eval()


def test_recorder_counts_calls_and_describes_each_attention_call():
    model = _bert()
    ids = torch.randint(0, 100, (2, 8))
    with torch.inference_mode():
        rec = paths.record(lambda: model(ids))
    assert len(rec.sdpa) == 2, rec.sdpa  # one per layer
    q_shape, _, q_dtype = rec.sdpa[0]["q"]
    assert q_shape == [2, 2, 8, 16] and q_dtype == "torch.float32"
    assert rec.sdpa[0]["dropout_p"] == 0.0 and rec.sdpa[0]["backend"]
    linears = {k: n for k, n in rec.calls.items() if k.startswith("linear(")}
    assert sum(linears.values()) >= 2 * 6 and all("float32" in k for k in linears), linears
    assert not any("__get__" in k for k in rec.calls)


def test_a_mask_is_described_by_dtype_and_shape_and_named_in_the_call():
    rec = paths.Recorder()
    q = torch.randn(1, 2, 4, 8)
    mask = torch.ones(1, 1, 4, 4, dtype=torch.bool)
    with rec:
        torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert rec.sdpa[0]["mask"][:2] == ["torch.bool", [1, 1, 4, 4]]
    keys = sorted(k for k in rec.calls if "scaled_dot_product_attention" in k)
    assert len(keys) == 2 and any("a bool mask [1, 1, 4, 4]" in k for k in keys), keys
    assert any("no mask, causal" in k for k in keys), keys


class Branches(torch.nn.Module):
    """Written the way model code that guards for tracing is: another path when compiled."""

    def forward(self, x):
        if torch.compiler.is_compiling():
            return torch.sigmoid(x) * x
        return torch.nn.functional.silu(x)


def test_believed_compiling_answers_true_inside_and_restores_the_query():
    before = torch.compiler.is_compiling
    with paths.believed_compiling():
        assert torch.compiler.is_compiling() is True
    assert torch.compiler.is_compiling is before and torch.compiler.is_compiling() is False


def test_a_module_that_branches_on_compiling_gets_a_note_naming_both_paths():
    x = torch.randn(4, 8)
    note = paths.compile_path_note(lambda: Branches()(x))
    assert "another program under torch.compile" in note
    assert (
        "calls Tensor.mul(float32,float32) x1; torch.sigmoid(float32) x1" in note
        and "instead of silu(float32) x1" in note
    ), note


def test_a_module_with_one_path_gets_no_note():
    lin = torch.nn.Linear(8, 8)
    x = torch.randn(4, 8)
    assert paths.compile_path_note(lambda: torch.relu(lin(x))) == ""


def test_transformers_bert_masks_attention_only_when_it_believes_it_is_compiled():
    # The H200 finding in small: eagerly transformers drops an all-ones mask and SDPA gets
    # none; traced, it builds the mask, so the compiled model is another program.
    # The H200 finding in small (transformers 5.17 there built the mask even with no
    # attention_mask given; releases since need the all-ones mask a tokenizer returns).
    model = _bert()
    ids = torch.randint(0, 100, (2, 8))
    ones = torch.ones_like(ids)
    note = paths.compile_path_note(lambda: model(ids, attention_mask=ones), shown=1)
    assert "calls scaled_dot_product_attention(float32,float32,float32,bool) with a bool mask" in note, note
    assert "instead of scaled_dot_product_attention(float32,float32,float32) with no mask x2" in note, note
    with torch.inference_mode(), paths.believed_compiling():
        traced = paths.record(lambda: model(ids, attention_mask=ones))
    assert len(traced.sdpa) == 2 and all(c["mask"] is not None for c in traced.sdpa), traced.sdpa


def test_a_model_that_fails_when_it_believes_it_is_compiled_gets_a_line_not_an_error():
    class Fails(torch.nn.Module):
        def forward(self, x):
            if torch.compiler.is_compiling():
                raise RuntimeError("no")
            return x + 1

    x = torch.randn(2)
    assert paths.compile_path_note(lambda: Fails()(x)).startswith("could not check")


def test_the_recorder_names_the_call_a_failing_pass_stopped_in():
    # capture_path.py reports it where a hidden capture fails (transformers GPT-2, H200).
    rec = paths.Recorder()
    a, b = torch.randn(2, 3), torch.randn(4, 5)
    with pytest.raises(RuntimeError), rec:
        torch.relu(a)
        torch.matmul(a, b)
    assert rec.last == "torch.matmul(float32,float32)", rec.last
