"""The doctest examples of the compiler modules added for issue 14 (``tests/test_doctests.py`` lists the older ones)."""

import doctest
import importlib

import pytest

MODULES = [
    "boreas.m3.compiler.constants",
    "boreas.m3.compiler.predicates",
    "boreas.m3.compiler.nodes",
    "boreas.m3.compiler.resolve",
    "boreas.m3.compiler.outputs",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no doctest examples"
    assert result.failed == 0
