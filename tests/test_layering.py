"""Dependencies point one way, and no module imports itself back (docs/architecture.md, "Parts and packages").

Every import in every module of the packages counts: at the top, inside a
function (a lazy import is still a dependency) and under ``TYPE_CHECKING``
(a cycle hidden from the interpreter is still a cycle for the reader).
The allowed dependencies are the table of docs/architecture.md; a package
may always import itself.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: package -> the other Boreas packages it may import (docs/architecture.md)
ALLOWED: dict[str, set[str]] = {
    "schemas": set(),
    "catalog": {"schemas"},
    "wire": {"catalog", "schemas"},
    "m3": {"catalog", "schemas"},
    "client": {"catalog", "wire", "m3", "schemas"},
    "head": {"catalog", "wire", "m3", "client", "schemas"},
    "node": {"catalog", "wire", "m3", "schemas"},
    "regional": {"catalog", "wire", "client", "schemas"},
}
EVERYTHING = ("cli", "spark")
PACKAGES = (*ALLOWED, *EVERYTHING)


def modules() -> dict[str, Path]:
    """``boreas.x.y`` -> its file, for every module of the packages (a package is its ``__init__``)."""
    found = {}
    for top in PACKAGES:
        for path in (ROOT / top).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(("boreas", *(parts[:-1] if parts[-1] == "__init__" else parts)))
            found[name] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The Boreas modules ``name`` imports anywhere in its file (the nearest module of each imported name)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names)
    found = set()
    for t in targets:
        while t and t not in known:
            t = t.rpartition(".")[0]
        if t.startswith("boreas.") and t != name:
            found.add(t)
    return found


@functools.cache
def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted.

    >>> cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}})
    [['a', 'b']]
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_walk_finds_every_package_and_their_imports():
    edges = graph()
    assert {name.split(".")[1] for name in edges} == set(PACKAGES)
    assert "boreas.catalog.model" in edges["boreas.catalog.merge"]  # (the walk is not vacuous)
    assert "boreas.node.cumulus.membership" in edges["boreas.node.cumulus.part"]


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_the_packages_below_it(package):
    wrong = sorted(f"{name} imports {target}" for name, targets in graph().items() if name.split(".")[1] == package
                   for target in targets
                   if target.split(".")[1] not in ALLOWED[package] | {package})
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_itself_back():
    found = cycles(graph())
    assert not found, "\n".join(" <-> ".join(c) for c in found)
