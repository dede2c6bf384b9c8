"""The messages between the members of a partitioned box (docs/cumulus.md §3.6).

Messages are plain lists whose first item is a one-letter tag, so they
travel as msgpack rows of the internal stream ``{box}@{member}`` (one per
destination member; every source member is its own producer on it, so a
link keeps each source's messages in order, and the data plane's
acknowledgements, resends and de-duplication apply), and so a member's state
(buffered messages) is plain data for snapshots and moves.

=====  ===========  ============================  ==========================================
tag    message      from → to                     fields
=====  ===========  ============================  ==========================================
``w``  Work         coordinator → member          epoch, coord, seq, port, rows (in stream form)
``c``  Close        coordinator → every member    epoch, coord, positions (to the leader)[, marks[, ended]]: no more Work of that epoch
``p``  Push         server → writer               epoch, coord, seq, src, [[map, Arrow IPC bytes]] (key columns, values)
``a``  Advance      leader → every member         epoch, stable, stable_at: stamp with ``epoch`` from now on
``u``  Wake         coordinator → leader          epoch: it stamped Work; please advance
``d``  Done         member → leader               epoch, member: it applied all of the epoch
``l``  Load         a bulk loader → member        job, part, [[map, key, value]] or an Arrow part's IPC bytes: initial map values
``x``  Request      a client → leader             change, new layout: move, split, rebalance
``r``  Relayout     leader → every member         change, layout, first epoch E (None: not fixed yet), moves [[segment, from, to]]
``k``  Chunk        source → target member        change, source, final, [[map, Arrow IPC bytes]] (a final's 0 deletes)
``y``  Copied       source → leader               change, source: its pre-copy is sent; only dirty keys are left
``f``  Flip         leader → every member         change, first epoch E: every source has copied
``h``  Handover     coordinator → coordinator     epoch E, from, [[stream, producer, last seq, marks, ends]]: the
                                                  producers it hands over at E (one to every coordinator of E, maybe
                                                  empty), with a windowed producer's watermark and its end entry
``t``  Taken        coordinator → coordinator     epoch E, member, at: it took the Handover of E while stamping
                                                  with ``at`` (now a hint may send the handed producers'
                                                  publishers to it; their watermarks count there from ``at``)
``o``  Forward      coordinator → coordinator     epoch, from, stream, producer, seq, port, rows: a batch of a
                                                  producer handed over, taken after E (docs/cumulus.md §6.5); rows
                                                  None: a windowed producer's end, behind its batches
``g``  Gathered     member → member 0             step, member, {view: [[end, key, value]]}: a window join's leaf
                                                  rows the member closed when its frontier reached ``step``
``z``  Cancel       a client → leader;            change, asked: an announced change whose first epoch is not
                    leader → every member         fixed yet is dropped (asked: the client's, else the leader's)
=====  ===========  ============================  ==========================================

A version is ``(epoch, coord, seq)``; members apply versions in that order.

>>> work(0, 1, 7, 0, [(1, 2)])
['w', 0, 1, 7, 0, [(1, 2)]]
>>> version(work(3, 1, 7, 0, []))
(3, 1, 7)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from boreas.m3.ast import Program

WORK, CLOSE, PUSH, ADVANCE, WAKE, DONE, LOAD = "w", "c", "p", "a", "u", "d", "l"
REQUEST, RELAYOUT, CHUNK, COPIED, FLIP, CANCEL = "x", "r", "k", "y", "f", "z"
HANDOVER, TAKEN, FORWARD = "h", "t", "o"
GATHERED = "g"

Message = list


def work(epoch: int, coord: int, seq: int, port: int, rows: list) -> Message:
    return [WORK, epoch, coord, seq, port, rows]


def close(epoch: int, coord: int, positions: list | None = None, marks: list | None = None,
          ended: bool | None = None) -> Message:
    """``positions``: ``[[stream, producer, seq]]``, the last batch of each input the coordinator stamped in ``epoch``;
    ``marks``: a windowed box's, the coordinator's watermark per windowed port (node/cumulus/event_marks.py);
    ``ended``: whether every producer it heard of ended (None: it heard of none; node/cumulus/end_marks.py)."""
    return [CLOSE, epoch, coord, positions or [], marks, ended]


def push(epoch: int, coord: int, seq: int, src: int, entries: list) -> Message:
    """The entries ``src`` serves a writer for version ``(epoch, coord, seq)``: ``[[map, IPC bytes]]``, each map's
    keys and values as Arrow columns (:mod:`~boreas.node.cumulus.entry_columns`)."""
    return [PUSH, epoch, coord, seq, src, entries]


def advance(epoch: int, stable: int = -1, stable_at: float = 0.0) -> Message:
    return [ADVANCE, epoch, stable, stable_at]


def wake(epoch: int) -> Message:
    return [WAKE, epoch]


def done(epoch: int, member: int) -> Message:
    return [DONE, epoch, member]


def load(job: str, part: int, entries: list) -> Message:
    """Initial values of the member's entries (a Spark bulk load, §7): ``[[map, key, value], ...]``."""
    return [LOAD, job, part, entries]


def request(change: str, layout: dict) -> Message:
    return [REQUEST, change, layout]


def relayout(change: str, layout: dict, first_epoch: int | None, moves: list) -> Message:
    """From ``first_epoch`` on, ``layout``; ``moves``: ``[[segment, from member, to member]]`` whose data travels.

    ``first_epoch`` is None while the sources pre-copy: a ``Flip`` fixes it (docs/cumulus.md §6.2)."""
    return [RELAYOUT, change, layout, first_epoch, moves]


def chunk(change: str, source: int, final: bool, entries: list, carried: dict | None = None) -> Message:
    """Entries of segments moving from ``source``: ``[[map, IPC bytes], ...]``, each map's keys and values as Arrow
    columns (:func:`~boreas.node.cumulus.precopy.chunk_entries`), bounded by the copy's step.  ``carried``: in a final
    chunk, what the box's member keeps beside its maps that a target must start from (a windowed box's
    frontier: node/cumulus/windowing.py)."""
    return [CHUNK, change, source, final, entries] + ([] if carried is None else [carried])


def copied(change: str, source: int) -> Message:
    return [COPIED, change, source]


def flip(change: str, first_epoch: int) -> Message:
    return [FLIP, change, first_epoch]


def gathered(step: float, member: int, leaves: dict) -> Message:
    """A window join's leaf rows ``{view: [[end, key, value]]}`` that ``member`` closed at frontier ``step``
    (node/cumulus/gathering.py)."""
    return [GATHERED, step, member, leaves]


def cancel(change: str, asked: bool) -> Message:
    return [CANCEL, change, asked]


def handover(epoch: int, coord: int, producers: list) -> Message:
    """``producers``: ``[[stream, producer, last seq, marks, ends]]`` that ``coord`` stamped up to ``last`` before
    ``epoch``; ``marks``: a windowed box's, the producer's watermark entries (node/cumulus/event_marks.py), which
    the new coordinator continues from (empty otherwise); ``ends``: the ports it was heard on and ended on
    (node/cumulus/end_marks.py)."""
    return [HANDOVER, epoch, coord, producers]


def taken(epoch: int, member: int, at: int) -> Message:
    """``member`` took the Handover of ``epoch`` while stamping with epoch ``at`` (``at >= epoch``): a windowed
    producer's watermark counts there from ``Close(at)`` on.  A Taken of a version before ``at`` has 3 fields."""
    return [TAKEN, epoch, member, at]


def forward(epoch: int, coord: int, stream: str, producer: str, seq: int, port: int,
            rows: list | bytes | None) -> Message:
    """A batch ``coord`` took after handing ``producer`` over at ``epoch`` (rows, or Arrow IPC bytes; None: a
    windowed producer's end, after its batches: node/cumulus/handing.py)."""
    return [FORWARD, epoch, coord, stream, producer, seq, port, rows]


def version(msg: Message) -> tuple[int, int, int]:
    """The version a Work or Push message belongs to."""
    return (msg[1], msg[2], msg[3])


class MessageRows:
    """Decodes batches of an internal stream: messages are any msgpack lists (no schema to check)."""

    schema = None

    def __init__(self) -> None:
        import msgspec

        self._decoder = msgspec.msgpack.Decoder(list[list])

    def decode(self, raw: bytes) -> tuple[list, list]:
        return self._decoder.decode(raw), []

    def decode_payload(self, raw: bytes, fmt: int = 0) -> tuple[list, list]:
        """As a stream's ``RowType.decode_payload``: members' messages always travel as msgpack rows."""
        if fmt:
            raise ValueError("a partitioned box's messages travel as msgpack rows, not Arrow")
        return self.decode(raw)


_EPOCH = dt.date(1970, 1, 1).toordinal()

#: ``(encode, decode)`` of map keys as messages and states carry them (:func:`key_codecs`).
KeyCodecs = tuple[Callable[[str, tuple], list], Callable[[str, list], tuple]]


def key_codecs(program: Program) -> KeyCodecs:
    """``(encode, decode)`` of map keys in a member's state (its deltas): DATE key columns as day numbers.

    >>> from boreas.m3 import compile_sql
    >>> p = compile_sql("CREATE STREAM R(d DATE, b INT); SELECT d, SUM(b) AS t FROM R GROUP BY d")
    >>> enc, dec = key_codecs(p)
    >>> enc("Q1_t", (dt.date(1995, 3, 15),)), dec("Q1_t", enc("Q1_t", (dt.date(1995, 3, 15),)))
    ([9204], (datetime.date(1995, 3, 15),))
    """
    dates = {m.name: tuple(i for i, k in enumerate(m.keys) if k.type == "DATE") for m in program.maps}

    def encode(name: str, key: tuple) -> list:
        at = dates.get(name)
        if not at:
            return list(key)
        return [v.toordinal() - _EPOCH if i in at else v for i, v in enumerate(key)]

    def decode(name: str, key: list) -> tuple:
        at = dates.get(name)
        if not at:
            return tuple(key)
        return tuple(dt.date.fromordinal(v + _EPOCH) if i in at else v for i, v in enumerate(key))

    return encode, decode
