"""No module of the packages uses another module's private names (the style guide: "Add a method to the owner").

A name with a leading underscore belongs to the module that defines it; a
module that needs it asks the owner for it through a public method or
property, whose docstring says who needs it and why (``PartOperator.member_run``,
``Leader.restart_clock``).  So this test, over every module of the packages
(the tests are not checked: a test may look inside what it tests), flags:

* ``expr._name`` where ``expr`` is not ``self``, ``cls``, ``super()`` or
  ``type(self)``, and ``_name`` is not defined in the same module: as a
  function, method or class, a name bound at any level (a module global, a
  class attribute, a dataclass field, an import alias), or an attribute
  assigned on ``self`` or ``cls``.  Two objects of classes in one module may
  use each other's privates; an object of a class defined elsewhere may not
  (``guest.leader._deadline = None`` in hosting.py was Leader's deadline);
* ``from module import _name``: importing another module's private is the
  same reach, spelled differently.

Dunder names (``__init__``) are not private.  Reads of ``self._name`` are not
checked even where ``_name`` comes from another module: that is a mixin
reading its partner's state (``PartOperator``'s bases), which goes when the class is composed of objects
that own their state, not by renaming attributes.

Well-known library privates that are in fact public (documented, or the only
name a library gives a type) are allowed in :data:`LIBRARY`; anything else
goes in :data:`ALLOWED` with its reason, and an entry no longer needed fails
the test, so the list only shrinks.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("head", "node", "regional", "catalog", "cli", "client", "wire", "m3", "spark", "schemas")

#: Private-looking attributes any object may have: namedtuple's public API (its names start with an
#: underscore so as not to clash with field names).
NAMEDTUPLE = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}

#: (the receiver as written, attribute) -> why it is public in spite of its spelling.
LIBRARY = {
    ("sys", "_getframe"): "documented in the sys module",
    ("os", "_exit"): "documented in the os module: exit without cleanup (a forked child, a test cluster's kill)",
    ("etree", "_Element"): "lxml's element type: the documented name lxml gives it, used in annotations",
    ("etree", "_ElementTree"): "lxml's document type, as above",
    ("etree", "_Entity"): "lxml's entity-reference node type, as above (xmlsafe.py refuses entities)",
    ("etree", "_LogEntry"): "lxml's error-log entry type, as above",
    ("argparse", "_SubParsersAction"): "the type add_subparsers() returns; argparse has no public name for it",
}

#: (path under the repository, the expression or import as written) -> why it is allowed for now.
ALLOWED: dict[tuple[str, str], str] = {
    # owned by another change in progress: fix after it lands
    ("spark/load.py", "from .verify import _read"): "owned by another change in progress: fix after it lands",
}


def is_private(name: str) -> bool:
    """``_x`` and ``__x`` are private; ``__x__`` is not.

    >>> [is_private(n) for n in ("_x", "__x", "__init__", "x", "_x_")]
    [True, True, False, False, True]
    """
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def is_own(expr: ast.expr) -> bool:
    """``self``, ``cls``, ``super()`` or ``type(self)``: the object's own attributes.

    >>> [is_own(ast.parse(s, mode="eval").body) for s in ("self", "super()", "type(self)", "op", "self.op")]
    [True, True, True, False, False]
    """
    if isinstance(expr, ast.Name):
        return expr.id in ("self", "cls")
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
        return expr.func.id == "super" or (expr.func.id == "type" and len(expr.args) == 1 and is_own(expr.args[0]))
    return False


def defined(tree: ast.Module) -> set[str]:
    """The private names a module defines (see the module docstring).

    >>> sorted(defined(ast.parse('''
    ... import x as _x
    ... _Y = 1
    ... class _C:
    ...     _field: int = 0
    ...     def _m(self):
    ...         self._a = cls._b = other._c = 1
    ... ''')))
    ['_C', '_Y', '_a', '_b', '_field', '_m', '_x']
    """
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)) and is_own(node.value):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
    return {n for n in names if is_private(n)}


def findings(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """(line, the expression or import as written) for every private of another module ``path`` uses.

    >>> findings(Path("x.py"), '''
    ... class A:
    ...     def __init__(self):
    ...         self._mine = 1
    ...     def f(self, other, guest):
    ...         other._mine, guest.leader._deadline = 2, None
    ...         return super()._g(), other._replace(a=1), sys._getframe()
    ... from .y import _z, w
    ... ''')
    [(6, 'guest.leader._deadline'), (8, 'from .y import _z')]
    """
    tree = ast.parse(path.read_text() if source is None else source)
    mine = defined(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            if (is_own(node.value) or node.attr in mine or node.attr in NAMEDTUPLE
                    or (ast.unparse(node.value), node.attr) in LIBRARY):
                continue
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if is_private(alias.name):
                    found.append((node.lineno, f"from {'.' * node.level}{node.module or ''} import {alias.name}"))
    return sorted(found)


@functools.cache
def all_findings() -> dict[tuple[str, str], list[int]]:
    """(path, expression) -> the lines it is at, over every module of the packages."""
    out: dict[tuple[str, str], list[int]] = {}
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            for line, text in findings(path):
                out.setdefault((path.relative_to(ROOT).as_posix(), text), []).append(line)
    return out


def test_no_module_uses_another_modules_privates():
    found = all_findings()
    new = [f"{path}:{lines[0]}: {text}" for (path, text), lines in sorted(found.items()) if (path, text) not in ALLOWED]
    assert not new, ("private names of another module used (add a public method or property to the owner, "
                     "with a docstring that says who needs it and why):\n  " + "\n  ".join(new))


def test_the_allow_list_has_no_stale_entries():
    found = all_findings()
    stale = [f"{path}: {text}" for path, text in ALLOWED if (path, text) not in found]
    assert not stale, "fixed; remove from ALLOWED:\n  " + "\n  ".join(stale)
