"""Every package of the source tree is in pyproject.toml, so a built wheel (not only the editable install) has it.

The editable install maps ``boreas`` onto the checkout, so a package that
``[tool.setuptools] packages`` forgets still imports here; an installed
wheel would lack it (``boreas.node.cumulus`` once did).
"""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_SHIPPED = {"tests", "bench", "examples", "docs", ".venv", ".git", "build"}


def test_every_source_package_is_listed_and_mapped():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, mapped = set(config["packages"]), config["package-dir"]
    found = {"boreas"}
    for init in ROOT.rglob("__init__.py"):
        parts = init.parent.relative_to(ROOT).parts
        if parts and parts[0] not in NOT_SHIPPED and not any(p.startswith(".") for p in parts):
            found.add(".".join(("boreas", *parts)))
    assert found - listed == set(), "packages missing from pyproject.toml"
    assert listed - found == set(), "pyproject.toml lists packages that do not exist"
    for package in listed - {"boreas"}:
        assert mapped.get(package) == package.removeprefix("boreas.").replace(".", "/"), package
