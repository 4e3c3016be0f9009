"""The package's import graph has no circles, counting imports inside functions: each
module of evaluator/ is read with `ast`, every `import` and `from ... import` anywhere in
it (top level, functions, TYPE_CHECKING blocks excepted) becomes an arrow to the module it
names and to every package above that module which the importer is not itself inside
(importing a.b.c runs a/__init__ and a/b/__init__ first), a package that imports its
folders by walking them (the kernel registry) has an arrow to each, and the graph must be
acyclic. Private names are not imported across modules: a name starting with "_" is used
only in its own module (and by the tests)."""

from __future__ import annotations

import pytest
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "evaluator"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PKG.rglob("*.py")}


def _resolve(current: str, is_pkg: bool, level: int, target: str | None) -> str:
    base = current.split(".") if is_pkg else current.split(".")[:-1]
    if level:
        base = base[: len(base) - (level - 1)] if level > 1 else base
        return ".".join([*base, *(target.split(".") if target else [])])
    return target or ""


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _ancestors(target: str, importer: str) -> list[str]:
    """The packages above `target` that importing it runs, but for those the importer is in."""
    parts = target.split(".")
    mine = importer.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) != ".".join(mine[:i])]


def edges() -> dict[str, set[tuple[str, tuple[str, ...]]]]:
    """module -> {(imported module, names taken)} for every import in it, at any depth."""
    mods = _modules()
    out: dict[str, set[tuple[str, tuple[str, ...]]]] = {m: set() for m in mods}
    for name, path in mods.items():
        text = path.read_text()
        tree = ast.parse(text, filename=str(path))
        is_pkg = path.name == "__init__.py"
        if is_pkg and "iter_modules(__path__)" in text and "import_module" in text:
            out[name] |= {(m, ()) for m in mods if m.startswith(name + ".") and m.count(".") == name.count(".") + 1}
        skip = {id(n) for t in ast.walk(tree) if _type_checking(t) for n in ast.walk(t)}
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                base = _resolve(name, is_pkg, node.level, node.module)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if sub in mods:
                        out[name].add((sub, ()))
                        out[name] |= {(a, ()) for a in _ancestors(sub, name) if a in mods}
                    elif base in mods:
                        out[name].add((base, (alias.name,)))
                        out[name] |= {(a, ()) for a in _ancestors(base, name) if a in mods}
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in mods:
                        out[name].add((alias.name, ()))
                        out[name] |= {(a, ()) for a in _ancestors(alias.name, name) if a in mods}
    return out


def cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (or a module importing itself)."""
    graph = {m: {t for t, _ in ts if t != m} for m, ts in edges().items()}
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


@pytest.mark.slow
def test_no_import_circles_counting_imports_inside_functions():
    found = cycles()
    assert not found, "\n".join(" <-> ".join(c) for c in found)


@pytest.mark.slow
def test_no_private_name_is_imported_from_another_module():
    taken = sorted(
        {
            (m, t, n)
            for m, ts in edges().items()
            for t, names in ts
            for n in names
            if n.startswith("_") and not n.startswith("__")
        }
    )
    assert not taken, "\n".join(f"{m} takes {n} from {t}" for m, t, n in taken)
