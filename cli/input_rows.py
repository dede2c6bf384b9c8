"""Mapping an input file's rows (CSV or JSON lines) onto a stream's fields, for ``boreas publish``.

Mapping a file's columns or keys onto a stream's fields, and saying which rows
cannot be mapped and why, is independent of how rows are then typed and sent;
it is what the CSV hardening tests drive directly, so it lives apart from the
``publish`` command (:mod:`.data`).  ``publish`` itself reads a file in Arrow
batches (:mod:`.input_batches`) and uses this module for what Arrow's readers
do not say: whether a CSV header fits (:func:`csv_header`), which line a
refused CSV row is on (:func:`read_rows` read again, only then), and why a
JSON line gives no row (:func:`json_values`).
"""

from __future__ import annotations

from boreas.catalog.words import counted
import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from boreas.catalog.diagnostics import Diagnostic, ValidationFailed


#: Problems kept with their reasons; the rest are only counted (a file of bad rows must not fill memory).
MAX_KEPT = 1000


@dataclass
class RowProblems:
    """Rows of an input file that cannot be published: (row, reason), numbered by line in the file.

    The first :data:`MAX_KEPT` are kept in :attr:`found`; ``len()`` counts all of them.
    """

    path: str
    found: list[tuple[int, str]] = field(default_factory=list)
    count: int = 0

    def add(self, row: int, reason: str) -> None:
        self.count += 1
        if len(self.found) < MAX_KEPT:
            self.found.append((row, reason))

    def __len__(self) -> int:
        return self.count


def read_rows(path: str, fields: list[str], *, header: bool = True, ignore_unknown: bool = False,
              problems: RowProblems | None = None) -> Iterator[tuple[int, list[Any]]]:
    """``(row, values in field order)`` for each row of a CSV or JSON-lines file.

    Rows are numbered by their line in the file (a CSV header is line 1).

    * CSV: the first row must be a header naming the columns; they are mapped
      to the stream's fields by name, in any order.  A header naming an
      unknown column (unless ``ignore_unknown``: such columns are skipped),
      naming a column twice or missing a field is refused with
      ``ValidationFailed`` naming it, before any row is read.  With
      ``header=False`` there is no header and columns are mapped by position.
    * JSON lines (``.jsonl``, ``.json``, ``.ndjson``): one object per line
      mapping field names to values (an unknown key is a problem unless
      ``ignore_unknown``; a missing field always is), or one array of values
      in field order.

    A row that cannot be mapped (wrong number of values, a missing field, not
    JSON) is not yielded but added to ``problems`` with its reason.
    """
    problems = problems if problems is not None else RowProblems(path)
    if is_json_lines(path):
        yield from _json_rows(path, fields, ignore_unknown, problems)
    else:
        yield from _csv_rows(path, fields, header, ignore_unknown, problems)


def _fields_text(fields: list[str]) -> str:
    return ", ".join(fields)


def _csv_rows(path: str, fields: list[str], header: bool, ignore_unknown: bool,
              problems: RowProblems) -> Iterator[tuple[int, list[Any]]]:
    # utf-8-sig: a byte-order mark (as spreadsheets write) is not part of the first column's name.
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        positions: list[int] | None = None
        width = len(fields)
        if header:
            positions, width = _header(path, next(reader, None), fields, ignore_unknown)
        line = reader.line_num
        for row in reader:
            number, line = line + 1, reader.line_num  # a quoted value may span lines
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # blank line
            if len(row) != width:
                what = "the header has" if header else f"the stream's {width} fields are"
                problems.add(number, f"row has {counted(len(row), 'value')}; {what} "
                                     + (counted(width, "column") if header else _fields_text(fields)))
                continue
            yield number, [row[i] for i in positions] if positions is not None else row


def csv_header(path: str, fields: list[str], ignore_unknown: bool) -> tuple[list[int], int]:
    """Where each field is among the CSV header's columns, and how many columns it has; a header that
    does not fit is refused with ``ValidationFailed`` naming why (read before anything is sent)."""
    with open(path, newline="", encoding="utf-8-sig") as fh:
        return _header(path, next(csv.reader(fh), None), fields, ignore_unknown)


def _header(path: str, first: list[str] | None, fields: list[str], ignore_unknown: bool) -> tuple[list[int], int]:
    if first is None:
        raise ValidationFailed([Diagnostic(path, None, "", "file is empty: expected a header row "
                                           f"naming the columns ({_fields_text(fields)})")])
    return _column_positions(path, [c.strip() for c in first], fields, ignore_unknown), len(first)


def _column_positions(path: str, names: list[str], fields: list[str], ignore_unknown: bool) -> list[int]:
    """Where each field is among the header's columns; refuses a header that does not fit."""
    known = set(fields)
    if not known.intersection(names):
        raise ValidationFailed([Diagnostic(
            path, 1, "", f"the first row is not a header: expected column names ({_fields_text(fields)}) "
                         "in any order; add a header row, or pass --no-header to map columns by position")])
    reasons = []
    seen: set[str] = set()
    for name in names:
        if name in seen and name in known:
            reasons.append(f"column {name!r} appears more than once")
        seen.add(name)
        if name not in known and not ignore_unknown:
            reasons.append(f"unknown column {name!r}: the stream's fields are {_fields_text(fields)} "
                           "(--ignore-unknown skips other columns)")
    reasons += [f"missing column {f!r}: the stream's fields are {_fields_text(fields)}"
                for f in fields if f not in seen]
    if reasons:
        raise ValidationFailed([Diagnostic(path, 1, "", r) for r in reasons])
    return [names.index(f) for f in fields]


def _json_rows(path: str, fields: list[str], ignore_unknown: bool,
               problems: RowProblems) -> Iterator[tuple[int, list[Any]]]:
    with open(path, encoding="utf-8-sig") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield number, json_values(line, fields, ignore_unknown)
            except BadRow as exc:
                problems.add(number, str(exc))


class BadRow(ValueError):
    """A line that gives no row; the message says why."""


def json_values(line: str | bytes, fields: list[str], ignore_unknown: bool) -> list[Any]:
    """The values in field order of one JSON line: an object by field name, or an array in field order.

    >>> json_values('{"b": 2, "a": 1}', ["a", "b"], False), json_values('[1, 2]', ["a", "b"], False)
    ([1, 2], [1, 2])
    >>> try:
    ...     json_values('{"a": 1}', ["a", "b"], False)
    ... except BadRow as exc:
    ...     print(exc)
    missing field 'b' (the stream's fields are a, b)
    """
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise BadRow(f"not JSON: {exc}") from None
    if isinstance(value, dict):
        missing = [f for f in fields if f not in value]
        unknown = [] if ignore_unknown else [k for k in value if k not in fields]
        if missing or unknown:
            reasons = [f"missing field {f!r}" for f in missing]
            reasons += [f"unknown field {k!r}" for k in unknown]
            raise BadRow("; ".join(reasons) + f" (the stream's fields are {_fields_text(fields)}"
                         + (")" if ignore_unknown or not unknown else "; --ignore-unknown skips other keys)"))
        return [value[f] for f in fields]
    if isinstance(value, list):
        if len(value) != len(fields):
            raise BadRow(f"array has {counted(len(value), 'value')}; the stream's fields are {_fields_text(fields)}")
        return value
    raise BadRow(f"expected an object (field: value) or an array, not {type(value).__name__}")


def is_json_lines(path: str) -> bool:
    return path.endswith((".jsonl", ".json", ".ndjson"))


def is_parquet(path: str) -> bool:
    return path.endswith((".parquet", ".pq"))
