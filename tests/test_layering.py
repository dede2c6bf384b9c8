"""Dependencies point one way, and no module imports itself back (docs/architecture.md, "Parts and packages").

The allowed dependencies are read from that table, so the doc and this test
cannot disagree: the first column names the package (``boreas.x``), the last
the Boreas packages it may import (see the paragraph above the table for the
wording).  A package may always import itself, and every package may read
``boreas.schemas`` (data).

Every import in every module of the packages counts: at the top, inside a
function (a lazy import is still a dependency) and under ``TYPE_CHECKING``
(a cycle hidden from the interpreter is still a cycle for the reader).
"""

from __future__ import annotations

import ast
import functools
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
DATA = "schemas"  # every package may read it
EVERYTHING = "everything"
NOTHING = "nothing else in Boreas"


def parse_table(text: str) -> dict[str, set[str] | None]:
    """package -> the other Boreas packages it may import (None: any), from the "Parts and packages" table.

    >>> parse_table('''## Parts and packages
    ... | package | role | depends on |
    ... |---|---|---|
    ... | `boreas.a` (`a/`) | first (of all, here) | nothing else in Boreas (uses lxml) |
    ... | `boreas.b` (`b/`) | second | a (for x, y) |
    ... | `boreas.c` (`c/`) | the front end | everything |
    ... ## Next''')
    {'a': set(), 'b': {'a'}, 'c': None}
    """
    section = text.split("## Parts and packages", 1)[1].split("\n#", 1)[0]
    rows = [line.strip().strip("|").split("|") for line in section.splitlines() if line.startswith("| `boreas.")]
    table: dict[str, set[str] | None] = {}
    for cells in rows:
        name = re.fullmatch(r"`boreas\.(\w+)`.*", cells[0].strip())
        assert name, f"the first column should start with `boreas.x`: {cells[0]!r}"
        depends = cells[-1].strip()
        while re.search(r"\([^()]*\)", depends):  # notes in parentheses explain; they do not count
            depends = re.sub(r"\s*\([^()]*\)", "", depends)
        table[name[1]] = {item.strip() for item in depends.split(",")}
    for package, items in table.items():
        unknown = items - set(table) - {EVERYTHING, NOTHING}
        assert not unknown, f"{package}: cannot read {sorted(unknown)} in the last column of {ARCHITECTURE.name}"
        assert len(items) == 1 or not items & {EVERYTHING, NOTHING}, f"{package}: ambiguous {sorted(items)}"
        table[package] = None if EVERYTHING in items else items - {NOTHING}
    return table


TABLE = parse_table(ARCHITECTURE.read_text())
#: package -> the other Boreas packages it may import (docs/architecture.md)
ALLOWED: dict[str, set[str]] = {p: deps | {DATA} for p, deps in TABLE.items() if deps is not None}
PACKAGES = tuple(TABLE)


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


def test_the_table_names_every_package_and_reads_as_meant():
    """The parse is not vacuous: each top-level package of pyproject.toml has its row, read as written."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    top = {name.split(".")[1] for name in setuptools["packages"] if name.count(".") == 1}
    assert set(TABLE) == top
    assert TABLE["node"] == {"catalog", "wire", "m3"}
    assert TABLE["client"] == {"catalog", "wire", "m3"}  # the note in parentheses does not count
    assert TABLE["catalog"] == TABLE["schemas"] == set()
    assert {p for p, deps in TABLE.items() if deps is None} == {"cli", "spark"}


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
