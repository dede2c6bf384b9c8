"""Deriving a catalog index for the next version: what :meth:`.index.CatalogIndex.derive` runs.

A :class:`Derivation` holds the working state of one derive: the references
moved for the changed elements, the elements to check again, the region of
boxes typed again in dataflow order (Kahn's algorithm over the streams
entering it), and the checks a change can reach.  It shares the base
index's states, typings and schemas until the change types something, and
returns what the new index holds (:class:`Derived`); the index itself, the
immutable value, is :mod:`.index`'s.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from . import changelog, table_params
from .boxtypes import BoxTypeRegistry
from .diagnostics import Diagnostic
from .layered import Layered
from .model import Catalog, Producer, Schema
from .reach import closes_cycle
from .references import NAMED_AS as _NAMED_AS, Element, Name, Produced, move_references
from .schemas_of import BoxTyping, cycle_reason, input_schema, type_box
from .validate import (
    REFERENCE_CHECKS,
    check_topology,
    Checks,
    plugged_problems,
    producer_origin,
    array_stream_problems,
    declared_output_schema,
    output_schema_problems,
    partition_check,
    producer_problems,
    whole_checks,
)

#: A stream's state: its schema, or BROKEN (cannot be told); absent: nothing produces it.
BROKEN = None

#: Up to this many boxes typed anew, a change types them alone first, and goes downstream only where an out
#: stream's schema moved (catalog/reach.py); more (a deployment), or a whole check (no typing kept), and it
#: types all it reaches in one pass.
FEW_SEEDS = 16
#: A change writing more entries than this plus the square root of the references is a bulk one: the new
#: index's dicts are plain copies (Derivation._next), as a Layered version that large is folded next time.
BULK_WRITES = 64


def producers_of(catalog: Catalog, refs: dict[Name, frozenset[Element]], stream: str) -> list[Producer]:
    """What produces ``stream`` by ``refs`` (an ``<input>`` first, then boxes in the catalog's order)."""
    boxes = [key for kind, key in refs.get(("produces", stream), ()) if kind == "boxes"]
    if len(boxes) > 1:  # only an invalid catalog: order as the catalog does
        boxes = [name for name in catalog.boxes if name in set(boxes)]
    found = [Producer(stream)] if stream in catalog.inputs else []
    for name in boxes:
        box = catalog.boxes[name]
        found += [Producer(stream, name, port) for port, s in enumerate(box.outputs) if s == stream]
    return found


def _typed_as(box: Any) -> tuple:
    """What a box's typing depends on (not its node: a moved box keeps its typing)."""
    return box.type, box.inputs, box.outputs, box.params


@dataclass
class Derived:
    """What a derivation learned of the new catalog: the fields of its :class:`~.index.CatalogIndex`."""

    refs: dict[Name, frozenset[Element]]
    states: dict[str, Schema | None]
    typings: dict[str, BoxTyping]
    stream_schemas: dict[str, Schema]
    problems: list[Diagnostic]
    moved: set[str]  # streams whose schema changed (or that came or went)
    whole: bool  # everything counted as changed (or the whole check said)


class Base(Protocol):
    """The checked index a derivation starts from (a :class:`~.index.CatalogIndex`)."""

    catalog: Catalog
    registry: BoxTypeRegistry
    refs: dict[Name, frozenset[Element]]
    states: dict[str, Schema | None]
    typings: dict[str, BoxTyping]
    stream_schemas: dict[str, Schema]
    checks: Checks


class Derivation:
    """One :meth:`CatalogIndex.derive`: its working state, then what the new index holds."""

    def __init__(self, base: Base, after: Catalog, changed: dict[str, set[str]], whole: bool):
        self.base, self.after, self.changed, self.whole = base, after, changed, whole
        self.registry = base.registry
        # A bulk change (a deployment's part) writes more entries than a Layered version keeps before the
        # next one folds it whole: folded now, its dicts are plain ones, each look-up and write in C.
        self.bulk = whole or sum(map(len, changed.values())) > BULK_WRITES + math.isqrt(len(base.refs))
        self.refs = self._next(base.refs)  # (a small change shares the base's entries: catalog/layered.py)
        # Shared with the base index until the change types something (_own; a move does not: issue 37).
        self.states, self.schemas = base.states, base.stream_schemas
        self.typings: dict[str, BoxTyping] = {} if whole else base.typings
        self.owned = False
        self.problems: list[Diagnostic] = []
        self.produced = Produced(self.refs)
        self.counts: dict[str, int] = {}  # stream -> producers, once the references are moved (_count)

    def run(self) -> Derived:
        touched = self._update_refs()
        dirty = self._dirty(touched)
        for kind, check in REFERENCE_CHECKS:
            items = getattr(self.after, kind)
            for key in sorted(dirty.get(kind, ())):
                self.problems += check(self.after, items[key], self.produced)
        moved = self._infer(touched, dirty)
        self._outputs_and_arrays(moved, dirty)
        for name in sorted(dirty.get("partitions", ())):
            self.problems += partition_check(self.after, self.registry, name, self.after.partitions[name])
        checks = self.base.checks
        if any(self._count(s) > 1 for s in touched):
            # Two producers: which one's schema a reader sees depends on the order the whole check types
            # them in, so it alone says; the catalog is refused anyway (and an index of it is not derived
            # from: the next change is checked whole).
            report = check_topology(self.after, self.registry, checks)
            self.problems[:] = report.problems
            return Derived(self.refs, self.states, self.typings, report.stream_schemas, self.problems, moved, True)
        if checks.boxes or checks.streams:
            streams = {s for s in moved | touched | set(dirty.get("outputs", ())) if s in self.produced}
            boxes = {k for k in self.changed["boxes"] if k in self.after.boxes}
            boxes.update(k for s in streams for k, _ in self._readers(s))
            self.problems += plugged_problems(self.after, checks, self.schemas, sorted(boxes), sorted(streams),
                                              lambda s: producer_origin(self.after, self._producers(s)))
        for check in whole_checks(checks):
            if self._reaches(check):
                check(self.after, lambda origin, reason: self.problems.append(Diagnostic.at(origin, reason)))
        return Derived(self.refs, self.states, self.typings, self.schemas, self.problems, moved, self.whole)

    def _producers(self, stream: str) -> list[Producer]:
        return producers_of(self.after, self.refs, stream)

    def _reaches(self, check: Any) -> bool:
        """Whether a whole-catalog check (a walk over every box) may answer otherwise than for the base index,
        which had no problems: changelogs read box types, edges and schemas; the table check table boxes,
        tables and partitions; any other check runs every time."""
        if self.whole:
            return True
        before, after = self.base.catalog.boxes, self.after.boxes
        pairs = [(before.get(k), after.get(k)) for k in self.changed["boxes"]]
        if check is changelog.check:
            if not self.changed.get("schemas") and not any(self.refs.get(("changelog source", t))
                                                           for t in changelog.SOURCES):
                return False  # no box makes a changelog, so none is refused for reading one
            return bool(self.changed.get("schemas")) or any(
                old is None or new is None or _typed_as(old) != _typed_as(new) for old, new in pairs)
        if check is table_params.check:
            return bool(self.changed.get("tables") or self.changed.get("partitions")) or any(
                box is not None and box.type in table_params.ACCESSING and box.access for pair in pairs for box in pair)
        return True

    def _update_refs(self) -> set[str]:
        """Move the changed elements' references; the streams that gained or lost a producer."""
        return move_references(self.refs, self.base.catalog, self.after, self.changed)

    def _dirty(self, touched: set[str]) -> dict[str, set[str]]:
        """Elements to check again: the changed ones, and those that refer to a changed one or a touched stream."""
        names: set[Name] = {("reads", s) for s in touched}
        for kind, noun in _NAMED_AS.items():
            names.update((noun, key) for key in self.changed[kind])
        dirty: dict[str, set[str]] = {}
        for kind, keys in self.changed.items():
            present = getattr(self.after, kind)
            dirty.setdefault(kind, set()).update(k for k in keys if k in present)
        for name in names:
            for kind, key in self.refs.get(name, ()):
                dirty.setdefault(kind, set()).add(key)
        return dirty

    # -- inference -----------------------------------------------------------------------------------

    def _own(self) -> None:
        """Copy the states, typings and schemas shared with the base index, before the first change to them."""
        if not self.owned:
            self.states, self.typings, self.schemas = (self._next(self.states), self._next(self.typings),
                                                       self._next(self.schemas))
            self.owned = True

    def _next(self, mapping: Any) -> Any:
        """The next version of one of the base index's dicts, written without changing it: a
        :class:`Layered` version over it, or for a bulk change a plain dict of its entries (the fold a
        Layered version of that many writes costs at the next derive anyway, done first)."""
        if not self.bulk:
            return Layered.over(mapping)
        return mapping.flat() if isinstance(mapping, Layered) else dict(mapping)

    def _infer(self, touched: set[str], dirty: dict[str, set[str]]) -> set[str]:
        """Infer again what the change can reach; the streams whose state changed."""
        after = self.after
        # Streams whose producer is an input: told from its schema and its producer count.
        entries = touched | {after.inputs[k].stream for k in dirty.get("inputs", ())}
        before = self.base.catalog.boxes
        seeds = {k for k in self.changed["boxes"] if k in after.boxes and (
            k not in before or _typed_as(before[k]) != _typed_as(after.boxes[k]))}  # (a move types nothing anew)
        for stream in entries:
            seeds.update(k for k, _ in self._readers(stream))
        removed = {k for k in self.changed["boxes"] if k not in after.boxes}
        if not entries and not seeds and not removed:
            return set()  # (nothing to infer again: a move)
        self._own()
        if not self.whole and len(seeds) <= FEW_SEEDS and not closes_cycle(after, seeds, lambda s: [k for k, _ in self._readers(s)],
                                                         lambda s: [k for a, k in self.refs.get(("produces", s), ())
                                                                    if a == "boxes"]):
            start, mark = self.states, len(self.problems)
            self.states = Layered.over(start)
            old = self._retype(entries, removed, set(seeds))
            if not self._crosses(set(seeds), old):
                return self._moved(old)
            self.states, self.problems[mark:] = start, []  # (a schema moved past them: the whole region, below)
        return self._moved(self._retype(entries, removed, self._downstream(seeds)))

    def _retype(self, entries: set[str], removed: set[str], region: set[str]) -> dict[str, tuple]:
        """Tell the entries' states and type ``region`` (closed downstream, or, with no cycle, the changed
        boxes alone: then :meth:`_crosses` says whether that was enough); each stream told: (state, told)
        before."""
        after, states, told_before = self.after, self.states, self.base.stream_schemas
        boxes, inputs, refs = after.boxes, after.inputs, self.refs
        # Streams told inside the region: those all of whose producers are in it (an input stream, or one
        # another box also writes, is told already, as the whole check tells it before the region's boxes).
        internal = {s for name in region for s in boxes[name].outputs
                    if s not in inputs and all(k in region for _, k in refs[("produces", s)])}
        old: dict[str, tuple] = {}  # stream -> (state, told) before
        for stream in entries:
            old[stream] = (states.get(stream, "absent"), told_before.get(stream))
            states.pop(stream, None)
            if stream in internal:
                continue  # (told below: a deployment's every new stream)
            if stream in inputs:
                schema = input_schema(after, inputs[stream].schema)
                states[stream] = schema if self._count(stream) == 1 else BROKEN
            elif stream in self.produced:  # by a box: told again below if the box is reached
                states[stream] = self.base.states.get(stream, BROKEN) if self._count(stream) == 1 else BROKEN
        for name in region:
            for stream in boxes[name].outputs:
                if stream not in old:
                    old[stream] = (states.get(stream, "absent"), told_before.get(stream))
        for name in removed:
            self.typings.pop(name, None)
        for stream in internal:
            states.pop(stream, None)
        for stream in [s for s in old if s not in self.produced]:
            states.pop(stream, None)
        self._kahn(region, internal)
        return old

    def _crosses(self, region: set[str], old: dict[str, tuple]) -> bool:
        """Whether a stream told again changed and a box outside ``region`` reads it."""
        for stream, was in old.items():
            if (self.states.get(stream, "absent"), self._told(stream)) != was and any(
                    k not in region for k, _ in self._readers(stream)):
                return True
        return False

    def _moved(self, old: dict[str, tuple]) -> set[str]:
        """The streams whose state changed; their schemas told again."""
        states = self.states
        moved = set()
        for stream, was in old.items():
            told = self._told(stream)
            now = (states.get(stream, "absent"), told)
            if now[0] != was[0] or now[1] != was[1]:
                moved.add(stream)
                if told is None:
                    self.schemas.pop(stream, None)
                else:
                    self.schemas[stream] = told  # (an output's is renamed below)
        return moved

    def _told(self, stream: str) -> Schema | None:
        """The schema a stream is told to have (before outputs' renaming): an input's, even with another
        producer; else its one producer's."""
        inp = self.after.inputs.get(stream)
        if inp is not None:
            return input_schema(self.after, inp.schema)
        return self.states.get(stream)

    def _count(self, stream: str) -> int:
        """How many producers ``stream`` has (a box writing it on two ports counts twice, as in the full check)."""
        count = self.counts.get(stream)
        if count is None:  # (asked up to three times a stream; the references are final by then)
            count = 0
            for kind, key in self.refs.get(("produces", stream), ()):
                count += 1 if kind == "inputs" else self.after.boxes[key].outputs.count(stream)
            self.counts[stream] = count
        return count

    def _readers(self, stream: str) -> Iterable[tuple[str, str]]:
        return ((key, kind) for kind, key in self.refs.get(("reads", stream), ()) if kind == "boxes")

    def _downstream(self, seeds: set[str]) -> set[str]:
        """The seeds and every box that reads, directly or not, a stream one of them writes."""
        region, queue = set(seeds), deque(seeds)
        while queue:
            box = self.after.boxes[queue.popleft()]
            for stream in box.outputs:
                for name, _ in self._readers(stream):
                    if name not in region:
                        region.add(name)
                        queue.append(name)
        return region

    def _kahn(self, region: set[str], internal: set[str]) -> None:
        """Type the region's boxes in dataflow order from the states of the streams entering it."""
        after, states, typings, refs, problems, count = (self.after, self.states, self.typings, self.refs,
                                                         self.problems, self._count)
        boxes = after.boxes
        waiting = {name: {p.stream for p in boxes[name].inputs
                          if p.stream in internal or p.stream not in states} for name in region}
        ready = deque(sorted(name for name, waits in waiting.items() if not waits))
        done: set[str] = set()
        # (locals and no generators: a deployment's part types 10,000 new boxes through this loop)
        while ready:
            name = ready.popleft()
            done.add(name)
            box = boxes[name]
            inputs = tuple([states[p.stream] for p in box.inputs])
            typing = typings.get(name)
            if typing is None or typing.inputs != inputs or _typed_as(typing.box) != _typed_as(box):
                typing = type_box(after, self.registry, box, list(inputs))
                typings[name] = typing
            if typing.problems:
                problems += [Diagnostic.at(box.origin, reason) for reason in typing.problems]
            outs = typing.outs
            for port, stream in enumerate(box.outputs):
                states[stream] = outs[port] if outs is not None and count(stream) == 1 else BROKEN
                readers = [key for kind, key in refs.get(("reads", stream), ()) if kind == "boxes"]
                if len(readers) > 1:
                    readers.sort()
                for reader in readers:
                    waits = waiting.get(reader)
                    if waits is not None and stream in waits:
                        waits.discard(stream)
                        if not waits:
                            ready.append(reader)
        for name in sorted(region - done):
            self.typings.pop(name, None)
            box = after.boxes[name]
            if all(p.stream in self.produced for p in box.inputs):
                self.problems.append(Diagnostic.at(box.origin, cycle_reason(name)))

    # -- what depends on stream schemas -----------------------------------------------------------------

    def _outputs_and_arrays(self, moved: set[str], dirty: dict[str, set[str]]) -> None:
        outputs = set(dirty.get("outputs", ())) | {s for s in moved if s in self.after.outputs}
        if outputs:
            self._own()
        after, schemas = self.after, self.schemas
        for stream in outputs:
            schemas.pop(stream, None)
            told = self._told(stream)
            if told is not None:
                schemas[stream] = told
        for stream in sorted(outputs):
            renamed = declared_output_schema(after, after.outputs[stream], schemas)
            if renamed is not None:
                schemas[stream] = renamed
        for stream in sorted(outputs):
            self.problems += output_schema_problems(after, after.outputs[stream], schemas)
        for kind in ("publications", "subscriptions"):
            keys = set(dirty.get(kind, ()))
            for stream in moved:
                keys.update(k for a, k in self.refs.get(("reads", stream), ()) if a == kind)
            items = getattr(after, kind)
            for key in sorted(keys):
                if key in items:
                    self.problems += array_stream_problems(after, items[key], schemas)
