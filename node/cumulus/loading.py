"""Bulk loads into a member of a partitioned box: initial map values (a Spark job, docs/cumulus.md §7).

:class:`BulkLoads` owns which ``(job, part)`` loads a member applied (its
part of the member's ``state()``).  A load goes into an empty box, before
its input streams, one job per box; its parts come in any order, each at
most once (a retried Spark task adds nothing).

A part is an Arrow IPC stream of one map's columns ``k0, ..., value``
(:data:`ARROW`, what ``boreas.spark.load_view`` sends; :func:`arrow_part`
reads and checks it, and the ``Load`` message carries the IPC bytes as they
came, so the log holds the part once, as columns), or msgpack ``[[map, key,
value], ...]``.

>>> loads = BulkLoads("v", 1)
>>> loads.loadable("j", took_input=False, holds_entries=False), loads.taken("j", 0)
(None, False)
>>> loads.loaded.add(("j", 0)); loads.loadable("j", False, True) is None, loads.loadable("k", False, False)
(True, "m3 box 'v' member 1 was loaded by job 'j'; one bulk load per box")
>>> loads.loadable("j", True, True)  # doctest: +ELLIPSIS
"m3 box 'v' member 1 already holds data; ..."
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable

import datetime as dt

import numpy as np
import pyarrow as pa
from boreas.m3.cumulus.layout import EVERYWHERE
from boreas.m3.cumulus.member import MemberRuntime
from boreas.m3.cumulus.slot_arrays import int_slots

from .slot_columns import column_slots

log = logging.getLogger(__name__)

#: the content type of an Arrow part
ARROW = "application/vnd.apache.arrow.stream"
_TYPES = {"INT": pa.int64(), "FLOAT": pa.float64(), "STRING": pa.string(), "DATE": pa.date32()}
_EPOCH = dt.date(1970, 1, 1).toordinal()


def arrow_part(body: bytes, box: str, kinds: dict[str, tuple[str, ...]]) -> tuple[str, pa.Table]:
    """``(map, columns)`` of an Arrow part, checked: raises ValueError saying why the part cannot be one of box
    ``box``'s maps (``kinds``: each map's key types).

    >>> batch = pa.record_batch({"k0": pa.array([9204], pa.date32()), "value": [2.5]})
    >>> sink = pa.BufferOutputStream()
    >>> with pa.ipc.new_stream(sink, batch.schema.with_metadata({"map": "m"})) as w:
    ...     w.write_batch(batch)
    >>> name, table = arrow_part(sink.getvalue().to_pybytes(), "v", {"m": ("DATE",)})
    >>> name, part_entries(table)
    ('m', ([(datetime.date(1995, 3, 15),)], [2.5]))
    >>> arrow_part(sink.getvalue().to_pybytes(), "v", {"m": ("INT",)})
    Traceback (most recent call last):
    ValueError: map 'm' key column 0 is INT (int64); the part's k0 is date32[day]
    """
    try:
        table = pa.ipc.open_stream(body).read_all()
    except (pa.ArrowInvalid, OSError) as exc:
        raise ValueError(f"the body is not an Arrow IPC stream: {exc}") from None
    name = (table.schema.metadata or {}).get(b"map", b"").decode()
    if name not in kinds:
        raise ValueError(f"box {box!r} has no map {name!r} (maps: {', '.join(kinds)})" if name else
                         "an Arrow part names its map in its schema metadata ('map')")
    want = kinds[name]
    if table.num_columns != len(want) + 1:
        raise ValueError(f"map {name!r} has {len(want)} key columns; the part has {table.num_columns - 1}")
    for i, (kind, column) in enumerate(zip(want, table.columns)):
        if column.type != _TYPES[kind]:
            raise ValueError(f"map {name!r} key column {i} is {kind} ({_TYPES[kind]}); the part's "
                             f"{table.column_names[i]} is {column.type}")
    value = table.column(-1)
    if not (pa.types.is_int64(value.type) or pa.types.is_float64(value.type)):
        raise ValueError(f"map {name!r}: the part's values are {value.type}, not int64 or double")
    if any(c.null_count for c in table.columns):
        raise ValueError(f"map {name!r}: the part holds NULLs; a key or value of an entry is never NULL")
    return name, table


def part_entries(table: pa.Table) -> tuple[list[tuple], list]:
    """A checked part's keys (tuples of the runtime's values: ``date32`` gives ``datetime.date``) and values."""
    keys = table.columns[:-1]
    return (list(zip(*(c.to_pylist() for c in keys))) if keys else [()] * table.num_rows,
            table.column(-1).to_pylist())


def key_slots(column: pa.Array | pa.ChunkedArray, kind: str) -> np.ndarray:
    """The slot of every value of a part's key column (:func:`arrow_part`'s types), as
    :func:`~boreas.m3.cumulus.hashing.slot` gives each: a ``date32`` DATE as the INT slot of its ordinal.

    >>> import datetime as dt
    >>> from boreas.m3.cumulus.hashing import slot
    >>> day = dt.date(1995, 3, 15)
    >>> key_slots(pa.array([day], pa.date32()), "DATE").tolist() == [slot(day)]
    True
    """
    if kind != "DATE":
        return column_slots(column, kind)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return int_slots(column.cast(pa.int32()).to_numpy(zero_copy_only=False).astype(np.int64) + _EPOCH)


def foreign_row(runtime: MemberRuntime, name: str, kinds: tuple[str, ...], table: pa.Table) -> int | None:
    """The first row of a checked part of map ``name`` whose entry this member does not own (None: it owns
    them all), by the slot hash over the partition column: no row becomes Python."""
    col = runtime.columns[name]
    if col == EVERYWHERE or not table.num_rows:
        return None
    if col is None:
        return None if runtime.layout.home == runtime.member else 0
    owners = np.asarray(runtime.layout.owners, dtype=np.int64)
    wrong = np.flatnonzero(owners[key_slots(table.column(col), kinds[col])] != runtime.member)
    return int(wrong[0]) if wrong.size else None


def foreign_entry(runtime: MemberRuntime, keys: dict[str, list]) -> tuple[str, tuple] | None:
    """The first ``(map, key)`` of ``keys`` (per map, key tuples as the runtime holds them) whose entry this
    member does not own; None when it owns them all.  Ownership is asked a map at a time (a part holds many)."""
    pack = runtime.store.pack
    for name, some in keys.items():
        foreign = runtime.foreign_keys(name, [pack(name, key) for key in some])
        if foreign:
            return name, next(key for key in some if pack(name, key) in foreign)
    return None


class BulkLoads:
    """The bulk loads member ``member`` of box ``box`` applied."""

    def __init__(self, box: str, member: int):
        self.box, self.member = box, member
        self.loaded: set[tuple[str, int]] = set()  # (job, part) of bulk loads applied: a retried task adds nothing

    def taken(self, job: str, part: int) -> bool:
        """Whether part ``part`` of job ``job`` went in already (a retry adds nothing)."""
        return (job, part) in self.loaded

    def loadable(self, job: str, took_input: bool, holds_entries: bool) -> str | None:
        """Why part of bulk load ``job`` cannot go in now (None: it can): loads go into an empty box, before
        any input (``took_input``), one job at a time (its parts in any order; ``holds_entries``: its earlier
        parts', or another's)."""
        started = {j for j, _ in self.loaded}
        if took_input or (holds_entries and job not in started):
            return (f"m3 box {self.box!r} member {self.member} already holds data; a bulk load starts an "
                    "empty partitioned box, before its input streams")
        if started - {job}:
            return f"m3 box {self.box!r} member {self.member} was loaded by job {min(started - {job})!r}; one bulk load per box"
        return None

    def load(self, m: list, runtime: MemberRuntime, decode: Callable[[str, list], tuple], epoch: int) -> None:
        """A ``Load`` message: install its entries as of ``epoch`` (once per part); an Arrow part (bytes) by
        columns, already checked by :func:`arrow_part` when it was taken."""
        job, part, entries = m[1], int(m[2]), m[3]
        if (job, part) in self.loaded:
            return
        self.loaded.add((job, part))
        if isinstance(entries, bytes):
            kinds = {m.name: tuple(k.type for k in m.keys) for m in runtime.program.maps}
            name, table = arrow_part(entries, self.box, kinds)
            keys, values = part_entries(table)
            foreign = len(keys) - runtime.install(zip(itertools.repeat(name), keys, values), epoch)
        else:
            foreign = len(entries) - runtime.install(
                ((name, decode(name, key), value) for name, key, value in entries), epoch)
        if foreign:
            log.error("m3 box %r member %d: bulk load %s part %d had %d entries of other members; skipped",
                      self.box, self.member, job, part, foreign)

    def state(self) -> dict:
        return {"loaded": [list(x) for x in self.loaded]}

    def restore(self, state: dict) -> None:
        self.loaded = {(j, int(p)) for j, p in state.get("loaded", [])}
