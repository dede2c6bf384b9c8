"""Which row of an input file each published row is, so that a refused row is named by its file row.

``boreas publish`` numbers the *records* its reader gives (CSV: well-formed
rows; JSON lines: lines; Parquet: rows) and sends them in order, leaving out
the ones it refused itself.  The node answers a refused row by its index
among the rows sent, so telling a user "row 1,204" means: the sent index, to
a record (counting the ones left out before it), to a row of the file (the
reader's own numbering, :meth:`FileRows.file_rows`, which for CSV reads the
file again: Arrow's reader does not say on which line a row began).

Only the records left out are kept (an array of ints), not a number per row
sent: a file of a hundred million rows costs nothing here when all are good.

>>> rows = FileRows()
>>> rows.refuse(1, "no good")
>>> rows.skip(3)
>>> [rows.record(sent) for sent in range(4)]
[0, 2, 4, 5]
>>> rows.problems, len(rows)
([(1, 'no good')], 1)
"""

from __future__ import annotations

from array import array
from bisect import bisect_right

from .input_rows import MAX_KEPT


class FileRows:
    """The records an input file's reader left out (refused, with the reason, or skipped: a blank line)."""

    def __init__(self) -> None:
        self.left_out = array("q")  # ascending: records are numbered in the order they are read
        self.problems: list[tuple[int, str]] = []  # (record, reason): the first MAX_KEPT
        self.count = 0

    def refuse(self, record: int, reason: str) -> None:
        self.left_out.append(record)
        self.count += 1
        if len(self.problems) < MAX_KEPT:
            self.problems.append((record, reason))

    def skip(self, record: int) -> None:
        self.left_out.append(record)

    def __len__(self) -> int:
        return self.count

    def record(self, sent: int) -> int:
        """The record the ``sent``-th row sent (from 0) was: ``sent`` plus the records left out before it."""
        record = sent
        while True:
            later = sent + bisect_right(self.left_out, record)
            if later == record:
                return record
            record = later
