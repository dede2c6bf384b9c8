"""Moving a segment's entries ahead of its flip: the source's pre-copy and the target's staging (docs/cumulus.md §6.2).

A layout change that moves segments is announced first without its first
epoch ``E``.  Each *source* member then copies the entries of the slots
leaving it to their targets while the box goes on (:class:`SourceCopy`):

* it lists every map's keys once (``list(dict)``, C speed) and from then on
  notes the *dirty* keys: keys of leaving slots that a batch wrote (the
  runtime's journals name every written key; the runtime calls
  :meth:`SourceCopy.note` only while a copy is open);
* each :meth:`~SourceCopy.step` examines the next :data:`COPY_STEP` listed
  keys (the slot test happens here, lazily) and returns their current values
  per target, to go out as ``Chunk`` messages; a key sent is no longer dirty,
  since the target now has its current value;
* at the flip (the start of ``E``) :meth:`~SourceCopy.final` gives the current
  value of every dirty key (0: gone) per target, and
  :meth:`~SourceCopy.take_out` removes every leaving entry from the source's
  store in one bulk pass, recorded as deltas of ``E``.

The *target* keeps what arrives in a :class:`~.staging.Staging`, apart from its store,
so nothing reads or drops it before ``E`` (the runtime zeroes foreign
entries after every batch); a final chunk's values overwrite staged ones
(0 deletes).  Once every source's final chunk is in and the target is at
``E``, :meth:`~.staging.Staging.merge` puts the staged entries into the store with one
``dict.update`` per map, recorded as deltas of ``E``.

Why this is exact: a key of a leaving slot that no batch wrote since the
listing still has the value it had when listed, which is the value the step
that examined it sent; any other key is dirty or was sent after its last
write.  So after the final chunk the target holds exactly the source's
entries of those slots at the end of ``E - 1`` (staging overwrites: chunks
are idempotent), and the source holds none of them from ``E`` on.  Chunks
travel on the ordered source → target link, so a final chunk follows all
its copy's chunks.

A member joining a box with replicated maps (docs/cumulus.md §3.11) is sent
them whole by member 0 the same way (a move of segment ``REPLICAS``): every
key is listed, every written key is dirty, and nothing is taken out (member
0 keeps its copy).

Everything here is plain data for snapshots (:meth:`SourceCopy.state`,
:meth:`~.staging.Staging.state`): a member restored in the middle of a copy continues
from the same listed keys, dirty set and sent keys, so replay re-sends
identical chunks.

>>> from boreas.m3 import compile_sql
>>> from boreas.m3.cumulus import even_layout, relayout
>>> from boreas.m3.cumulus.member import MemberRuntime
>>> from boreas.node.cumulus.staging import Staging
>>> p = compile_sql("CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS s FROM R GROUP BY a")
>>> lay = even_layout("g", ["n0", "n1"], 2, maps=[("Q1_s", 0)])
>>> src, dst = MemberRuntime(p, lay, 1), MemberRuntime(p, lay, 0)
>>> keys = [a for a in range(20) if lay.owner("Q1_s", (a,)) == 1]
>>> _ = src.apply_grouped([("R", 1, [(a, 1) for a in keys])])
>>> new = relayout.move(lay, 1, 0)                               # segment 1 goes to member 0
>>> copy, staging = SourceCopy(src, new, relayout.moves(lay, new), 1), Staging()
>>> def send(payload):  # a Chunk's Arrow columns, decoded by the target
...     staging.add_chunk(chunk_entries(payload, src))
>>> copy.start(src)
>>> send(copy.step(src, 4).get(0, []))                           # 4 listed keys examined
>>> _ = src.apply_grouped([("R", 1, [(keys[-1], 5)])])           # written after the listing: dirty
>>> while not copy.done:
...     send(copy.step(src, 4).get(0, []))
>>> send(copy.final(src)[0])                                     # at the flip (epoch 3): dirty keys' values
>>> copy.take_out(src, 3); staging.merge(dst, 3)
>>> dict(dst.read_slice("Q1_s")) == {(a,): 6 if a == keys[-1] else 1 for a in keys}, src.read_slice("Q1_s")
(True, [])
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable

from boreas.m3.cumulus import EVERYWHERE, SLOTS, Layout, home_slot, slot
from boreas.m3.cumulus.relayout import REPLICAS
from boreas.m3.cumulus.member import MemberRuntime
from boreas.m3.runtime.maps import MapStore

from . import entry_columns

#: Listed keys (or entries of an indexed map) a source examines per step: a step takes about 5 ms, so the
#: box goes on between steps; a step's chunk per target holds at most this many entries.
#: ``$BOREAS_CUMULUS_COPY_STEP`` sets it in a node process (tests make copies of many steps with it).
COPY_STEP = int(os.environ.get("BOREAS_CUMULUS_COPY_STEP") or 20_000)

_EPOCH = dt.date(1970, 1, 1).toordinal()


class KeyCodec:
    """Lists of keys in the store's form (one value, or a tuple) to and from msgpack-able lists (what a copy's
    and a staging's *state* holds; Chunk messages carry Arrow columns: :func:`chunk_entries`).

    Keys of one column that is not a DATE are their own encoding (no copy
    per key: the common case, a million ints, travels as is); tuples become
    lists on the wire and tuples again here; DATEs travel as day numbers.
    """

    def __init__(self, types: tuple[str, ...]):
        self.single = len(types) == 1
        self.dates = tuple(i for i, t in enumerate(types) if t == "DATE")

    def encode(self, keys: list) -> list:
        if not self.dates:
            return keys
        if self.single:
            return [k.toordinal() - _EPOCH for k in keys]
        at = self.dates
        return [[v.toordinal() - _EPOCH if i in at else v for i, v in enumerate(k)] for k in keys]

    def decode(self, items: list) -> list:
        if self.single:
            return [dt.date.fromordinal(v + _EPOCH) for v in items] if self.dates else items
        if not self.dates:
            return list(map(tuple, items))
        at = self.dates
        return [tuple(dt.date.fromordinal(v + _EPOCH) if i in at else v for i, v in enumerate(k)) for k in items]


class Codecs:
    """Per map: the codec of its stored keys, and of its *outer* keys (what a copy lists: the stored keys of a
    map without indexes, the bound parts of an indexed map's primary index)."""

    def __init__(self, store: MapStore):
        self.keys = {name: KeyCodec(types) for name, types in store.key_types.items()}
        self.outer = {name: self.keys[name] if pos is None else KeyCodec(tuple(store.key_types[name][i] for i in pos))
                      for name, pos in store.primary.items()}


class SourceCopy:
    """The entries of the slots leaving member ``me`` under ``new``: listed, sent in steps, dirty keys, removal."""

    def __init__(self, runtime: MemberRuntime, new: Layout, moves: list, me: int):
        leaving = [-1] * SLOTS  # slot -> the member it goes to (-1: stays)
        self.replicas = sorted({t for seg_id, s, t in moves if s == me and seg_id == REPLICAS})  # members joining
        for seg_id, source, target in moves:
            if source == me and seg_id != REPLICAS:
                seg = next(s for s in new.segments if s.id == seg_id)
                leaving[seg.lo:seg.hi] = [target] * (seg.hi - seg.lo)
        self.targets = sorted({t for t in leaving if t >= 0} | set(self.replicas))
        home = leaving[home_slot(new.box)]
        arity = {m.name: len(m.keys) for m in runtime.program.maps}  # (not the store: a native member's mirror
        # would be brought up to date for it)
        self._target_of: dict[str, Callable | None | str] = {}  # per map copied: stored key -> target (None: all to
        # home; EVERYWHERE: a replicated map, all to every member joining)
        self._home = home
        for name, col in runtime.columns.items():
            if col == EVERYWHERE:  # replicated: every member holds all of it; a joining one gets a copy
                if self.replicas:
                    self._target_of[name] = EVERYWHERE
                continue
            if col is None:
                if home >= 0:
                    self._target_of[name] = None
            elif any(t >= 0 for t in leaving):  # (a change copying only replicated maps lists no other map)
                self._target_of[name] = (lambda k, t=leaving: t[slot(k)]) if arity[name] == 1 else (
                    lambda k, t=leaving, c=col: t[slot(k[c])])
        self._leaving = leaving
        self.todo: dict[str, list] = {}  # map -> outer keys listed and not examined yet (in listing order)
        self.sent: dict[str, list] = {name: [] for name in self._target_of}  # stored keys sent (they leave at E)
        self.dirty: dict[str, set] = {name: set() for name in self._target_of}  # written since sent or listed
        self.started = False

    @property
    def done(self) -> bool:
        """Every listed key was examined (the rest travels in the final chunk)."""
        return self.started and not any(self.todo.values())

    def start(self, runtime: MemberRuntime) -> None:
        """List the keys to examine and start noting dirty keys (one ``list(dict)`` per map)."""
        self.todo = {name: list(runtime.store.data[name]) for name in self._target_of}
        self.started = True
        runtime.on_write = self.note

    def note(self, name: str, keys) -> None:
        """A batch wrote ``keys`` (stored form) of map ``name``: those in leaving slots are dirty."""
        dirty = self.dirty.get(name)
        if dirty is None:
            return
        target_of = self._target_of[name]
        if target_of is None or target_of == EVERYWHERE:
            dirty.update(keys)
        else:
            dirty.update(k for k in keys if target_of(k) >= 0)

    def step(self, runtime: MemberRuntime, budget: int) -> dict[int, list]:
        """Examine up to ``budget`` listed keys: ``{target: [[map, keys, values], ...]}`` of those leaving (keys in
        the store's form; :func:`chunk_entries` makes a Chunk's Arrow columns of them).

        The hot loop of a copy (a million keys per segment): one comprehension
        per map and step, with the slot test inline, values by ``map``.
        """
        out: dict[int, list] = {}
        store = runtime.store
        for name, todo in self.todo.items():
            if budget <= 0:
                break
            if not todo:
                continue
            data, pos = store.data[name], store.primary[name]
            if pos is None:
                batch = todo[-budget:]  # from the end: the rest stays one list, no copy
                del todo[-budget:]
                budget -= len(batch)
                groups = self._flat_groups(name, batch, data, runtime.columns[name], store.arity[name])
                picked = {t: (keys, list(map(data.__getitem__, keys))) for t, keys in groups.items() if keys}
            else:
                picked, budget = self._indexed_groups(name, todo, budget, store, runtime.columns[name])
            for t, (keys, values) in picked.items():
                self.dirty[name].difference_update(keys)
                if self._target_of[name] != EVERYWHERE:  # (a replicated map's copy takes nothing out)
                    self.sent[name].extend(keys)
                out.setdefault(t, []).append([name, keys, values])
        return out

    def _flat_groups(self, name: str, batch: list, data: dict, col: int | str | None, arity: int) -> dict[int, list]:
        """The keys of ``batch`` still in ``data`` whose slots leave, by target."""
        leaving = self._leaving
        if col == EVERYWHERE:
            keys = [k for k in batch if k in data]
            return dict.fromkeys(self.replicas, keys)
        if col is None:
            return {self._home: [k for k in batch if k in data]}
        if len(self.targets) == 1:
            if arity == 1:
                keys = [k for k in batch if k in data and leaving[slot(k)] >= 0]
            else:
                keys = [k for k in batch if k in data and leaving[slot(k[col])] >= 0]
            return {self.targets[0]: keys}
        groups: dict[int, list] = {}
        target_of = self._target_of[name]
        for k in batch:
            if k in data and (t := target_of(k)) >= 0:
                groups.setdefault(t, []).append(k)
        return groups

    def _indexed_groups(self, name: str, todo: list, budget: int, store: MapStore,
                        col: int | None) -> tuple[dict[int, tuple[list, list]], int]:
        """Entries of the next index buckets listed (about ``budget``) whose slots leave, by target."""
        data, pos, join = store.data[name], store.primary[name], store.join
        picked: dict[int, tuple[list, list]] = {}
        while todo and budget > 0:
            bound = todo.pop()
            sub = data.get(bound)
            if not sub:
                continue
            budget -= len(sub)
            for rest, v in sub.items():
                key = join(name, pos, bound, rest)
                if col == EVERYWHERE:
                    for t in self.replicas:
                        keys, values = picked.setdefault(t, ([], []))
                        keys.append(key)
                        values.append(v)
                    continue
                t = self._home if col is None else self._leaving[slot(key[col])]
                if t >= 0:
                    keys, values = picked.setdefault(t, ([], []))
                    keys.append(key)
                    values.append(v)
        return picked, budget

    def final(self, runtime: MemberRuntime) -> dict[int, list]:
        """``{target: [[map, keys, values]]}``: the current value (0: none) of every dirty key, for every target
        (keys in the store's form; :func:`pieces` cuts it into chunks)."""
        out: dict[int, list] = {t: [] for t in self.targets}
        for name, dirty in self.dirty.items():
            if not dirty:
                continue
            get, target_of = runtime.store.getter(name), self._target_of[name]
            per: dict[int, tuple[list, list]] = {}
            if target_of == EVERYWHERE:
                keys = list(dirty)
                values = [get(k, 0) for k in keys]
                per = dict.fromkeys(self.replicas, (keys, values))
            for k in dirty if target_of != EVERYWHERE else ():
                keys, values = per.setdefault(self._home if target_of is None else target_of(k), ([], []))
                keys.append(k)
                values.append(get(k, 0))
            for t, (keys, values) in per.items():
                out[t].append([name, keys, values])
        return out

    def counts(self) -> tuple[int, int]:
        """Keys sent so far and keys dirty now (for the log)."""
        return sum(map(len, self.sent.values())), sum(map(len, self.dirty.values()))

    def take_out(self, runtime: MemberRuntime, epoch: int) -> None:
        """Remove every leaving entry from the store (as changes of ``epoch``) and stop noting writes."""
        runtime.on_write = None
        for name, sent in self.sent.items():
            if self._target_of[name] == EVERYWHERE:  # a copy: member 0 keeps its replicated maps
                continue
            dirty = self.dirty[name]
            if dirty:
                sent.extend(dirty)
            runtime.take_out(name, sent, epoch)
        self.sent = {name: [] for name in self.sent}
        self.dirty = {name: set() for name in self.dirty}

    # -- plain data ------------------------------------------------------------------
    def state(self, codecs: Codecs) -> dict:
        return {"started": self.started,
                "todo": {name: codecs.outer[name].encode(list(todo)) for name, todo in self.todo.items()},
                "sent": {name: codecs.keys[name].encode(list(sent)) for name, sent in self.sent.items()},
                "dirty": {name: codecs.keys[name].encode(list(d)) for name, d in self.dirty.items()}}

    def restore(self, state: dict, runtime: MemberRuntime, codecs: Codecs) -> None:
        self.started = bool(state["started"])
        self.todo = {name: codecs.outer[name].decode(todo) for name, todo in state["todo"].items()}
        self.sent = {name: codecs.keys[name].decode(sent) for name, sent in state["sent"].items()}
        self.dirty = {name: set(codecs.keys[name].decode(d)) for name, d in state["dirty"].items()}
        if self.started:
            runtime.on_write = self.note


def pieces(payload: list, limit: int) -> list[list]:
    """``payload`` (``[[map, keys, values], ...]``) cut into payloads of at most ``limit`` entries; at least one.

    >>> pieces([["a", [1, 2, 3], [4, 5, 6]], ["b", [7], [8]]], 2)
    [[['a', [1, 2], [4, 5]]], [['a', [3], [6]], ['b', [7], [8]]]]
    """
    out: list[list] = [[]]
    room = limit
    for item in payload:
        n = len(item[1]) if isinstance(item, list) else len(item)  # (or a native copy's column buffers)
        at = 0
        while at < n:
            if room == 0:
                out.append([])
                room = limit
            take = min(room, n - at)
            out[-1].append([item[0], item[1][at:at + take], item[2][at:at + take]] if isinstance(item, list)
                           else item.cut(at, at + take))
            at += take
            room -= take
    return out


def chunk_entries(payload: list, runtime: MemberRuntime) -> list:
    """A Chunk's entries: ``payload`` (``[[map, keys, values]]``, keys in the store's form) as Arrow columns per
    map (:mod:`~boreas.node.cumulus.entry_columns`), typed as the values are."""
    arity = {m.name: len(m.keys) for m in runtime.program.maps}  # (not the store: a native member's mirror would be
    # brought up to date for it)
    return [entry_columns.encode_stored(item[0], item[1], item[2], arity[item[0]]) if isinstance(item, list)
            else entry_columns.encode_exported(item)  # a native copy's column buffers (native_copy.py)
            for item in payload if len(item[1] if isinstance(item, list) else item)]
