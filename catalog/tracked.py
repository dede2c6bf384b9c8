"""A catalog copy that remembers which elements were written, so a change is known without comparing.

Merging a submission changes a copy of the catalog in many places (declare,
delete, modify, place, move, drop orphans).  Finding afterwards what it
changed by comparing every dict of the copy with the original costs the
size of the catalog; a :class:`TrackedDict` notes each key as it is written
or removed instead, and :func:`tracked_copy` / :func:`untracked` wrap and
unwrap a whole :class:`~.model.Catalog` (unwrapping hands the dicts over, uncopied).

>>> from boreas.catalog.model import Catalog, Node
>>> copy = tracked_copy(Catalog())
>>> copy.nodes.setdefault("localhost:15000", Node("localhost:15000")) and None
>>> plain, touched = untracked(copy)
>>> touched["nodes"], isinstance(plain.nodes, dict)
({'localhost:15000'}, True)
"""

from __future__ import annotations

from typing import Any

from .layered import Layered
from . import model
from .model import Catalog

#: Catalog dicts, every kind of element.
CATALOG_DICTS = tuple(Catalog.__dataclass_fields__)[1:]  # (after ``version``)


class TrackedDict(dict):
    """A dict noting in ``touched`` every key set or removed through it (reads are not noted)."""

    __slots__ = ("touched",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.touched: set[Any] = set()

    def __setitem__(self, key: Any, value: Any) -> None:
        self.touched.add(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        self.touched.add(key)
        super().__delitem__(key)

    def pop(self, key: Any, *default: Any) -> Any:
        self.touched.add(key)
        return super().pop(key, *default)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self.touched.add(key)
        return super().setdefault(key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        other = dict(*args, **kwargs)
        self.touched.update(other)
        super().update(other)

    def popitem(self) -> tuple[Any, Any]:
        key, value = super().popitem()
        self.touched.add(key)
        return key, value

    def clear(self) -> None:
        self.touched.update(self)
        super().clear()


class TrackedLayered(Layered):
    """A :class:`~.layered.Layered` version noting in ``touched`` every key set or removed through it (a
    large Catalog dict: the merge's copy shares the catalog's entries instead of copying them)."""

    __slots__ = ("touched",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.touched: set[Any] = set()

    def __setitem__(self, key: Any, value: Any) -> None:
        self.touched.add(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        self.touched.add(key)
        super().__delitem__(key)


#: What :func:`tracked_copy` makes a Catalog dict (``isinstance(d, TRACKED)``: ``d.touched`` is what was written).
TRACKED = (TrackedDict, TrackedLayered)


def tracked_copy(catalog: Catalog) -> Catalog:
    """A copy of ``catalog`` whose dicts note what is written to them."""
    copy = Catalog(version=catalog.version)
    for name in CATALOG_DICTS:
        found = getattr(catalog, name)
        if type(found) is not Layered and len(found) < model.LAYER_FROM:
            setattr(copy, name, TrackedDict(found))
        else:
            setattr(copy, name, TrackedLayered.over(catalog.shared(name)))
    return copy


def untracked(catalog: Catalog) -> tuple[Catalog, dict[str, set[Any]]]:
    """The catalog with its dicts handed over, and the keys written to each of them.

    The dicts are not copied (a ``TrackedDict`` is a dict, a ``TrackedLayered`` a layered version; what
    is written to either later is noted and read by nobody): a copy would cost the size of the catalog
    for a one-box change."""
    plain = Catalog(version=catalog.version)
    touched = {}
    for name in CATALOG_DICTS:
        found = getattr(catalog, name)
        noted = isinstance(found, TRACKED)
        setattr(plain, name, found if noted or isinstance(found, Layered) else dict(found))
        touched[name] = set(found.touched) if noted else set(found)
    return plain, touched
