"""Every project path and module the docs name exists, so the docs cannot drift from the code.

What counts as a name of the project, in docs/*.md and README.md:

* a path whose first part is a top-level entry of the repository (``node/box_state.py``,
  ``tests/support/store_contract.py``, ``examples/xml/``), in backticks or in running text
  (there only when it ends in a file suffix or ``/``); ``{a,b}`` alternatives and ``*``
  patterns are expanded, ``::test`` and ``:line`` suffixes dropped, and ``m3/boxtype._compiled``
  names an attribute of ``m3/boxtype.py``;
* a bare file name in backticks (``codegen.py``): some file of the project has that name;
* a dotted module name ``boreas.x.y`` (optionally followed by attributes and a call);
* a relative Markdown link (``[m3.md](m3.md)``), from the linking document's folder.

Paths outside the repository (``/usr/share/java/zookeeper.jar``, ``../shared/seeds/...``)
are not the project's.  A line that names something not written yet says so with
``(planned)``; its names are not checked.
"""

from __future__ import annotations

import importlib
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = (*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md")
PLANNED = "(planned)"
SKIP_DIRS = {".venv", ".git", "__pycache__", "boreas.egg-info", "node_modules"}
SUFFIXES = (".py", ".md", ".xml", ".sql", ".sh", ".xsd", ".toml", ".json", ".js", ".html", ".css", ".dtd", ".txt",
            ".csv", ".c", ".h")

SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
DOTTED = re.compile(r"(?<![\w./-])boreas(?:\.\w+)+")
WORD = re.compile(r"(?:[^\s`'\"<>\[\]=,;(){}]|\{[^{}\s]*\})+")


@cache
def top_level() -> frozenset[str]:
    return frozenset(p.name for p in ROOT.iterdir() if p.name not in SKIP_DIRS and not p.name.startswith("."))


@cache
def file_names() -> frozenset[str]:
    """The name of every file of the project (for bare names like ``codegen.py``)."""
    names = set()
    for path in ROOT.rglob("*"):
        if path.is_file() and not SKIP_DIRS & set(path.relative_to(ROOT).parts):
            names.add(path.name)
    return frozenset(names)


def expand(token: str) -> list[str]:
    """``a/{b,c}.py`` -> ``a/b.py``, ``a/c.py``.

    >>> expand("node/{dataflow,query}.py")
    ['node/dataflow.py', 'node/query.py']
    """
    found = re.search(r"\{([^{}]*)\}", token)
    if not found:
        return [token]
    return [t for alt in found[1].split(",") for t in expand(token[:found.start()] + alt + token[found.end():])]


def clean(token: str) -> str:
    """A path as written, without what follows it: a pytest id, a line number, punctuation."""
    token = token.split("::")[0]
    token = re.sub(r":\d+(-\d+)?$", "", token)
    return token.rstrip(".,:;)!?")


def path_exists(token: str) -> bool:
    """Whether the project path ``token`` (file, folder, pattern, or file.attribute) exists."""
    if any(ch in token for ch in "*?["):
        return any(ROOT.glob(token.rstrip("/")))
    path = ROOT / token
    if path.exists() and (not token.endswith("/") or path.is_dir()):
        return True
    stem, dot, attr = token.rpartition(".")  # m3/boxtype._compiled: an attribute of m3/boxtype.py
    return bool(dot) and "/" not in attr and (ROOT / f"{stem}.py").is_file()


def module_exists(name: str) -> bool:
    """Whether ``boreas.x.y[.attr...]`` is a module of the project, or attributes of one."""
    parts = name.split(".")
    for end in range(len(parts), 1, -1):
        relative = Path(*parts[1:end])
        if (ROOT / relative).with_suffix(".py").is_file() or (ROOT / relative / "__init__.py").is_file():
            break
    else:
        return name == "boreas"
    value = importlib.import_module(".".join(parts[:end]))
    for attr in parts[end:]:
        if not hasattr(value, attr):
            return False
        value = getattr(value, attr)
    return True


def is_project_path(token: str) -> bool:
    first = token.split("/")[0]
    return "/" in token and first in top_level() and not token.startswith("/")


def named_in(line: str) -> set[tuple[str, str]]:
    """("path" | "file" | "module" | "link", name) for each name of the project on one line."""
    found: set[tuple[str, str]] = set()
    spans = [m[1] for m in SPAN.finditer(line)]
    prose = SPAN.sub(" ", LINK.sub(" ", line))
    for text, in_code in [*((s, True) for s in spans), (prose, False)]:
        for word in WORD.findall(text):
            for token in expand(clean(word)):
                if is_project_path(token):
                    if in_code or token.endswith(("/", *SUFFIXES)):
                        found.add(("path", token))
                elif in_code and "/" not in token and token.endswith(".py") and word == text.strip():
                    found.add(("file", token))
        for name in DOTTED.findall(text):
            found.add(("module", name))
    return found


def doc_names() -> list[tuple[str, int, str, str]]:
    names = []
    for doc in DOCS:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            if PLANNED in line:
                continue
            names.extend((doc.name, n, kind, name) for kind, name in sorted(named_in(line)))
            for target in LINK.findall(line):
                target = target.split("#")[0]
                if target and not re.match(r"\w+:", target):
                    resolved = (doc.parent / target).resolve()
                    if resolved.is_relative_to(ROOT):
                        names.append((doc.name, n, "link", str(resolved.relative_to(ROOT))))
    return names


def missing(kind: str, name: str) -> bool:
    if kind in ("path", "link"):
        return not path_exists(name)
    if kind == "file":
        return name not in file_names()
    return not module_exists(name)


def test_the_scan_finds_names_of_every_kind():
    """Not vacuous: the names this test was written for are found, and non-project paths are not."""
    names = {(kind, name) for _, _, kind, name in doc_names()}
    for expected in [("path", "node/box_state.py"), ("path", "m3/cumulus/plan.py"),
                     ("path", "catalog/store/membership.py"), ("path", "tests/support/cumulus_sim.py"),
                     ("module", "boreas.client.query.QueryClient"), ("link", "docs/m3.md")]:
        assert expected in names
    assert not any("zookeeper.jar" in name or name.startswith(("..", "/")) for _, name in names)
    assert named_in("see `m3/{a,b}.py` and catalog/x.py, not ../shared/x.py or `/usr/x.jar`") == {
        ("path", "m3/a.py"), ("path", "m3/b.py"), ("path", "catalog/x.py")}


@pytest.mark.parametrize("doc", [d.name for d in DOCS])
def test_every_project_path_a_doc_names_exists(doc):
    wrong = [f"{d}:{n}: {kind} {name}" for d, n, kind, name in doc_names() if d == doc and missing(kind, name)]
    assert not wrong, f"named but missing (mark a line that names what is not written yet {PLANNED}):\n" + \
        "\n".join(wrong)
