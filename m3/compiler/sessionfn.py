"""``SESSION`` windows in SQL: the call's arguments read, and the windows' bounds kept per key as rows arrive.

Why a module of its own: a ``TUMBLE`` or ``HOP`` window's bounds follow
from one row's event time (:meth:`.windowfn.Window.assign`); a session's
follow from every row of its key seen so far: a *session* is a maximal run
of a key's rows whose event times are less than ``gap`` apart, so it spans
``[first, last + gap)`` and a row landing within ``gap`` of two sessions
merges them.  :class:`Session` is the call (Flink's ``TABLE(SESSION(TABLE
bid PARTITION BY bidder, DESCRIPTOR(datetime), INTERVAL '10' SECOND))``);
a key's open sessions, as sorted intervals, each
with the rows it holds until it closes, is the ``m3`` box's
(node/operators/m3sessions.py).

>>> s = read_session(["TABLE bid PARTITION BY bidder", "DESCRIPTOR(ts)", "INTERVAL '10' SECOND"])
>>> s
Session(relation='bid', time='ts', gap=10000, partition=('bidder',))
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from boreas.catalog.watermarks import interval_ms

_TABLE = re.compile(r"^\s*TABLE\s+([A-Za-z_][A-Za-z0-9_]*)(?:\s+PARTITION\s+BY\s+(.+?))?\s*$",
                    re.IGNORECASE | re.DOTALL)
_NAME = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*$")
_DESCRIPTOR = re.compile(r"^\s*DESCRIPTOR\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$", re.IGNORECASE)
FORM = "SESSION(TABLE name [PARTITION BY column, ...], DESCRIPTOR(column), gap)"


@dataclass(frozen=True)
class Session:
    """One ``SESSION`` window table function: ``relation``'s rows grouped per ``partition`` key into runs whose
    ``time`` values are less than ``gap`` apart."""

    relation: str
    time: str
    gap: int
    partition: tuple[str, ...] = ()


def read_session(args: list[str]) -> Session:
    """The :class:`Session` of a call's comma-split arguments (a ``PARTITION BY`` list splits too); a
    :class:`ValueError` saying the form when they are not it."""
    at = next((i for i, a in enumerate(args) if _DESCRIPTOR.match(a)), None)
    if at is None or at == 0 or len(args) != at + 2:
        raise ValueError(f"SESSION's arguments are {FORM} (an offset is not supported)")
    table = _TABLE.match(",".join(args[:at]))
    if table is None:
        raise ValueError(f"SESSION's arguments are {FORM}")
    partition: tuple[str, ...] = ()
    if table.group(2) is not None:
        names = [_NAME.match(p) for p in table.group(2).split(",")]
        if any(n is None for n in names):
            raise ValueError(f"SESSION's PARTITION BY takes plain column names: {table.group(2).strip()!r}")
        partition = tuple(n.group(1) for n in names if n is not None)
    gap = interval_ms(args[at + 1], "SESSION's gap")
    if gap <= 0:
        raise ValueError("SESSION's gap must be positive")
    return Session(table.group(1), _DESCRIPTOR.match(args[at]).group(1), gap, partition)  # type: ignore[union-attr]
