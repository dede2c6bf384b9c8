"""A memo of the TOTALs correlated by equalities: each correlation key's part of the sum, kept across batches.

Why: a view of a nested subquery (TPC-H Q17) reads ``TOTAL(Q, K : m[Q, K]
WHERE cond)``, whose cost evaluated whole is every ``(K, Q)`` of the row —
twice per batch for ``changes()`` (before and after).  When the condition
reads its maps only at correlation keys ``K`` (:mod:`..correlated`), the
sum is the sum of each key's part, and a batch changes only the parts of
the keys it wrote: an entry of ``m`` at ``K``, or of a condition's map at
``K``.  This memo keeps, per TOTAL and per value of the row's variables it
reads (*outer*), every key's part and their sum; after a batch,
:meth:`TotalMemo.advance` recomputes the parts of the keys the batch's
journals name (one index slice of ``m`` each) and adjusts the sum.  Its
value before the batch is kept beside, so ``changes()`` reads both without
evaluating the domain.

It is derived data, owned here and exact at one runtime ``version``:

* the runtime calls :meth:`~TotalMemo.advance` with each batch's journals
  (both backends: the Python journals, or the C side's read back);
* a batch whose journals it did not see (a native batch whose ``changes()``
  nobody asked for), ``restore()`` and ``load()`` leave it behind: it is
  cleared and rebuilt lazily, key by key, as rows are read; a rolled-back
  batch changes no map and does not touch it;
* a value it does not have (an outer value not read yet, a TOTAL that does
  not split) is ``None``: the reader evaluates the TOTAL whole, as without
  the memo.

>>> from ..syntax import parse_program
>>> from .maps import MapStore
>>> from .evaluate import Reader
>>> p = parse_program('''CREATE STREAM R(K INT, Q INT);
... DECLARE MAP m[Q: INT, K: INT] : INT; DECLARE MAP c[K: INT] : INT;
... DECLARE VIEW v[](x := TOTAL(Q, K : m[Q, K] WHERE Q < c[K]));''')
>>> store = MapStore(p, index_specs(p))
>>> for key, n in {(1, 7): 2, (5, 7): 1, (1, 8): 4}.items(): store.set("m", key, n)
>>> for key, n in {(7,): 3, (8,): 1}.items(): store.set("c", key, n)
>>> memo, total = TotalMemo(p), p.views[0].columns[0].expr
>>> now = Reader(store.get, store.match, memo.at(0))
>>> memo.current(total, {}, now)     # key 7: Q = 1 < 3 (2 entries); key 8: 1 < 1 fails
2
>>> store.set("c", (8,), 2)           # a batch raises c[8]: only key 8 is recomputed
>>> memo.advance({"m": [], "c": [8, 1]}, store, 1)
>>> memo.current(total, {}, now), memo.previous(total, {}, now)
(6, 2)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..ast import Const, MapRef, Program, Var
from ..correlated import Correlation, correlations
from ..viewnodes import Total
from .evaluate import Reader, holds, items
from .maps import MapStore

Hook = Callable[[Total, dict, Reader], object]


@dataclass
class _Entry:
    """One TOTAL at one outer value: each correlation key's part (every key at which the summed map has an
    entry, even a part of 0) and their sum, exact at the memo's version; the sum before the last batch."""

    total: object
    parts: dict
    born: int | None  # the version it was built at (from that state: it has no value before it)
    before: object = None
    changed: int | None = None  # the version whose batch changed it (``before`` is its value then)


class TotalMemo:
    """Per TOTAL that splits by correlation keys, per outer value: the parts and their sum (module docstring)."""

    def __init__(self, program: Program):
        self.plans: dict[int, Correlation] = {id(c.total): c for v in program.views if v.general
                                              for c in correlations(v)}
        # map name -> the plans that read it: (plan, None) for the summed map, (plan, ref) for a condition's map
        self._readers: dict[str, list[tuple[Correlation, MapRef | None]]] = {}
        for plan in self.plans.values():
            self._readers.setdefault(plan.total.ref.name, []).append((plan, None))
            for ref in plan.reads:
                self._readers.setdefault(ref.name, []).append((plan, ref))
        self.version: int | None = 0  # a new runtime's maps are empty, and so is the memo
        self._entries: dict[int, dict[tuple, _Entry]] = {pid: {} for pid in self.plans}
        self._by_key: dict[tuple[int, tuple], set[tuple]] = {}  # (plan, key) -> the outer values whose parts hold it

    def clear(self, version: int | None = None) -> None:
        """Forget every value (the maps changed in a way the memo did not see); exact again at ``version``."""
        self._entries = {pid: {} for pid in self.plans}
        self._by_key = {}
        self.version = version

    def at(self, version: int) -> Hook | None:
        """The hook for a reader of the maps at ``version`` (None when no TOTAL splits): the memo is cleared
        first when it is not exact there."""
        if not self.plans:
            return None
        if self.version != version:
            self.clear(version)
        return self.current

    # -- reading ---------------------------------------------------------------
    def current(self, e: Total, env: dict, reader: Reader):
        """The TOTAL's value now (``reader``: the maps now), built at its outer value when first read."""
        plan = self.plans.get(id(e))
        if plan is None:
            return None
        outer = tuple(env[x] for x in plan.outer)
        entry = self._entries[id(e)].get(outer)
        if entry is None:
            parts = _build(plan, dict(zip(plan.outer, outer)), reader)
            entry = self._entries[id(e)][outer] = _Entry(sum(parts.values()), parts, self.version)
            for key in parts:
                self._by_key.setdefault((id(e), key), set()).add(outer)
        return entry.total

    def previous(self, e: Total, env: dict, reader: Reader):
        """The TOTAL's value before the last batch; None when the memo does not have it."""
        plan = self.plans.get(id(e))
        entry = None if plan is None else self._entries[id(e)].get(tuple(env[x] for x in plan.outer))
        if entry is None or entry.born == self.version:
            return None
        return entry.before if entry.changed == self.version else entry.total

    # -- a batch -----------------------------------------------------------------
    def advance(self, journals: dict[str, list], store: MapStore, version: int) -> None:
        """After the batch that made ``version``: recompute the parts of the keys its journals name."""
        if not self.plans or self.version == version:  # built at this version already: nothing to add
            return
        if self.version != version - 1:  # a batch went by unseen
            self.clear(version)
            return
        self.version = None  # not exact until done (an exception leaves it cleared at the next read)
        dirty: dict[tuple[int, tuple], set | None] = {}
        for name, users in self._readers.items():
            j = journals.get(name)
            if not j:
                continue
            keys = [store.unpack(name, k) for k in dict.fromkeys(j[::2])]
            for plan, ref in users:
                for key in keys:
                    self._mark(plan, ref, key, dirty)
        reader = Reader(store.get, store.match)
        for (pid, outer), keys in dirty.items():
            plan, entries = self.plans[pid], self._entries[pid]
            entry = entries.get(outer)
            if entry is None:
                continue
            env = dict(zip(plan.outer, outer))
            entry.before, entry.changed = entry.total, version
            if keys is None:  # an entry that binds only some correlation keys changed: every part again
                self._replace(pid, outer, entry, _build(plan, env, reader))
            for key in keys or ():
                part, present = _part(plan, env, key, reader)
                entry.total += part - entry.parts.get(key, 0)
                if present:
                    if key not in entry.parts:
                        self._by_key.setdefault((pid, key), set()).add(outer)
                    entry.parts[key] = part
                elif key in entry.parts:
                    del entry.parts[key]
                    self._drop(pid, key, outer)
            if not entry.parts:
                entry.total = 0  # no residue of float sums where nothing is left
        self.version = version

    def _replace(self, pid: int, outer: tuple, entry: _Entry, parts: dict) -> None:
        for key in entry.parts.keys() - parts.keys():
            self._drop(pid, key, outer)
        for key in parts.keys() - entry.parts.keys():
            self._by_key.setdefault((pid, key), set()).add(outer)
        entry.parts, entry.total = parts, sum(parts.values())

    def _drop(self, pid: int, key: tuple, outer: tuple) -> None:
        holders = self._by_key[(pid, key)]
        holders.discard(outer)
        if not holders:
            del self._by_key[(pid, key)]

    def _mark(self, plan: Correlation, ref: MapRef | None, key: tuple, dirty: dict) -> None:
        """Note the correlation key (or, when the entry binds only some of them, every key) of each outer value
        whose TOTAL a changed entry ``key`` of a map it reads may move."""
        args = plan.total.ref.args if ref is None else ref.args
        bound: dict[str, object] = {}
        for a, x in zip(args, key):
            if isinstance(a, Const):
                if a.value != x:
                    return
            elif bound.setdefault(a.name, x) != x:
                return
        want = [(i, bound[x]) for i, x in enumerate(plan.outer) if x in bound]
        whole = not all(k in bound for k in plan.keys)
        corr = None if whole else tuple(bound[k] for k in plan.keys)
        pid = id(plan.total)
        if ref is None or whole:  # the summed map: its entry is the key's; a partial key: every key
            entries = self._entries[pid]
            if len(want) == len(plan.outer):
                outers = [o for o in (tuple(x for _, x in want),) if o in entries]
            else:
                outers = [o for o in entries if all(o[i] == x for i, x in want)]
        else:  # a condition's map at one key: the outer values whose parts hold it
            outers = [o for o in self._by_key.get((pid, corr), ()) if all(o[i] == x for i, x in want)]
        for o in outers:
            if whole:
                dirty[(pid, o)] = None
            else:
                found = dirty.setdefault((pid, o), set())
                if found is not None:
                    found.add(corr)


def _pattern(plan: Correlation, env: dict, key: tuple | None) -> tuple:
    """The summed map's key pattern at an outer value (and a correlation key; None: every key)."""
    own = set(plan.total.vars)
    out = []
    for a in plan.total.ref.args:
        if isinstance(a, Const):
            out.append(a.value)
        elif a.name in plan.keys and key is not None:
            out.append(key[plan.keys.index(a.name)])
        else:
            out.append(None if a.name in own else env[a.name])
    return tuple(out)


def _holding(plan: Correlation, env: dict, key: tuple | None, reader: Reader):
    """``(correlation key, entry value, whether the condition holds)`` for each non-zero entry of the summed map
    at an outer value (and a key)."""
    t = plan.total
    slots = [(i, a.name) for i, a in enumerate(t.ref.args) if isinstance(a, Var) and a.name in t.vars]
    for k, n in items(reader.entries(t.ref.name, _pattern(plan, env, key))):
        if n:
            inner = dict(env)
            inner.update((name, k[i]) for i, name in slots)
            yield tuple(k[i] for i in plan.key_slots), n, holds(t.cond, inner, reader)


def _build(plan: Correlation, env: dict, reader: Reader) -> dict:
    """Every correlation key's part at an outer value (one pass over the summed map's entries there)."""
    parts: dict = {}
    for key, n, ok in _holding(plan, env, None, reader):
        parts[key] = parts.get(key, 0) + (n if ok else 0)
    return parts


def _part(plan: Correlation, env: dict, key: tuple, reader: Reader) -> tuple[object, bool]:
    """One correlation key's part at an outer value, and whether the summed map has an entry there."""
    part, present = 0, False
    for _, n, ok in _holding(plan, env, key, reader):
        present = True
        if ok:
            part += n
    return part, present


def index_specs(program: Program) -> dict[str, list[tuple[int, ...]]]:
    """For each summed map of a TOTAL that splits, the key positions one correlation key's part reads (the outer
    variables, constants and the correlation keys): the runtime keeps an index on them, so a part is one slice."""
    out: dict[str, list[tuple[int, ...]]] = {}
    for v in program.views:
        if not v.general:
            continue
        for plan in correlations(v):
            args = plan.total.ref.args
            bound = tuple(i for i, a in enumerate(args) if not (isinstance(a, Var) and a.name in plan.total.vars
                                                                 and a.name not in plan.keys))
            if len(bound) < len(args) and bound not in out.setdefault(plan.total.ref.name, []):
                out[plan.total.ref.name].append(bound)
    return {k: v for k, v in out.items() if v}
