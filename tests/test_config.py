import subprocess

import pytest

from evaluator import config
from evaluator.errors import EvaluatorError


def test_defaults_on_this_machine():
    cfg = config.build(model="bert-tiny")
    assert cfg.device == "cpu" and cfg.model.dtype == "float32"
    assert cfg.bench.soak_s == 5.0 and cfg.profile.ops == 2
    assert cfg.output.checklist.name == "default.yaml"
    s = cfg.settings_dict()
    assert s["timing"]["timer"] == "perf_counter"


@pytest.mark.parametrize("kwargs, words", [
    ({"model": "nonesuch"}, "bert-tiny"),
    ({"model": "bert-tiny", "families": "gemm,warp"}, "unknown kernel family 'warp'"),
    ({"model": "bert-tiny", "checklist": "nope.yaml"}, "does not exist"),
    ({"model": "bert-tiny", "upstream": "/"}, "not a git repository"),
    ({"model": "bert-tiny", "upstream": "/no/such/dir"}, "does not exist"),
    ({"model": "bert-tiny", "dtype": "int4"}, "fp32"),
    ({"model": "bert-tiny", "device": "tpu"}, "auto, cpu or cuda"),
    ({"model": "bert-tiny", "fail_on": "maybe"}, "never, no-go or conditional"),
    ({"model": "bert-tiny", "as_of": "yesterday"}, "YYYY-MM-DD"),
    ({"model": "bert-tiny", "batch_size": 0}, "positive"),
])
def test_bad_input_is_one_clear_error(kwargs, words):
    with pytest.raises(EvaluatorError, match=words):
        config.build(**kwargs)


def test_cuda_requested_without_a_gpu():
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(EvaluatorError, match="no CUDA device"):
        config.build(model="bert-tiny", device="cuda")


def test_upstream_accepts_a_real_repo(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    cfg = config.build(model="bert-tiny", upstream=str(tmp_path))
    assert cfg.upstream.repo == str(tmp_path)


def test_shipped_checklists_by_name_and_package_data_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # defaults must not depend on running from the checkout
    cfg = config.build(model="bert-tiny", checklist="production")
    assert cfg.output.checklist.name == "production.yaml" and cfg.output.checklist.is_file()
    assert cfg.output.reports == tmp_path / "reports"
    with pytest.raises(EvaluatorError, match="shipped name .*default.*production"):
        config.build(model="bert-tiny", checklist="nonesuch")
