"""catalog/evolve.py's ``evolve`` gives what ``dataclasses.replace`` gives, for every catalog element kind."""

from __future__ import annotations

import dataclasses
from dataclasses import InitVar, dataclass, field

import pytest

from boreas.catalog import model
from boreas.catalog.diagnostics import CATALOG, Origin
from boreas.catalog.evolve import evolve
from boreas.catalog.model import Box, InPort, Input, Output, Query, Table
from hypothesis import given, settings
from hypothesis import strategies as st
from support.property_scale import SETTINGS, examples

_TEXT = st.text("abcxyz:.1", min_size=1, max_size=6)
_BOXES = st.builds(Box, _TEXT, st.sampled_from(["filter", "map"]), st.tuples(st.builds(InPort, _TEXT)),
                   st.tuples(_TEXT), st.lists(st.tuples(_TEXT, _TEXT), max_size=3).map(tuple),
                   node=st.none() | _TEXT, app=_TEXT)


@settings(max_examples=examples(60), **SETTINGS)
@given(_BOXES, st.sampled_from(["node", "app", "origin", "params"]), _TEXT)
def test_a_box_evolved_is_the_box_replaced(box, name, text):
    value = {"origin": Origin(text, 3), "params": ((text, text),)}.get(name, text)
    got, want = evolve(box, **{name: value}), dataclasses.replace(box, **{name: value})
    assert type(got) is Box and got == want and got.app == want.app  # (app is not compared by ==)
    assert [getattr(got, f.name) for f in dataclasses.fields(Box)] == [getattr(want, f.name)
                                                                       for f in dataclasses.fields(Box)]


def test_every_element_kind_the_merge_stamps_evolves_as_replace_does():
    for obj in (Input("s", "S"), Output("s"), Table("t", "S", keys=("k",)), Query("q", ("b",)),
                Box("b", "filter", (), ("o",), origin=CATALOG)):
        assert isinstance(obj, model.NAMED_BY_APP)
        got = evolve(obj, app="prod")
        assert got == dataclasses.replace(obj, app="prod") and got.app == "prod" and obj.app == ""


def test_an_unknown_field_is_refused_and_a_class_replace_handles_differently_goes_to_replace():
    with pytest.raises(TypeError):
        evolve(Box("b", "filter", (), ()), nod="x")

    @dataclass(frozen=True)
    class Later:
        a: int
        b: int = field(init=False, default=7)
        c: InitVar[int] = 0

        def __post_init__(self, c):
            object.__setattr__(self, "b", self.a + c)

    with pytest.raises(ValueError):  # (replace's rule: a field outside __init__ cannot be changed)
        evolve(Later(1, 2), b=1)
    assert evolve(Later(1, 2), a=5, c=1) == dataclasses.replace(Later(1, 2), a=5, c=1)


def test_a_class_with_an_init_of_its_own_goes_to_replace():
    """``evolve`` calls the class with its fields in order, which only the ``__init__`` dataclass writes takes:
    one of the class's own (parameters in another order) gets ``replace``'s keywords."""
    @dataclasses.dataclass(frozen=True)
    class Own:
        a: int
        b: int = 0

        def __init__(self, b: int = 0, a: int = 0) -> None:
            object.__setattr__(self, "a", a)
            object.__setattr__(self, "b", b)

    assert evolve(Own(a=1, b=2), a=5) == dataclasses.replace(Own(a=1, b=2), a=5) == Own(a=5, b=2)
