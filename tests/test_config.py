import os
import subprocess
from pathlib import Path

import pytest

from evaluator import config as config
from evaluator.errors import ConfigError, EvaluatorError


def test_defaults_on_this_machine():
    cfg = config.build(model="bert-tiny")
    assert cfg.device == "cpu" and cfg.model.dtype == "float32"
    assert cfg.bench.soak_s == 5.0 and cfg.profile.ops == 2
    assert cfg.output.checklist.name == "default.yaml"
    s = cfg.settings_dict()
    assert s["timing"]["timer"].startswith("perf_counter")


@pytest.mark.parametrize(
    "kwargs, words",
    [
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
        # an empty value is refused, not read as the option left out
        ({"model": "bert-tiny", "families": ""}, "--families was given an empty value"),
        ({"model": "bert-tiny", "families": " , "}, "--families ' , ' names no family"),
        ({"model": "bert-tiny", "checklist": ""}, "--checklist was given an empty value"),
        ({"model": "bert-tiny", "upstream": ""}, "--upstream was given an empty value"),
        ({"model": "bert-tiny", "fork": " "}, "--fork was given an empty value"),
        ({"model": "bert-tiny", "as_of": ""}, "--as-of was given an empty value"),
        ({"model": "bert-tiny", "branch": ""}, "--branch was given an empty value"),
    ],
)
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


@pytest.mark.parametrize(
    "spec, label",
    [
        ("path/to/hf_bert.py:make", "hf_bert:make"),
        ("hf_bert.py:make", "hf_bert:make"),
        ("pkg.mod:make", "pkg.mod:make"),
        ("hf:BertModel,num_hidden_layers=2", "hf:BertModel,num_hidden_layers=2"),
        ("bert-tiny", "bert-tiny"),
    ],
)
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


def test_output_folders_given_as_empty_strings_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # "" would otherwise be this folder
    for option in ("reports", "store"):
        with pytest.raises(ConfigError, match=rf"^--{option} needs a folder; got an empty string$"):
            config.build(model="bert-tiny", **{option: ""})
        with pytest.raises(ConfigError, match=rf"^--{option} needs a folder; got only blanks \('  '\)$"):
            config.build(model="bert-tiny", **{option: "  "})
    assert not any(tmp_path.iterdir())


def test_unwritable_folders(tmp_path, monkeypatch):
    # The check itself, whoever runs it (root passes os.access on a chmod 555 folder;
    # tests/test_bad_inputs.py runs the CLI on a really read-only store).
    ro = tmp_path / "ro"
    ro.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == ro else real_access(p, mode))
    with pytest.raises(EvaluatorError, match=r"--store .*ro is not writable"):
        config.build(model="bert-tiny", store=ro)
    with pytest.raises(EvaluatorError, match=r"--reports .*ro/reports cannot be created: .*ro is not writable"):
        config.build(model="bert-tiny", reports=ro / "reports")


# ---------------------------------------------------------------- --targets (the portability matrix)


def test_targets_default_all_none_and_what_the_settings_record():
    from evaluator.device import targets

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


@pytest.mark.parametrize(
    "text, words",
    [
        (
            "h300",
            "--targets h300: unknown target 'h300'; known targets: a100, h100, h200, b200, v100, t4, mi250x, "
            "mi300x, c500, local",
        ),
        ("h100,nope", "unknown target 'nope'"),
        ("none,h100", "'none' skips the portability check and cannot be combined"),
        ("", "--targets was given no target; known targets"),
    ],
)
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


# ---------------------------------------------------------------- one source of defaults


def _main_options():
    """The main command's options as click sees them (what `evaluate --help` renders)."""
    import typer
    from evaluator.cli import app

    command = typer.main.get_command(app)
    return command, {p.name: p for p in command.params}


def test_every_main_option_is_a_build_keyword_with_builds_default():
    import inspect
    from evaluator.cli import run

    keywords = inspect.signature(config.build).parameters
    command, params = _main_options()
    options = run.build_options({name: p.default for name, p in params.items()})
    assert set(options) <= set(keywords)
    for name, value in options.items():
        if name == "model":
            continue  # required by build; the CLI's None is "--model not given" (then --resume or an error)
        default = keywords[name].default
        assert value == default, f"--{name.replace('_', '-')}: the CLI says {value!r}, config.build {default!r}"
        assert default is None or default == config.DEFAULTS[name], name
    # and every build keyword with a value default takes it from DEFAULTS (warmup and seed have no option)
    assert {n for n, k in keywords.items() if k.default not in (None, inspect.Parameter.empty)} == set(config.DEFAULTS)


def test_help_shows_the_defaults_build_uses():
    import click

    command, params = _main_options()
    ctx = click.Context(command)
    help_text = {name: " ".join(p.get_help_record(ctx)[1].split()) for name, p in params.items()}
    for name, value in config.DEFAULTS.items():
        if name not in params or params[name].is_flag and not params[name].secondary_opts:
            continue  # warmup and seed have no option; --no-cache and --push are plain flags
        shown = (
            (name.replace("_", "-") if value else "no-" + name.replace("_", "-")) if isinstance(value, bool) else value
        )
        assert help_text[name].endswith(f"[default: {shown}]"), (name, help_text[name])
    cpu, cuda = config.device_defaults("cpu"), config.device_defaults("cuda")
    assert "(default: fp32 on CPU, fp16 on CUDA)" in help_text["dtype"]
    assert f"(default {cuda['fine_rounds']} on CUDA, {cpu['fine_rounds']} on CPU;" in help_text["fine_rounds"]
    assert (
        f"(default {cuda['soak_seconds']:g} s on CUDA, {cpu['soak_seconds']:g} s on CPU;" in help_text["soak_seconds"]
    )
    assert help_text["reports"] == "Output folder (default: reports/)."
    assert "(default: <reports>/baselines)" in help_text["store"]


def test_dtype_flags_are_what_dtype_accepts():
    from evaluator.kernels.base import DTYPE_ALIASES

    for dtype in ("float32", "float16", "bfloat16"):
        assert DTYPE_ALIASES[config.dtype_flag(dtype)] == dtype


@pytest.mark.parametrize("dtype", ["bf16", "bfloat16"])
def test_bf16_on_the_cpu_is_refused_before_a_run_that_could_build_nothing(dtype):
    with pytest.raises(ConfigError, match="TileLang's C backend has no bfloat16 type"):
        config.build(model="bert-tiny", device="cpu", dtype=dtype)
    assert config.build(model="bert-tiny", device="cpu", dtype="fp16").model.dtype == "float16"


def test_build_without_options_is_the_settings_defaults(tmp_path, monkeypatch):
    import dataclasses

    monkeypatch.chdir(tmp_path)
    cfg = config.build(model="bert-tiny", device="cpu")
    cpu = config.device_defaults("cpu")
    assert cfg.model == config.ModelSettings("bert-tiny")
    assert cfg.profile == config.ProfileSettings()
    assert cfg.tune == config.TuneSettings()
    assert cfg.bench == config.BenchSettings()
    assert cfg.upstream == config.UpstreamSettings()
    # The folders are resolved against where evaluate runs; everything else is the default.
    reports = config.OutputSettings.reports.resolve()
    assert (cfg.output.reports, cfg.output.store) == (reports, reports / config.STORE_FOLDER)
    assert (
        dataclasses.replace(cfg.output, reports=config.OutputSettings.reports, store=config.OutputSettings.store)
        == config.OutputSettings()
    )
    # The device-dependent defaults, from the one function that has them.
    assert (cfg.model.dtype, cfg.bench.soak_s, cfg.tune.fine_rounds) == (
        cpu["dtype"],
        cpu["soak_seconds"],
        cpu["fine_rounds"],
    )
    assert cfg.settings_dict()["isolate"] is cpu["isolate"]
    assert cfg.portability.dtype == config.device_defaults("cuda")["dtype"]  # checked at the GPU default
    assert cfg.bench.timing.reps == config.DEFAULTS["reps"] and cfg.bench.timing.warmup == config.DEFAULTS["warmup"]


def test_the_timing_defaults_agree_with_the_timers_own():
    import dataclasses

    from evaluator.measuring.timing import TimingPolicy

    # DEFAULTS' reps and warmup are timing.py's. The compile mode is the one exception: the
    # timer compiles nothing unless asked ("none"), the command line's default is the device's.
    settings = config.BenchSettings().timing
    assert dataclasses.replace(settings, compile_mode="none") == TimingPolicy()
    assert settings.compile_mode == config.device_defaults("cpu")["compile_mode"] == "default"
    assert config.device_defaults("cuda")["compile_mode"] == "max-autotune"


# ---------------------------------------------------------------- settings_dict records what changes a result


def _full_config(device: str) -> config.Config:
    """A Config with a value in every field, so each can be changed."""
    from datetime import datetime, timezone

    return config.Config(
        model=config.ModelSettings(
            "bert-tiny", batch_size=2, seq_len=16, dtype="float32", seed=1, label="bt", lengths=(4, 12)
        ),
        device=device,
        profile=config.ProfileSettings(ops=2, families=("gemm",), iters=3, max_shapes=6),
        tune=config.TuneSettings(isolate=True, devices=(0, 1)),
        upstream=config.UpstreamSettings("up", "fork", datetime(2026, 8, 21, tzinfo=timezone.utc), "main"),
        output=config.OutputSettings(store_remote="git@example.com:store.git"),
        portability=config.PortabilitySettings(("a100",), "float16"),
        target="cuda:sm_80",
    )


def _leaves(obj, prefix=""):
    """(dotted field name, value) for every field, through nested dataclasses."""
    import dataclasses

    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        name = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value):
            yield from _leaves(value, name + ".")
        else:
            yield name, value


def _changed(value):
    from datetime import datetime, timedelta

    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "-other"
    if isinstance(value, Path):
        return value / "other"
    if isinstance(value, datetime):
        return value + timedelta(days=1)
    if isinstance(value, tuple):
        return value + value[:1]
    raise AssertionError(f"give _full_config a value for this field (got {value!r})")


def _replace(obj, dotted: str, value):
    import dataclasses

    head, _, rest = dotted.partition(".")
    return dataclasses.replace(obj, **{head: _replace(getattr(obj, head), rest, value) if rest else value})


def test_settings_dict_records_every_field_that_changes_a_result():
    """A new field in a settings dataclass fails here until settings_dict records it or
    config.NOT_RECORDED says why it changes no measured number and no verdict."""
    bases = [_full_config("cpu"), _full_config("cuda")]  # max_cv_cuda, flush_l2 matter on CUDA only
    fields = dict(_leaves(bases[0]))
    assert set(config.NOT_RECORDED) <= set(fields), set(config.NOT_RECORDED) - set(fields)
    for name, value in fields.items():
        changes = [_replace(b, name, _changed(value)).settings_dict() != b.settings_dict() for b in bases]
        if name in config.NOT_RECORDED:
            assert not any(changes), f"{name} is recorded: take it out of config.NOT_RECORDED"
        else:
            assert any(changes), f"settings_dict does not record {name}: record it, or say why not in NOT_RECORDED"


@pytest.mark.slow
def test_a_saved_config_loads_in_a_fresh_process(tmp_path):
    import sys

    saved = tmp_path / "config.json"
    cfg = config.build(model="bert-tiny", reps=7, no_cache=True)
    saved.write_text(config.to_json(cfg))
    code = (
        "import sys; from pathlib import Path; from evaluator import config; "
        "c = config.from_json(Path(sys.argv[1]).read_text()); "
        "print(type(c.bench.timing).__name__, c.bench.timing.reps, c.tune.use_cache)"
    )
    p = subprocess.run([sys.executable, "-c", code, str(saved)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["TimingPolicy", "7", "False"]
    assert config.from_json(saved.read_text()) == cfg


def test_a_config_without_a_layout_resumes_in_the_layout_as_given(tmp_path, monkeypatch):
    import json

    monkeypatch.chdir(tmp_path)
    cfg = config.build(model="resnet-tiny", device="cpu", layout="channels-last")
    data = json.loads(config.to_json(cfg))
    assert data["model"]["layout"] == "channels-last" and cfg.settings_dict()["layout"] == "channels-last"
    assert config.from_json(json.dumps(data)) == cfg
    del data["model"]["layout"]
    assert config.from_json(json.dumps(data)).model.layout == "as-given"
    # Without --layout a run asks for auto, which load_model resolves per device and net.
    assert config.build(model="resnet-tiny", device="cpu").model.layout == "auto"


def test_every_compile_mode_but_none_is_given_to_inductor():
    from evaluator.measuring import compiled

    assert set(compiled.INDUCTOR_MODES) | {"none"} == set(config.COMPILE_MODES)
