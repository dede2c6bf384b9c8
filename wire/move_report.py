"""A move report: the ``<move>`` a node sends the Head, with the catalog items each node wrote for it.

A move is made by the nodes (node/mover.py): the source writes its own
change (the boxes gone; the streams it still reads now coming from the
target) and sends the target update XML it applies (the boxes, where their
streams come from and go), both computed from the *source's* catalog as it
was (node/handover.py).  The Head cannot derive those items from the
catalog it commits, so the report carries them: one :class:`Written` per
node, naming the node's incarnation and its *serial* (how many changes the
node's local catalog had applied) before and after the write.  The Head
patches what it believes a node holds with the items only when its record
of that node is at exactly that serial (head/node_sync.py
``NodeSync.patch``); otherwise it reads the node again.

Reports travel on the node's one ordered channel to the Head's
``/update`` (node/head_reports.py): plain update XML when nothing was
written, else msgpack ``[update XML, [written, ...]]`` (``MSGPACK``).

>>> w = Written("n:2", "ab12", 4, 5, "<update/>")
>>> report = encode_report("<update><move node='n:2' box='b'/></update>", [w])
>>> decode_report(report) == ("<update><move node='n:2' box='b'/></update>", [w])
True
>>> serial_id("ab12", 5), read_serial_id("serial ab12 5"), read_serial_id("v7")
('serial ab12 5', ('ab12', 5), None)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

#: The content type of a report that carries :class:`Written` items.
MSGPACK = "application/msgpack"


@dataclass(frozen=True)
class Written:
    """What one node wrote to its local catalog for a move: update XML ``items`` it applied as one change,
    taking its serial from ``base`` to ``serial``, in incarnation ``incarnation``."""

    node: str
    incarnation: str
    base: int
    serial: int
    items: str

    def as_list(self) -> list[Any]:
        return [self.node, self.incarnation, self.base, self.serial, self.items]

    @classmethod
    def of(cls, raw: Any) -> Written:
        node, incarnation, base, serial, items = raw
        if not (isinstance(node, str) and isinstance(incarnation, str) and isinstance(items, str)
                and type(base) is int and type(serial) is int):
            raise TypeError(f"not a written record: {raw!r}")
        return cls(node, incarnation, base, serial, items)

    @classmethod
    def of_answer(cls, node: str, items: str, answer: Any) -> Written | None:
        """The target's record from its ``POST /handover`` answer (None: the answer does not say)."""
        try:
            return cls.of([node, answer["incarnation"], answer["base"], answer["serial"], items])
        except (KeyError, TypeError, ValueError):
            return None


def encode_report(text: str, written: list[Written]) -> bytes:
    return msgspec.msgpack.encode([text, [w.as_list() for w in written]])


def decode_report(body: bytes) -> tuple[str, list[Written]]:
    """The report's update XML and its records; raises ``msgspec.DecodeError`` or ``TypeError`` or
    ``ValueError`` on anything else."""
    text, raw = msgspec.msgpack.decode(body)
    if not isinstance(text, str) or not isinstance(raw, list):
        raise TypeError("a move report is [update XML, [written, ...]]")
    return text, [Written.of(r) for r in raw]


def serial_id(incarnation: str, serial: int) -> str:
    """The ``id`` of a node's ``GET /catalog`` document: which change of which incarnation it holds."""
    return f"serial {incarnation} {serial}"


def read_serial_id(id: str | None) -> tuple[str, int] | None:
    """``(incarnation, serial)`` of :func:`serial_id`'s text; None for any other id."""
    parts = (id or "").split(" ")
    if len(parts) != 3 or parts[0] != "serial" or not parts[2].isdigit():
        return None
    return parts[1], int(parts[2])
