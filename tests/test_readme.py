"""README's examples are tested: every YAML block validates as a checklist, every
`evaluate` line names a real command and real options, every option in the options
table exists, and the model specs it shows load (the ones this machine can load)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer

from evaluator import checklist
from evaluator.cli import app

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
ROOT = typer.main.get_command(app)


def _blocks(lang: str) -> list[str]:
    """Fenced blocks whose info string is `lang` ("" for a bare fence), fence by fence."""
    out, current, info = [], None, ""
    for line in README.splitlines():
        if line.startswith("```"):
            if current is None:
                current, info = [], line[3:].strip()
            else:
                if info == lang:
                    out.append("\n".join(current) + "\n")
                current = None
        elif current is not None:
            current.append(line)
    return out


def _command_for(words: list[str]):
    cmd, rest = ROOT, list(words)
    # typer may ship its own click: duck-type the group rather than isinstance
    while rest and hasattr(cmd, "commands") and rest[0] in cmd.commands:
        cmd = cmd.commands[rest.pop(0)]
    return cmd, rest  # `evaluate --model ...` is the group's own callback


def _options(cmd) -> set[str]:
    return {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}


@pytest.mark.parametrize("block", _blocks("yaml"))
def test_every_yaml_example_validates(block, tmp_path):
    path = tmp_path / "example.yaml"
    path.write_text(block)
    if "models:" in block:  # a fleet plan: every cell's options go through config.build
        from evaluator import fleet
        plan = fleet.load_plan(path)
        assert plan.models
    else:
        checklist.load(path)  # raises ChecklistError naming the line on any unknown field


def _evaluate_lines() -> list[str]:
    lines = []
    for block in _blocks("") + _blocks("bash"):
        for line in block.splitlines():
            m = re.search(r"(?:^|&& )evaluate (.*)$", line.strip())
            if m:
                lines.append(m.group(1).split("  ")[0])
    lines += re.findall(r"`evaluate ([^`]+)`", README)
    return lines


@pytest.mark.parametrize("line", _evaluate_lines())
def test_every_evaluate_line_names_real_commands_and_options(line):
    words = [w for w in re.sub(r"\[|\]|\.\.\.", " ", line).split() if w]
    cmd, rest = _command_for(words)
    assert not (hasattr(cmd, "commands") and rest and not rest[0].startswith("--")), \
        f"README: `evaluate {line}`: {cmd.name or 'evaluate'} has no command {rest[0]}"
    known = _options(cmd)
    for word in rest:
        if word.startswith("--"):
            assert word.split("=")[0] in known, f"README: `evaluate {line}`: {word} is not an option of {cmd.name}"


def test_every_option_in_the_options_table_exists():
    table = README.split("Main options of `evaluate --model`:")[1].split("Exit codes")[0]
    mentioned = set(re.findall(r"`(--[a-z-]+)", table))
    missing = mentioned - _options(ROOT)
    assert not missing, missing


def test_the_shipped_checklists_named_in_readme_exist():
    from evaluator import resources
    for name in ("default", "production"):
        assert resources.find_checklist(name) is not None
