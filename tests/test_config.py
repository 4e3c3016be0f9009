import subprocess
from pathlib import Path

import pytest

from evaluator import config
from evaluator.errors import EvaluatorError


def test_defaults_on_this_machine():
    cfg = config.build(model="bert-tiny")
    assert cfg.device == "cpu" and cfg.model.dtype == "float32"
    assert cfg.bench.soak_s == 5.0 and cfg.profile.ops == 2
    assert cfg.output.checklist.name == "default.yaml"
    s = cfg.settings_dict()
    assert s["timing"]["timer"].startswith("perf_counter")


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
    ({"model": "bert-tiny", "reps": 0}, "--reps must be a positive integer, got 0"),
    ({"model": "bert-tiny", "warmup": -1}, "warmup must be an integer of at least 0"),
    ({"model": "bert-tiny", "budget": -1.0}, "--budget must be a number of seconds, 0 or more"),
    ({"model": "bert-tiny", "budget": float("nan")}, "--budget must be a number of seconds"),
    ({"model": "bert-tiny", "soak_seconds": -0.5}, "--soak-seconds must be a number of seconds"),
    ({"model": "bert-tiny", "max_shapes": 0}, "--max-shapes must be a positive integer"),
    ({"model": "bert-tiny", "profile_iters": 0}, "--profile-iters must be a positive integer"),
    ({"model": "bert-tiny", "label": "  "}, "--name .* cannot name a baseline"),
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
    with pytest.raises(EvaluatorError, match="checklist name: default, production"):
        config.build(model="bert-tiny", checklist="nonesuch")


def test_a_teams_checklist_by_name_wins_over_a_shipped_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shipped = config.build(model="bert-tiny", checklist="production").output.checklist
    (tmp_path / "checklists").mkdir()
    team = tmp_path / "checklists" / "production.yaml"
    team.write_text(shipped.read_text())
    (tmp_path / "checklists" / "gpu-team.yaml").write_text(shipped.read_text())
    assert config.build(model="bert-tiny", checklist="production").output.checklist.resolve() == team
    assert config.build(model="bert-tiny", checklist="gpu-team").output.checklist.name == "gpu-team.yaml"
    with pytest.raises(EvaluatorError, match="default, gpu-team, production"):
        config.build(model="bert-tiny", checklist="nonesuch")


@pytest.mark.parametrize("spec, label", [
    ("path/to/hf_bert.py:make", "hf_bert:make"),
    ("hf_bert.py:make", "hf_bert:make"),
    ("pkg.mod:make", "pkg.mod:make"),
    ("hf:BertModel,num_hidden_layers=2", "hf:BertModel,num_hidden_layers=2"),
    ("bert-tiny", "bert-tiny"),
])
def test_default_label_leaves_out_the_factory_files_folder(spec, label):
    assert config.default_label(spec) == label
    assert config.ModelSettings(spec).label == label


def test_name_is_the_label_and_settings_record_what_changes_a_result():
    cfg = config.build(model="bert-tiny", label="bert-prod", fine_rounds=0, isolate="on", as_of="2026-08-21")
    assert cfg.model.name == "bert-tiny" and cfg.model.label == "bert-prod"
    s = cfg.settings_dict()
    assert s["model_label"] == "bert-prod"
    assert s["fine_rounds"] == 0 and s["isolate"] is True
    assert s["as_of"] == "2026-08-21T23:59:59.999999+00:00"  # a bare date is the whole day
    auto = config.build(model="tests/fixtures/user_model.py:make").settings_dict()
    assert auto["model_label"] == "user_model:make"
    assert auto["isolate"] is False and auto["fine_rounds"] == 1  # auto on CPU: in-process, one round


def test_output_folders_must_be_writable_folders(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(EvaluatorError, match=r"--store .*file is a file; give a folder"):
        config.build(model="bert-tiny", store=a_file)
    with pytest.raises(EvaluatorError, match=r"--reports .*file is a file"):
        config.build(model="bert-tiny", reports=a_file)
    with pytest.raises(EvaluatorError, match=r"--store .*cannot be created: .*file is a file"):
        config.build(model="bert-tiny", store=a_file / "store")
    cfg = config.build(model="bert-tiny", reports=tmp_path / "new" / "reports")
    assert cfg.output.store == tmp_path / "new" / "reports" / "baselines"
    assert not (tmp_path / "new").exists()  # checked, not created
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # the write probe leaves nothing behind


def test_unwritable_folders(tmp_path, monkeypatch):
    # The check itself, whoever runs it (root passes os.access on a chmod 555 folder;
    # tests/test_bad_inputs.py runs the CLI on a really read-only store).
    ro = tmp_path / "ro"
    ro.mkdir()
    real_access = config.os.access
    monkeypatch.setattr(config.os, "access", lambda p, mode: False if Path(p) == ro else real_access(p, mode))
    with pytest.raises(EvaluatorError, match=r"--store .*ro is not writable"):
        config.build(model="bert-tiny", store=ro)
    with pytest.raises(EvaluatorError, match=r"--reports .*ro/reports cannot be created: .*ro is not writable"):
        config.build(model="bert-tiny", reports=ro / "reports")


# ---------------------------------------------------------------- --targets (the portability matrix)


def test_targets_default_all_none_and_what_the_settings_record():
    from evaluator import targets

    cfg = config.build(model="bert-tiny")
    assert cfg.portability.targets == tuple(s.key for s in targets.resolve(None))  # the module's default set
    assert cfg.portability.targets[:4] == ("a100", "h100", "mi300x", "c500")
    # A CPU run measures float32; the matrix is checked at the GPU default unless --dtype says otherwise.
    assert cfg.portability.dtype == "float16"
    assert cfg.settings_dict()["targets"] == list(cfg.portability.targets)
    assert cfg.settings_dict()["targets_dtype"] == "float16"
    assert config.build(model="bert-tiny", targets="all").portability.targets == tuple(targets.TARGETS)
    assert config.build(model="bert-tiny", targets=" MI300X, h100 ,mi300x").portability.targets == ("mi300x", "h100")
    skipped = config.build(model="bert-tiny", targets="none", dtype="fp32")
    assert skipped.portability.targets == () and skipped.settings_dict()["targets"] == []
    assert skipped.portability.dtype == "float32"  # asked for explicitly: checked as asked


@pytest.mark.parametrize("text, words", [
    ("h300", "--targets h300: unknown target 'h300'; known targets: a100, h100, h200, b200, v100, t4, mi250x, "
             "mi300x, c500, local"),
    ("h100,nope", "unknown target 'nope'"),
    ("none,h100", "'none' skips the portability check and cannot be combined"),
    ("", "--targets was given no target; known targets"),
])
def test_bad_targets_are_one_line_before_any_work(text, words):
    with pytest.raises(EvaluatorError) as err:
        config.build(model="bert-tiny", targets=text)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_local_target_without_a_gpu_says_so():
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(EvaluatorError, match="--targets local: target 'local' asks for this machine's GPU"):
        config.build(model="bert-tiny", targets="local")
