"""A query's result as Arrow: :meth:`QueryClient.arrow` and :meth:`QueryClient.batches` (issue 30, item 5).

The query API answers a read as JSON rows ``(key tuple, value)``
(node/query.py), which :class:`~boreas.client.query.QueryResult` keeps as
rows, the default.  A caller who works in columns (pandas, polars, DuckDB)
takes the same read as one pyarrow ``Table`` with the view's schema: the
key columns, then the value columns, named as the box names them
(:meth:`QueryClient.maps`: a view's ``values``; a map's value column is
named after the map).  Types: a key column by its M3 type (``INT`` int64,
``FLOAT`` float64, ``STRING`` string, ``DATE`` date32); a view's value
column by the M3 type the node reports for it (``GET /query/{box}/maps``:
a view's ``types``, from the column's expression, so ``MAX(f)`` of a FLOAT
``f`` is float64 and ``MIN(s)`` of a STRING string), a map's by its
declared value type, else by its values; an aggregate read's wildcard keys
are NULL, as the rows give them.

The query API does not page or stream a read: a node answers it whole, and
a partitioned box's members each answer their part, merged in the client
(client/partitioned.py).  So :meth:`QueryClient.batches` yields the read as
one record batch; it is the interface a paged read would keep, and
iterating it never holds more than the read's answer.

>>> from boreas.client.query import QueryResult
>>> r = QueryResult("v", "n:1", "Q1", 3, "slice", (("a", "INT"),), [((1,), (10, 2)), ((2,), (-4, 1))])
>>> described = {"views": {"Q1": {"keys": [["a", "INT"]], "values": ["total", "n"], "types": ["INT", "INT"]}},
...              "streams": {"G": "Q1"}}
>>> table = result_table(r, described)
>>> table.schema.names, table.column("total").to_pylist(), str(table.schema.field("n").type)
(['a', 'total', 'n'], [10, -4], 'int64')
>>> import datetime as dt
>>> by_day = QueryResult("v", "n:1", "avg", 3, "slice", (("d", "DATE"),), [((dt.date(1995, 3, 1),), 2.5)])
>>> result_table(by_day, {"views": {"avg": {"values": ["mean"]}}}).schema
d: date32[day]
mean: double
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import pyarrow as pa


class ReadResult(Protocol):
    """What :func:`result_table` reads of a :class:`~boreas.client.query.QueryResult` (named by its shape:
    client/query.py imports this module)."""

    map: str
    keys: tuple[tuple[str, str], ...]
    rows: Sequence[tuple[tuple, Any]]

#: Each M3 column type's Arrow type.
M3_ARROW_TYPES: dict[str, pa.DataType] = {"INT": pa.int64(), "FLOAT": pa.float64(), "STRING": pa.string(),
                                          "DATE": pa.date32()}


def value_columns(name: str, described: dict[str, Any]) -> list[tuple[str, pa.DataType | None]]:
    """The value columns of what ``name`` reads (an out stream, a view or a map), each with its Arrow type
    where the box gives one (None: taken from the values).

    A view's value columns are typed by the M3 types the node reports for them (``types``, from the column's
    expression: a MIN/MAX of a FLOAT is FLOAT, of a STRING a STRING).  A node that reports none: by map
    ``V_v``'s value type only where that map is keyed as the view (a plain SUM or COUNT); a MIN/MAX's
    map is a count keyed by the group and the value, so such a column is typed by its values."""
    maps = described.get("maps", {})
    view = described.get("streams", {}).get(name) or (name if name in described.get("views", {}) else None)
    if view is None:
        declared = maps.get(name, {}).get("value")
        return [(name, M3_ARROW_TYPES.get(declared) if declared else None)]
    info = described["views"][view]
    values = info.get("values", [])
    reported = info.get("types")
    if reported is not None and len(reported) == len(values):
        return [(value, M3_ARROW_TYPES.get(kind)) for value, kind in zip(values, reported)]
    columns = []
    for value in values:
        decl = maps.get(f"{view}_{value}", {})
        same_keys = "keys" in info and "keys" in decl and len(decl["keys"]) == len(info["keys"])
        declared = decl.get("value") if same_keys else None
        columns.append((value, M3_ARROW_TYPES.get(declared) if declared else None))
    return columns


def result_table(result: ReadResult, described: dict[str, Any]) -> pa.Table:
    """``result`` (rows) as a pyarrow Table: key columns, then value columns (``described``: the box's
    :meth:`~boreas.client.query.QueryClient.maps` answer)."""
    values = value_columns(result.map, described)
    names = [name for name, _ in result.keys] + [name for name, _ in values]
    columns: list[pa.Array] = []
    for index, (_, kind) in enumerate(result.keys):
        columns.append(pa.array([key[index] for key, _ in result.rows], M3_ARROW_TYPES.get(kind)))
    spread = [_spread(value, len(values)) for _, value in result.rows]
    for index, (name, kind) in enumerate(values):
        cells = [row[index] for row in spread]
        column = pa.array(cells, kind) if kind is not None else pa.array(cells)
        if pa.types.is_null(column.type):  # no value to take the type from (an empty read): a number
            column = column.cast(pa.float64())
        columns.append(column)
    return pa.Table.from_arrays(columns, names=names)


def _spread(value: Any, width: int) -> tuple:
    """A row's value as one cell per value column (a view of several columns gives a tuple; a NULL partial
    of an aggregate, None)."""
    if isinstance(value, tuple) and (width != 1 or len(value) == 1):
        return value if len(value) == width else tuple(value) + (None,) * (width - len(value))
    if value is None:
        return (None,) * width
    return (value,) + (None,) * (width - 1)
