"""The doctest examples of the M3 modules added for issue 14 (``tests/test_doctests.py`` lists the older ones)."""

import doctest
import importlib

import pytest

MODULES = [
    "boreas.m3.compiler.constants",
    "boreas.m3.compiler.predicates",
    "boreas.m3.compiler.nodes",
    "boreas.m3.compiler.resolve",
    "boreas.m3.compiler.outputs",
    "boreas.m3.compiler.viewexpr",
    "boreas.m3.compiler.columns",
    "boreas.m3.compiler.views",
    "boreas.m3.runtime.views",
    "boreas.m3.compiler.positions",
    "boreas.m3.viewsyntax",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no doctest examples"
    assert result.failed == 0


def test_every_pass_is_a_function_of_its_own_module_with_doctests():
    from boreas.m3.compiler.pipeline import PASSES

    assert [name for name, _ in PASSES] == ["frontend", "normalize", "delta", "simplify", "materialize", "views",
                                            "triggers", "check"]
    for name, fn in PASSES:
        module = importlib.import_module(fn.__module__)
        assert module.__name__.rsplit(".", 1)[-1] == name
        assert doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE).attempted > 0
