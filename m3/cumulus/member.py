"""One member of a partitioned box: where its events go, and a runtime that keeps only what it owns.

Stage 1 (docs/cumulus.md §3.3, §9) runs plans whose every statement is
LOCAL: a statement reads only entries in the same slot as the entry it
writes.  Then a box is correct when each event is applied, whole, by every
member that writes one of its statements' targets (:class:`Router`), and
each member keeps only the entries it owns (:class:`MemberRuntime`): a
member that runs an event for one statement also computes the other
statements of the trigger, whose writes land in slots it does not own;
those are dropped when the batch finishes.  They cannot have influenced an
owned entry meanwhile, because an owned statement's references are in its
own (owned) slot, and a loop over a local map starts from owned entries.

Most triggers need no dropping at all: when every statement of a trigger
writes at the same argument (a single-relation ``GROUP BY``: all on the
group key), an event goes to exactly the member that owns all its writes.
Only *mixed* triggers pay for the ownership check, per written key.

A *replicated* map (:data:`~.layout.EVERYWHERE`) is owned by every member:
its writes reach every member and none is dropped.  A trigger that writes
one beside other maps is mixed (its event reaches members that own only
some of its writes), and so is one whose loop runs over a replicated map
(every member would loop over all of it, not only its own keys).

>>> from boreas.m3.compiler.pipeline import compile_sql
>>> from .layout import even_layout
>>> from .plan import classify
>>> p = compile_sql("CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS total FROM R GROUP BY a")
>>> lay = even_layout("g", ["n1", "n2"], 4, maps=[("Q1_total", 0)])
>>> router = Router(classify(p, dict(lay.maps), "g"), lay)
>>> lay.owner_of_slot(slot(7)), lay.owner_of_slot(slot(1))
(1, 0)
>>> router.route("R", 1, [(7, 10), (1, 1), (7, 5)])
{1: [(7, 10), (7, 5)], 0: [(1, 1)]}
>>> rt = MemberRuntime(p, lay, lay.owner_of_slot(slot(7)))
>>> rt.apply_grouped([("R", 1, [(7, 10), (7, 5)])]) and rt.view("Q1")
{(7,): 15}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter

from ..ast import Program
from ..runtime.program import Runtime
from .hashing import home_slot, placed, slot, slot_counts
from .layout import EVERYWHERE, Layout
from .plan import LOOP, Plan, TriggerPlan, classify
from .stable import EpochDeltas, StableView

#: Members an event goes to: one member, or several.
Members = int | tuple[int, ...]
#: Relation column index -> how to read that column's value from a row (``operator.itemgetter`` for
#: relation-order rows; a converting getter for rows in another layout, e.g. a stream's).
Getter = Callable[[int], Callable[[tuple], object]]


def _arg_key(stmt) -> tuple:
    a = stmt.arg
    if stmt.kind == LOOP:
        return ("loop",)
    if a.kind == "event":
        return ("event", a.index)
    if a.kind == "const":
        return ("const", a.value)
    return (a.kind,)  # ("home",) or ("all",): a replicated map


def mixed(trigger: TriggerPlan) -> bool:
    """Whether an event of ``trigger`` may reach a member that owns only some of its writes."""
    return len({_arg_key(s) for s in trigger.statements}) > 1 or any(
        s.kind == LOOP and any(r.column == EVERYWHERE for r in s.refs) for s in trigger.statements)


class Router:
    """Stage 1's dispatch table: per trigger, the members each event goes to (its writers)."""

    def __init__(self, plan: Plan, layout: Layout):
        self.layout = layout
        self._writers = tuple(sorted({s.member for s in layout.segments}))
        self._all = tuple(range(len(layout.members)))
        self._args = {(t.relation, t.sign): list(dict.fromkeys(_arg_key(s) for s in t.statements))
                      for t in plan.triggers}

    def dispatcher(self, relation: str, sign: int, getter: Getter = itemgetter) -> Callable[[tuple], Members]:
        """``row -> members`` for events of ``relation`` with ``sign`` (rows read through ``getter``)."""
        args = self._args.get((relation, sign))
        lay = self.layout
        if args is None:  # no trigger: the runtime refuses the rows where they are applied
            return lambda row: lay.home
        if ("all",) in args:  # a replicated map's writers: every member
            members = self._all
            return lambda row: members
        if ("loop",) in args:
            everyone = self._writers
            return lambda row: everyone
        owners = lay.owners
        fixed = tuple(sorted({lay.home if a == ("home",) else owners[slot(a[1])] for a in args if a[0] != "event"}))
        reads = [getter(a[1]) for a in args if a[0] == "event"]
        if not reads:
            only: Members = fixed[0] if len(fixed) == 1 else fixed
            return lambda row: only
        if len(reads) == 1 and not fixed:
            read = reads[0]
            return lambda row: owners[slot(read(row))]
        return lambda row: tuple({*fixed, *(owners[slot(read(row))] for read in reads)})

    def route(self, relation: str, sign: int, rows: Sequence[tuple]) -> dict[int, list[tuple]]:
        """``{member: rows}``: the rows each member applies (in their order); a row may go to several."""
        return group(list(map(self.dispatcher(relation, sign), rows)), rows)


def group(members: Sequence[Members], rows: Sequence[tuple]) -> dict[int, list[tuple]]:
    """Rows by the member(s) each goes to (``members[i]`` for ``rows[i]``), keeping their order.

    >>> group([1, (0, 1), 1], ["a", "b", "c"])
    {1: ['a', 'b', 'c'], 0: ['b']}
    >>> group([2, 2], ["a", "b"])
    {2: ['a', 'b']}
    """
    if not rows:
        return {}
    first = members[0]
    if type(first) is int and members.count(first) == len(members):  # (input partitioned like the box)
        return {first: list(rows)}
    out: dict[int, list[tuple]] = {}
    for r, m in zip(rows, members):
        if type(m) is int:
            bucket = out.get(m)
            if bucket is None:
                out[m] = [r]
            else:
                bucket.append(r)
        else:
            for one in m:
                out.setdefault(one, []).append(r)
    return out


class MemberRuntime(Runtime):
    """A :class:`Runtime` holding only the entries member ``member`` owns under ``layout``.

    Batches of mixed triggers (:func:`mixed`) are followed by dropping the
    entries they wrote in slots the member does not own; the view changes
    of the batch then name owned keys only.
    """

    compacts_strings = False  # keeps intern ids across batches (a pre-copy's, a staging's): m3/runtime/native/compaction.py

    def __init__(self, program: Program | str, layout: Layout, member: int, plan: Plan | None = None, **kwargs):
        super().__init__(program, **kwargs)
        self.member = member
        self._guard = False
        self.epoch = 0  # the epoch of the versions being applied (set by the member before each)
        self.deltas = EpochDeltas()
        # told the keys of every map a batch wrote (``(map, {stored key: old value})``) while a segment is being
        # copied away (the copy's dirty keys, node/cumulus/precopy.py); None otherwise: no cost on the hot path
        self.on_write: Callable[[str, dict], None] | None = None
        self.set_layout(layout, plan)

    def set_layout(self, layout: Layout, plan: Plan | None = None) -> None:
        """Own what ``layout`` gives this member (entries it no longer owns are the caller's to move)."""
        self.layout = layout
        self.columns = dict(layout.maps)
        plan = plan or classify(self.program, self.columns, layout.box)
        self.foreign = frozenset((t.relation, t.sign) for t in plan.triggers if mixed(t))
        self._width = {m.name: len(m.keys) for m in self.program.maps}

    def apply_grouped(self, batches: Iterable[tuple[str, int, Sequence[Sequence]]]) -> int:
        batches = list(batches)
        self._guard = any((rel, sign) in self.foreign for rel, sign, _ in batches)
        return super().apply_grouped(batches)

    def apply_with(self, batches: Iterable[tuple[str, int, Sequence[Sequence]]],
                   pushed: dict[tuple[str, tuple], object]) -> int:
        """Apply ``batches`` with the entries other members pushed (``{(map, key tuple): value}``) in place.

        The pushed entries are what this member's statements read from
        other members at the version's start; they are installed, the
        unchanged triggers run, and then every entry this member does not
        own (the pushed ones, and what the triggers wrote for other members)
        is dropped again.  Atomic like :meth:`apply_grouped`.
        """
        if not pushed:
            return self.apply_grouped(batches)
        with self._lock:
            pack = self.store.pack
            installed = []
            for (name, key), value in pushed.items():
                stored = pack(name, key)
                if not self.owns(name, stored):  # never over an entry of our own
                    installed.append((name, stored))
                    self.store.set_stored(name, stored, value)
            self._guard = True
            try:
                return super().apply_grouped(batches)
            finally:
                for name, stored in installed:
                    self.store.set_stored(name, stored, 0)

    def _finish(self) -> None:
        if self._guard:
            self._drop_foreign()
        self._record_deltas()
        super()._finish()

    def _record_deltas(self) -> None:
        """What the batch changed, as deltas of the epoch it belongs to (for READ_STABLE).

        The hot path of every version a member applies: the first old value
        of each journaled key comes from one reversed ``dict`` (C speed), and
        the change is added to the epoch's entries in place.
        """
        store, maps = self.store, None
        for name, journal in self._journals.items():
            if not journal:
                continue
            if maps is None:
                maps = self.deltas.epoch_maps(self.epoch)
            first = dict(zip(journal[-2::-2], journal[-1::-2]))  # key -> its value before the batch
            if self.on_write is not None:
                self.on_write(name, first)
            get = store.getter(name)
            entries = maps.setdefault(name, {})
            for k, old in first.items():
                change = get(k, 0) - old
                if change:
                    total = entries.get(k, 0) + change
                    if total:
                        entries[k] = total
                    else:
                        del entries[k]

    def at_epoch(self, epoch: int) -> StableView:
        """The maps as they were when every version of epochs up to ``epoch`` was applied, and none after."""
        return StableView(self, self.deltas, epoch)

    def read(self, map_name: str, pattern: tuple) -> list[tuple[tuple, object]]:
        """The entries of ``map_name`` matching ``pattern`` (None: any value) that this member holds.

        A fully bound pattern (a POINT_PUSH: Q3's ``m2[customer]`` for every
        order) is one lookup here: the store's general match spent more
        working out which positions are bound than reading the entry.
        """
        store = self.store
        if len(pattern) == store.arity[map_name] and None not in pattern:
            key = tuple(pattern)
            value = store.get_stored(map_name, store.pack(map_name, key), None)
            return [] if value is None else [(key, value)]
        return store.match(map_name, pattern)

    def owns(self, map_name: str, stored_key) -> bool:
        """Whether this member owns the entry of ``map_name`` at ``stored_key`` (the store's key form)."""
        col = self.columns[map_name]
        if col is None:
            return self.layout.home == self.member
        if col == EVERYWHERE:
            return True
        value = stored_key if self._width[map_name] == 1 else stored_key[col]
        return self.layout.owners[slot(value)] == self.member

    def foreign_keys(self, map_name: str, stored_keys: list) -> set:
        """The keys of ``stored_keys`` (the store's key form) of entries this member does not own: :meth:`owns`
        for many keys at once."""
        col = self.columns[map_name]
        if col is None:
            return set() if self.layout.home == self.member else set(stored_keys)
        if col == EVERYWHERE:
            return set()
        values = stored_keys if self._width[map_name] == 1 else map(itemgetter(col), stored_keys)
        me = self.member
        return {k for k, owner in zip(stored_keys, placed(values, self.layout.owners)) if owner != me}

    def _drop_foreign(self) -> None:
        """Drop what the batch wrote outside this member's slots; its changes then name owned keys only."""
        for name, journal in self._journals.items():
            if journal:
                foreign = self.foreign_keys(name, journal[::2])
                if foreign:
                    for k in foreign:
                        self.store.set_stored(name, k, 0)
                    journal[:] = [x for k, old in zip(journal[::2], journal[1::2]) if k not in foreign for x in (k, old)]

    # -- moving segments (docs/cumulus.md §6.2) ---------------------------------------
    def flat(self, map_name: str) -> bool:
        """Whether ``map_name`` is one ``dict`` of its entries (no index): bulk moves are ``dict`` operations."""
        return self.store.primary[map_name] is None

    def take_out(self, map_name: str, keys: Iterable, epoch: int) -> int:
        """Remove the entries at ``keys`` (stored form; absent and repeated keys are fine), recorded as changes
        of ``epoch`` (the epoch a segment leaves with: stable reads of earlier epochs still see them here).

        A segment of a million entries leaves in one pass at C speed for a
        map without indexes (one ``dict.pop`` per key, no per-entry delta);
        indexed maps go entry by entry.  Returns how many entries went.
        """
        store = self.store
        with self._lock:
            if self.flat(map_name):
                pop = store.data[map_name].pop
                gone = {k: v for k in keys if (v := pop(k, None)) is not None}
            else:
                gone = {}
                for k in keys:
                    v = store.get_stored(map_name, k, 0)
                    if v:
                        gone[k] = v
                        store.set_stored(map_name, k, 0)
            self.deltas.bulk(epoch, map_name, gone, -1)
        return len(gone)

    def put_in(self, map_name: str, entries: dict, epoch: int) -> None:
        """Add ``entries`` (``{stored key: value}``, values non-zero) of a segment moving in, recorded as
        changes of ``epoch`` (the epoch it arrives with); ``entries`` is kept by the deltas, not copied.

        The member holds none of these keys (it did not own their slots:
        foreign writes are dropped after every batch), so for a map without
        indexes this is one ``dict.update``.
        """
        store = self.store
        with self._lock:
            if self.flat(map_name):
                store.data[map_name].update(entries)
            else:
                for k, v in entries.items():
                    store.set_stored(map_name, k, store.get_stored(map_name, k, 0) + v)
            self.deltas.bulk(epoch, map_name, entries, 1)

    def install(self, entries: Iterable[tuple[str, tuple, object]], epoch: int) -> int:
        """Add ``entries`` (``(map, key tuple, value)``) to this member's maps as changes of ``epoch``; returns how many.

        Entries this member does not own are skipped (and counted out).  A
        map at a time (a bulk load's part holds up to a few hundred thousand
        entries): ownership checked by :meth:`foreign_keys`, the entries added
        by :meth:`MapStore.add_many`, and the part's deltas kept as one
        ``dict`` (:meth:`EpochDeltas.bulk`).
        """
        pack, store = self.store.pack, self.store
        by_map: dict[str, list] = {}
        for name, key, value in entries:
            by_map.setdefault(name, []).append((pack(name, key), value))
        done = 0
        with self._lock:
            for name, items in by_map.items():
                foreign = self.foreign_keys(name, [k for k, _ in items])
                if foreign:
                    items = [(k, v) for k, v in items if k not in foreign]
                store.add_many(name, items)
                changes: dict = {}
                for k, v in items:
                    changes[k] = changes.get(k, 0) + v
                self.deltas.bulk(epoch, name, changes, 1)
                if self.on_write is not None:
                    self.on_write(name, dict.fromkeys(changes))
                done += len(items)
        return done

    def segment_entries(self) -> dict[int, dict[str, int]]:
        """Entries per segment and map, as this member holds them (``boreas segments``); a replicated map's under
        segment -1 (every member holds all of them)."""
        lay = self.layout
        seg_of = {}
        for s in lay.segments:
            seg_of.update(dict.fromkeys(range(s.lo, s.hi), s.id))
        home_segment = lay.segment_of_slot(home_slot(lay.box)).id
        out: dict[int, dict[str, int]] = {s.id: {} for s in lay.segments if s.member == self.member}
        with self._lock:
            for m in self.program.maps:
                col = self.columns[m.name]
                if col is None or col == EVERYWHERE:
                    n = self.store.size(m.name)
                    if n:
                        out.setdefault(home_segment if col is None else -1, {})[m.name] = n
                    continue
                counts: dict[int, int] = {}
                for s, n in slot_counts(self.store.column_counts(m.name, col)).items():
                    sid = seg_of[s]
                    counts[sid] = counts.get(sid, 0) + n
                for sid, n in counts.items():
                    out.setdefault(sid, {})[m.name] = n
        return out
