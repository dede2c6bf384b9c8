"""A frozen catalog element with some fields changed: ``dataclasses.replace`` for the per-box hot paths.

A deployment's every new box is copied with one field changed two or three
times on the Head (its application stamped by the merge, its node by the
placement, its origin set to the catalog's when the Head adopts its own
commit: issue 37).  ``dataclasses.replace`` walks the class's fields and
checks each for ``init``/``InitVar`` on every call, about twice the cost of
calling the class with its values in order; :func:`evolve` learns the field
order once per class and calls the constructor the same way, so the result
(``__init__`` and ``__post_init__`` run, unknown names refused) is the one
``replace`` gives.  A class with a field outside ``__init__`` goes to
``replace`` itself (tests/test_evolve.py checks both against it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar

T = TypeVar("T")

#: Per dataclass: a getter of its field values in ``__init__``'s order (a tuple, built in C) and each field's
#: place in it, or None (a field not in ``__init__``: ``dataclasses.replace`` decides what it does).
_ORDER: dict[type, tuple[Callable[[Any], tuple], dict[str, int]] | None] = {}


def evolve(obj: T, /, **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)``, its field order looked up once per class."""
    cls = type(obj)
    try:
        order = _ORDER[cls]
    except KeyError:
        order = _ORDER[cls] = _init_order(cls)
    if order is None:
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    values, place = order
    args = list(values(obj))
    for name, value in changes.items():
        at = place.get(name)
        if at is None:
            raise TypeError(f"{cls.__name__} has no field {name!r} to change")
        args[at] = value
    return cls(*args)


def _init_order(cls: type) -> tuple[Callable[[Any], tuple], dict[str, int]] | None:
    fields = dataclasses.fields(cls)  # (raises TypeError for a non-dataclass, as replace does)
    # (an InitVar is in __dataclass_fields__ but not in fields(); a keyword-only field cannot go in order)
    if len(fields) < 2 or len(fields) != len(cls.__dataclass_fields__) or any(not f.init or f.kw_only
                                                                            for f in fields):
        return None  # (attrgetter of one name gives the value, not a tuple)
    code = getattr(cls.__init__, "__code__", None)
    if code is None or code.co_filename != "<string>":  # an __init__ of the class's own writing, not the one
        return None  # dataclass made (its parameters' order need not be the fields')
    names = [f.name for f in fields]
    return attrgetter(*names), {n: i for i, n in enumerate(names)}
