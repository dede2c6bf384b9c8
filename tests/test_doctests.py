"""Run the doctest examples in the library's docstrings (they are documentation that must stay true).

Every module of the ``boreas`` package is found by walking it, so a module's
examples run as soon as it has some; none is left out by a list to keep.
"""

import doctest
import importlib
import pkgutil

import boreas
import pytest


def modules_with_examples() -> list[str]:
    found = []
    for info in pkgutil.walk_packages(boreas.__path__, "boreas."):
        module = importlib.import_module(info.name)
        if any(test.examples for test in doctest.DocTestFinder().find(module)):
            found.append(info.name)
    return found


MODULES = modules_with_examples()


def test_the_walk_finds_the_modules_of_every_package():
    packages = {name.split(".")[1] for name in MODULES}
    assert {"catalog", "wire", "head", "node", "m3", "client", "cli"} <= packages, packages


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0
