"""No dead code in the packages: every function, method, class, property and import is used.

vulture reads every module of the packages, and tests/support/vulture_allow.py:
the reviewed names it cannot see used (called by Python itself, by bench/, or
public API the docs describe), each with its reason.  The threshold is 60%:
functions, methods, classes and properties, whose names a module defines and
nothing calls (imports are reported at 90%, unreachable code at 100%).  Unused
variables and attributes are left out: dataclass and msgspec fields, and
protocol parameters, would fill the list with names that are not dead.
A name the tests alone use is still dead unless the docs describe it.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import vulture

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("catalog", "cli", "client", "head", "m3", "node", "regional", "schemas", "spark", "wire")
ALLOW = ROOT / "tests" / "support" / "vulture_allow.py"
KINDS = {"function", "method", "class", "property", "import", "unreachable_code"}


def unused() -> list[str]:
    v = vulture.Vulture()
    v.scavenge([str(ROOT / p) for p in PACKAGES] + [str(ROOT / "__init__.py"), str(ALLOW)])
    return [item.get_report(add_size=False).replace(str(ROOT) + "/", "")
            for item in v.get_unused_code(min_confidence=60) if item.typ in KINDS]


def test_nothing_in_the_packages_is_unused():
    found = unused()
    assert not found, ("unused (remove it, or add it to tests/support/vulture_allow.py with why it is used):\n"
                       + "\n".join(found))


def test_every_allowed_name_still_exists():
    """The allow list names real things: importing it evaluates every entry (a removed name fails here)."""
    importlib.import_module("support.vulture_allow")
