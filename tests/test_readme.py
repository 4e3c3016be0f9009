"""The documentation's examples are tested: README.md, CONTRIBUTING.md, CHANGELOG.md and
every docs/*.md. Every YAML block validates (as a checklist or a fleet plan), every
`evaluate` line names a real command and real options, every option in the options table
exists and every option of `evaluate --model` is in it, README stays a front page (at most
12 KiB), and every relative link points at a file that exists (and, into a Markdown page,
at a heading that exists)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer

from evaluator import checklist
from evaluator.cli import app

ROOT_DIR = Path(__file__).resolve().parents[1]
README = ROOT_DIR / "README.md"
PAGES = [README, ROOT_DIR / "CONTRIBUTING.md", ROOT_DIR / "CHANGELOG.md", *sorted((ROOT_DIR / "docs").glob("*.md"))]
ROOT = typer.main.get_command(app)
README_MAX_BYTES = 12_288
OPTIONS_TABLE = "Main options of `evaluate --model`:"


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT_DIR))


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def _blocks(text: str, lang: str) -> list[str]:
    """Fenced blocks whose info string is `lang` ("" for a bare fence), fence by fence."""
    out, current, info = [], None, ""
    for line in text.splitlines():
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


def _prose(text: str) -> str:
    """The text outside fenced blocks (links and inline code live there)."""
    keep, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            keep.append(line)
    return "\n".join(keep)


def _command_for(words: list[str]):
    cmd, rest = ROOT, list(words)
    # typer may ship its own click: duck-type the group rather than isinstance
    while rest and hasattr(cmd, "commands") and rest[0] in cmd.commands:
        cmd = cmd.commands[rest.pop(0)]
    return cmd, rest  # `evaluate --model ...` is the group's own callback


def _options(cmd) -> set[str]:
    return {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}  # click adds --help


def _yaml_blocks() -> list:
    return [
        pytest.param(block, id=f"{_name(p)}-{i}") for p in PAGES for i, block in enumerate(_blocks(_text(p), "yaml"))
    ]


@pytest.mark.parametrize("block", _yaml_blocks())
def test_every_yaml_example_validates(block, tmp_path):
    path = tmp_path / "example.yaml"
    path.write_text(block)
    if "models:" in block:  # a fleet plan: every cell's options go through config.build
        from evaluator import fleet

        plan = fleet.load_plan(path)
        assert plan.models
    else:
        checklist.load(path)  # raises ChecklistError naming the line on any unknown field


def _evaluate_lines(text: str) -> list[str]:
    lines = []
    for block in _blocks(text, "") + _blocks(text, "bash"):
        for line in block.splitlines():
            m = re.search(r"(?:^|&& )evaluate (.*)$", line.strip())
            if m:
                lines.append(m.group(1).split("  ")[0])
    lines += re.findall(r"`evaluate ([^`]+)`", _prose(text))
    return lines


def _all_evaluate_lines() -> list:
    return [
        pytest.param(_name(p), line, id=f"{_name(p)}: {line[:60]}") for p in PAGES for line in _evaluate_lines(_text(p))
    ]


def test_the_pages_show_evaluate_lines():
    # the parametrised test below must not pass by finding nothing
    assert len(_all_evaluate_lines()) >= 20
    assert _evaluate_lines(_text(README)) and _evaluate_lines(_text(ROOT_DIR / "docs" / "usage.md"))


@pytest.mark.parametrize(("page", "line"), _all_evaluate_lines())
def test_every_evaluate_line_names_real_commands_and_options(page, line):
    words = [w for w in re.sub(r"\[|\]|\.\.\.", " ", line).split() if w]
    cmd, rest = _command_for(words)
    assert not (hasattr(cmd, "commands") and rest and not rest[0].startswith("--")), (
        f"{page}: `evaluate {line}`: {cmd.name or 'evaluate'} has no command {rest[0]}"
    )
    known = _options(cmd)
    for word in rest:
        if word.startswith("--"):
            assert word.split("=")[0] in known, f"{page}: `evaluate {line}`: {word} is not an option of {cmd.name}"


def _options_table() -> tuple[str, str]:
    """The options table of `evaluate --model`: (page, table text). Exactly one page holds it."""
    holders = [p for p in PAGES if OPTIONS_TABLE in _text(p)]
    assert len(holders) == 1, f"{OPTIONS_TABLE!r} is in {[_name(p) for p in holders] or 'no page'}"
    text = _text(holders[0]).split(OPTIONS_TABLE)[1]
    rows = []
    for line in text.splitlines()[1:]:
        if rows and not line.startswith("|"):
            break
        if line.startswith("|"):
            rows.append(line)
    return _name(holders[0]), "\n".join(rows)


def test_every_option_in_the_options_table_exists():
    page, table = _options_table()
    mentioned = set(re.findall(r"`(--[a-z0-9][a-z0-9-]*)", table))
    assert mentioned, f"{page}: the options table names no option"
    missing = mentioned - _options(ROOT)
    assert not missing, f"{page}: the options table names options evaluate does not have: {sorted(missing)}"


def test_every_option_of_evaluate_is_in_the_options_table():
    page, table = _options_table()
    named = set(re.findall(r"--[a-z0-9][a-z0-9-]*", table))
    undocumented = [
        p.opts[0]
        for p in ROOT.params
        if not p.hidden and not named & {o for o in (*p.opts, *p.secondary_opts) if o.startswith("--")}
    ]
    assert not undocumented, f"{page}: the options table leaves out {undocumented}"


def test_readme_is_a_front_page():
    size = README.stat().st_size
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move detail into docs/ (at most {README_MAX_BYTES})"


_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces as
    hyphens, a repeated heading numbered -1, -2..."""
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(_text(page)).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        out.add(slug if n == 0 else f"{slug}-{n}")
        seen[slug] = n + 1
    return out


def _links() -> list:
    out = []
    for p in PAGES:
        for target in _LINK.findall(_prose(_text(p))):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
                continue
            out.append(pytest.param(p, target, id=f"{_name(p)} -> {target}"))
    return out


def test_the_pages_have_relative_links():
    assert len(_links()) >= 30  # the parametrised test below must not pass by finding nothing


@pytest.mark.parametrize(("page", "target"), _links())
def test_every_relative_link_points_at_a_file_that_exists(page, target):
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    assert dest.exists(), f"{_name(page)}: the link {target} points at {path}, which does not exist"
    if anchor and dest.suffix == ".md":
        assert anchor in _anchors(dest), f"{_name(page)}: the link {target}: {dest.name} has no heading #{anchor}"


def test_the_shipped_checklists_named_in_the_docs_exist():
    from evaluator import resources

    for name in ("default", "production"):
        assert resources.find_checklist(name) is not None


def _subcommands(cmd=ROOT, path: tuple = ()) -> list:
    out = []
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        if getattr(sub, "hidden", False):
            continue
        out.append(((*path, name), sub))
        out += _subcommands(sub, (*path, name))
    return out


def test_every_subcommand_and_its_options_are_in_the_usage_page():
    # usage.md shows each command as `evaluate <command>`, and each of its options either on
    # that line or in a paragraph that names the command.
    usage = _text(ROOT_DIR / "docs" / "usage.md")
    paragraphs = re.split(r"\n\s*\n", usage)
    missing = []
    for path, cmd in _subcommands():
        words = " ".join(path)
        lines = [line for line in usage.splitlines() if re.search(rf"evaluate {words}(\s|$|`)", line)]
        if not lines:
            missing.append(f"evaluate {words}")
            continue
        text = "\n".join([*lines, *(p for p in paragraphs if f"`{path[-1]}`" in p or f"evaluate {words}" in p)])
        for p in cmd.params:
            if p.hidden or not p.opts[0].startswith("-"):
                continue
            if not {o for o in (*p.opts, *p.secondary_opts)} & set(re.findall(r"--?[a-z0-9][a-z0-9-]*", text)):
                missing.append(f"evaluate {words} {p.opts[0]}")
    assert not missing, f"docs/usage.md leaves out {missing}"
