"""The input log's files on disk: segment naming, record framing, and reading records back with checks.

A segment file is ``<position of its first record, 20 digits>.log``; a record
is its payload length (4 bytes, big-endian), CRC32 (4 bytes), payload; a
``start`` file keeps the first retained position.  This is the format a torn
or corrupt tail is recognised by; :class:`~.log.InputLog` (group commit, repair
on open, truncation) builds on it, and keeping the format apart keeps each
module to one concern.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

RECORD = struct.Struct(">II")  # payload length, CRC32 of the payload
MAX_PAYLOAD = 1 << 30  # a larger length field is garbage, not a record
SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
START_FILE = "start"


class BadRecord(Exception):
    """Where reading a segment stopped and why: the caller decides whether that is a tail to cut or corruption."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset, self.reason = offset, reason


@dataclass
class Segment:
    """One segment file and how much of it is durable (the unit of truncation)."""

    first: int  # position of its first record (also its file name)
    path: Path
    count: int = 0  # durable records in it
    size: int = 0  # durable bytes in it

    @property
    def end(self) -> int:
        return self.first + self.count


def read_records(f: BinaryIO, size: int) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset after the record, payload)`` within ``size`` bytes; BadRecord at the first bad one."""
    offset = 0
    while offset < size:
        header = f.read(RECORD.size)
        if len(header) < RECORD.size:
            raise BadRecord(offset, "short header")
        length, crc = RECORD.unpack(header)
        if length > MAX_PAYLOAD:
            raise BadRecord(offset, f"absurd length {length}")
        if length > size - offset - RECORD.size:
            raise BadRecord(offset, "short payload")
        payload = f.read(length)
        if zlib.crc32(payload) != crc:
            raise BadRecord(offset, "CRC mismatch")
        offset += RECORD.size + length
        yield offset, payload
