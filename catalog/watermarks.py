"""An ``<input>``'s event time: its ``watermark="ts - 5000"`` and ``idle-timeout="30"`` attributes, read once.

The watermark is a property of the stream (docs/xml.md, ``<input>``): the
event-time column and how far behind the newest event time a row may still
arrive, in the column's units (milliseconds, say) or as an SQL interval.  The
node hands it to every windowed ``m3`` box reading the stream
(node/operators/m3windows.py); the catalog only reads and checks it, so a typo
is refused at submission, naming the element, not found at the first row.

>>> read_watermark("ts - 5000"), read_watermark("ts - INTERVAL '5' SECOND"), read_watermark("ts")
(('ts', 5000), ('ts', 5000), ('ts', 0))
>>> read_watermark("ts + 5")
Traceback (most recent call last):
...
ValueError: watermark 'ts + 5' is not COLUMN, COLUMN - MILLISECONDS or COLUMN - INTERVAL 'n' UNIT
>>> interval_ms("INTERVAL '2' MINUTE"), interval_ms("250")
(120000, 250)
"""

from __future__ import annotations

import re

_UNITS = {"MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000}
_INTERVAL = re.compile(r"^\s*(?:INTERVAL\s*'\s*(\d+)\s*'\s*([A-Za-z]+)|(\d+))\s*$", re.IGNORECASE)
_MARK = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:-\s*(.+?))?\s*$")


def interval_ms(text: str, where: str = "interval") -> int:
    """``INTERVAL '10' SECOND`` (units MILLISECOND to DAY, an S allowed) or a whole number, as milliseconds."""
    m = _INTERVAL.match(text)
    if m is None:
        raise ValueError(f"{where} {text.strip()!r} is not INTERVAL 'n' UNIT or a number of milliseconds")
    if m.group(3) is not None:
        return int(m.group(3))
    unit = m.group(2).upper()
    unit = unit[:-1] if unit.endswith("S") else unit
    if unit not in _UNITS:
        raise ValueError(f"{where} unit {m.group(2)!r} is not one of {', '.join(_UNITS)}")
    return int(m.group(1)) * _UNITS[unit]


def read_watermark(text: str) -> tuple[str, int]:
    """``(column, delay)`` of a ``watermark`` attribute."""
    m = _MARK.match(text)
    why = f"watermark {text.strip()!r} is not COLUMN, COLUMN - MILLISECONDS or COLUMN - INTERVAL 'n' UNIT"
    if m is None:
        raise ValueError(why)
    try:
        return m.group(1), interval_ms(m.group(2), "watermark delay") if m.group(2) else 0
    except ValueError:
        raise ValueError(why) from None


def read_idle_timeout(text: str) -> float:
    """An ``idle-timeout`` attribute: seconds, more than 0."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"idle-timeout {text!r} is not a number of seconds") from None
    if not value > 0:
        raise ValueError(f"idle-timeout {text!r} must be more than 0 seconds")
    return value
