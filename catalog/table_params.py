"""Borealis's table boxes (``select``, ``insert``, ``update``, ``delete``): their SQL, parameters and schemas.

A ``<table>`` is keyed rows of one schema (its keys: its ``<key field>``
elements), kept by the node its boxes run on.  A table box names it with ``<access table>`` and says what it
does in its ``sql`` parameter, Borealis's small SQL (src/external/bdb):

* ``insert into T values (e0, e1, ...)``: one row per input tuple, one
  expression over the input's fields per table field; a row whose key is
  already there replaces it.  No out stream, unless ``pass-input`` (the
  input tuple, once inserted);
* ``update T set T.f = e, ... [where p]``: each row matching ``p`` gets the
  new values (expressions over ``input.x`` and ``T.y``).  No out stream,
  unless ``pass-input``;
* ``delete from T [where p]``: the matching rows go.  ``pass-deletions``:
  out port 0 carries them; ``pass-input``: the next port carries the input;
* ``select *|f, ... from T [where p]``: for each input tuple, the matching
  rows (the named table fields) on port 0; ``pass-on-no-results``: port 1
  carries the input tuples nothing matched.

In ``p`` and in ``set``, ``input.x`` is the input tuple's field and
``T.y`` the table row's; a name without qualifier is the input's when it
has such a field, else the row's.  ``==`` is ``=``.

A box's validation and its operator need its table's declaration, which
the box only names; :func:`bind` returns the box with the declaration
folded into ``table.*`` parameters (validation binds each box against its
catalog, the node against its slice), so the box type's inference and the
operator read it like any parameter.

>>> from boreas.catalog.model import Box, InPort
>>> parse_sql(Box("s", "select", (InPort("R"),), ("O",), (("sql", "select * from T where T.a == input.k"),)))
TableSql(kind='select', table='T', columns=('*',), values=(), sets=(), where='T.a == input.k')
>>> parse_sql(Box("u", "update", (InPort("R"),), (), (("sql", "update T set T.b = input.b, c = 1"),))).sets
(('b', 'input.b'), ('c', '1'))
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass

from .diagnostics import Origin
from .expressions import ExpressionError, Scope, check_expression, infer_field, infer_type, parse_expression
from .model import Box, Catalog, Field, FieldType, Schema

#: The table box types, each with the SQL statement it runs.
TABLE_TYPES = ("select", "insert", "update", "delete")
#: The box types that access a table: the table boxes, and ``joinstatic`` (a stream joined with a table's rows).
ACCESSING = (*TABLE_TYPES, "joinstatic")

_FLAGS = {"select": ("pass-on-no-results",), "insert": ("pass-input",), "update": ("pass-input",),
          "delete": ("pass-deletions", "pass-input")}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")
#: The numeric field types (a value of one may be stored in a field of another).
NUMERIC = (FieldType.BYTE, FieldType.SHORT, FieldType.INT, FieldType.LONG, FieldType.SINGLE, FieldType.DOUBLE)

_STATEMENTS = {
    "select": re.compile(r"^select\s+(?P<columns>.+?)\s+from\s+(?P<table>\w+)(?:\s+where\s+(?P<where>.+))?$",
                         re.I | re.S),
    "insert": re.compile(r"^insert\s+into\s+(?P<table>\w+)\s+values\s*\((?P<values>.*)\)$", re.I | re.S),
    "update": re.compile(r"^update\s+(?P<table>\w+)\s+set\s+(?P<sets>.+?)(?:\s+where\s+(?P<where>.+))?$",
                         re.I | re.S),
    "delete": re.compile(r"^delete\s+from\s+(?P<table>\w+)(?:\s+where\s+(?P<where>.+))?$", re.I | re.S),
}
_SHAPES = {"select": "select *|FIELD, ... from TABLE [where PREDICATE]",
           "insert": "insert into TABLE values (EXPRESSION, ...)",
           "update": "update TABLE set TABLE.FIELD = EXPRESSION, ... [where PREDICATE]",
           "delete": "delete from TABLE [where PREDICATE]"}
_ASSIGNMENT = re.compile(r"^\s*(?:(\w+)\.)?(\w+)\s*=(?!=)\s*(.+?)\s*$", re.S)
_NAME = re.compile(r"^\s*(?:(\w+)\.)?(\w+)\s*$")


class TableParamError(ValueError):
    """A table box or table is wrong; the message is one line naming it and why."""


@dataclass(frozen=True, slots=True)
class TableSql:
    """A table box's ``sql`` parameter, taken apart (expressions stay text, checked against a scope)."""

    kind: str
    table: str
    columns: tuple[str, ...] = ()  # select: ``*`` or table field names
    values: tuple[str, ...] = ()  # insert: one expression per table field
    sets: tuple[tuple[str, str], ...] = ()  # update: (table field, expression)
    where: str | None = None


def parse_sql(box: Box) -> TableSql:
    """The box's ``sql`` parameter, as the statement its type runs (TableParamError naming the box otherwise)."""
    what = f"{box.type} box {box.name!r}"
    text = " ".join((box.param("sql") or "").split())
    if not text:
        raise TableParamError(f"{what} needs parameter 'sql' ({_SHAPES[box.type]})")
    m = _STATEMENTS[box.type].match(text)
    if m is None:
        raise TableParamError(f"{what}: parameter 'sql'={text!r} is not {_SHAPES[box.type]}")
    parts = m.groupdict()
    where = parts.get("where")
    if box.type == "select":
        columns = tuple(c.strip() for c in split_top(parts["columns"]))
        return TableSql("select", parts["table"], columns=columns, where=where)
    if box.type == "insert":
        return TableSql("insert", parts["table"], values=tuple(v.strip() for v in split_top(parts["values"])))
    if box.type == "update":
        sets = []
        for item in split_top(parts["sets"]):
            a = _ASSIGNMENT.match(item)
            if a is None or (a.group(1) and a.group(1) != parts["table"]):
                raise TableParamError(f"{what}: parameter 'sql': {item.strip()!r} is not "
                                      f"{parts['table']}.FIELD = EXPRESSION")
            sets.append((a.group(2), a.group(3)))
        return TableSql("update", parts["table"], sets=tuple(sets), where=where)
    return TableSql("delete", parts["table"], where=where)


def split_top(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses and quotes.

    >>> split_top("a, f(b, c), 'x,y'")
    ['a', ' f(b, c)', " 'x,y'"]
    """
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


# -- binding a box to its table's declaration ---------------------------------------------------


def bind(box: Box, catalog: Catalog) -> Box:
    """``box`` with its table's declaration as ``table.*`` parameters (unchanged: not a table box, or the table
    or its schema is not in ``catalog``; validation says so at the box)."""
    if box.type not in ACCESSING or len(box.access) != 1:
        return box
    table = catalog.tables.get(box.access[0])
    schema = catalog.schemas.get(table.schema) if table is not None else None
    if table is None or schema is None:
        return box
    params = tuple(p for p in box.params if not p[0].startswith("table."))
    params += (("table.name", table.name), ("table.key", ",".join(table.keys)))
    params += tuple((f"table.field.{i}", f"{f.name}:{f.declared_type}:{f.size or ''}")
                    for i, f in enumerate(schema.fields))
    return dataclasses.replace(box, params=params)


def bound_boxes(catalog: Catalog) -> dict[str, Box]:
    """Every box of ``catalog``, table boxes bound to their tables (what a node builds its operators from)."""
    return {name: bind(box, catalog) for name, box in catalog.boxes.items()}


@dataclass(frozen=True, slots=True)
class BoundTable:
    """A bound box's table: its name, schema and key fields."""

    name: str
    schema: Schema
    keys: tuple[str, ...]


def bound_table(box: Box) -> BoundTable:
    """The table a bound box accesses (TableParamError when it accesses none, or not one declared)."""
    what = f"{box.type} box {box.name!r}"
    if len(box.access) != 1:
        raise TableParamError(f"{what} accesses {len(box.access)} tables (<access table>); a table box accesses "
                              f"exactly one")
    name = box.param("table.name")
    if name is None:
        raise TableParamError(f"{what} accesses table {box.access[0]!r}, which is not declared with its schema")
    fields = []
    for i in range(len(box.params)):
        spec = box.param(f"table.field.{i}")
        if spec is None:
            break
        fname, rest = spec.split(":", 1)
        ftype, size = rest.rsplit(":", 1)
        if not FieldType.is_name(ftype):
            raise TableParamError(f"{what}: table {name!r} has array field {fname!r} ({ftype}); a table's rows "
                                  f"carry scalar fields only")
        fields.append(Field(fname, FieldType(ftype), int(size) if size else None))
    schema = Schema(name, tuple(fields))
    keys = tuple(k for k in (box.param("table.key") or "").split(",") if k)
    if not keys:
        raise TableParamError(f"{what}: table {name!r} has no key (<key field>): its rows are kept by key, an "
                              f"insert of a present key replacing the row")
    for key in keys:
        if schema.field(key) is None:
            raise TableParamError(f"{what}: table {name!r}'s key {key!r} is not one of its fields "
                                  f"({', '.join(f.name for f in schema.fields)})")
    return BoundTable(name, schema, keys)


# -- validation -------------------------------------------------------------------------------


def flag(box: Box, name: str) -> bool:
    """A boolean parameter (Borealis writes 0/1)."""
    text = box.param(name)
    if text is None or text.strip().lower() in _FALSE:
        return False
    if text.strip().lower() in _TRUE:
        return True
    raise TableParamError(f"{box.type} box {box.name!r}: parameter {name!r}={text!r} must be 0 or 1")


def scope_of(sql: TableSql, inputs: Schema, table: Schema) -> Scope:
    """What a table box's expressions read: ``input.x`` and ``T.y`` (an insert's values: the input alone)."""
    if sql.kind == "insert":
        return Scope.single(inputs)
    return Scope((("input", inputs), (sql.table, table)))


def infer_joinstatic(box: Box, inputs: list[Schema]) -> list[Schema]:
    """A bound ``joinstatic``: ``out-field.N`` over ``left.`` (the input) and ``right.`` (a table row), or the
    input's fields then the table's (TableParamError)."""
    what = f"joinstatic box {box.name!r}"
    if len(inputs) != 1:
        raise TableParamError(f"{what} has {len(inputs)} in streams: Borealis's JoinStatic joined its first with "
                              f"rows its code reads from a file it names (fac2.txt), the second giving only their "
                              f"schema; Boreas's joins its one in stream with the <table> it accesses")
    table = bound_table(box)
    scope = Scope.join(inputs[0], table.schema)
    expressions = [v for n, v in sorted(((n, v) for n, v in box.params if re.match(r"^out-field\.\d+$", n)),
                                        key=lambda p: int(p[0].rsplit(".", 1)[1]))]
    names = [box.param(f"out-field-name.{i}") for i in range(len(expressions))]
    try:
        check_expression(box.param("predicate") or "", scope)
        if not expressions:
            return [Schema(f"{box.name}.out0", inputs[0].fields + table.schema.fields)]
        if None in names:
            raise TableParamError(f"{what} has {len(expressions)} out-field.N but not as many out-field-name.N")
        return [Schema(f"{box.name}.out0", tuple(infer_field(str(n), parse_expression(e), scope)
                                                 for e, n in zip(expressions, names)))]
    except ExpressionError as exc:
        raise TableParamError(f"{what}: {exc}") from None


def infer_table_box(box: Box, inputs: list[Schema]) -> list[Schema]:
    """The out schemas of a bound table box, once its SQL and parameters are checked (TableParamError)."""
    what = f"{box.type} box {box.name!r}"
    if box.type == "joinstatic":
        return infer_joinstatic(box, inputs)
    for refused, why in (("pass-result-sizes", "not supported yet (Boreas's select emits the matching rows, "
                          "and with pass-on-no-results the inputs nothing matched)"),
                         ("output-expression.0", "not supported: Borealis's UpdateQBox marks its output "
                          "expressions unfinished, so what they mean is not settled (use pass-input)")):
        if box.param(refused) is not None:
            raise TableParamError(f"{what}: parameter {refused!r} is {why}")
    table = bound_table(box)
    sql = parse_sql(box)
    if sql.table != table.name:
        raise TableParamError(f"{what}: parameter 'sql' names table {sql.table!r}, but the box accesses "
                              f"table {table.name!r}")
    flags = {name: flag(box, name) for name in _FLAGS[box.type]}
    scope = scope_of(sql, inputs[0], table.schema)
    try:
        if sql.where is not None:
            check_expression(sql.where, scope)
        if sql.kind == "insert":
            if len(sql.values) != len(table.schema.fields):
                raise TableParamError(f"{what}: parameter 'sql' gives {len(sql.values)} values, table "
                                      f"{table.name!r} has {len(table.schema.fields)} fields")
            for f, text in zip(table.schema.fields, sql.values):
                _assignable(what, f, text, scope)
        for name, text in sql.sets:
            target = table.schema.field(name)
            if target is None:
                raise TableParamError(f"{what}: parameter 'sql' sets {name!r}, which is not a field of table "
                                      f"{table.name!r}")
            _assignable(what, target, text, scope)
    except ExpressionError as exc:
        raise TableParamError(f"{what}: parameter 'sql': {exc}") from None
    if sql.kind == "select":
        out = [Schema(f"{box.name}.out0", selected(box, sql, table))]
        return out + ([inputs[0]] if flags["pass-on-no-results"] else [])
    out = [table.schema] if flags.get("pass-deletions") else []
    return out + ([inputs[0]] if flags["pass-input"] else [])


def selected(box: Box, sql: TableSql, table: BoundTable) -> tuple[Field, ...]:
    """The table fields a select emits, in its order."""
    if sql.columns == ("*",):
        return table.schema.fields
    fields = []
    for column in sql.columns:
        m = _NAME.match(column)
        found = table.schema.field(m.group(2)) if m and m.group(1) in (None, table.name) else None
        if found is None:
            raise TableParamError(f"{box.type} box {box.name!r}: parameter 'sql' selects {column.strip()!r}, "
                                  f"which is not a field of table {table.name!r} (* or its fields)")
        fields.append(found)
    return tuple(fields)


def _assignable(what: str, target: Field, text: str, scope: Scope) -> None:
    got = infer_type(parse_expression(text), scope)
    if got == target.type or (got in NUMERIC and target.type in NUMERIC):
        return
    raise TableParamError(f"{what}: parameter 'sql': {text.strip()!r} is {got.value}, table field "
                          f"{target.name!r} is {target.type.value if target.type else target.declared_type}")


def check(catalog: Catalog, fail: Callable[[Origin, str], None]) -> None:
    """Validation's hook: a table's rows live on one node, so every box that accesses it must run there."""
    users: dict[str, list[Box]] = {}
    for box in catalog.boxes.values():
        for name in box.access if box.type in ACCESSING else ():  # (other boxes' <access> is only kept)
            users.setdefault(name, []).append(box)
    for name, boxes in users.items():
        table = catalog.tables.get(name)
        placed = {(b.name, b.type): catalog.placement(b.name) for b in boxes if catalog.placement(b.name)}
        for (box_name, box_type), nodes in placed.items():
            if len(nodes) > 1:
                fail(catalog.boxes[box_name].origin,
                     f"{box_type} box {box_name!r} accesses table {name!r} but runs on several nodes "
                     f"({', '.join(nodes)}): a table's rows live on one node (docs/operators.md, \"Table boxes\")")
                return
        where = {nodes[0] for nodes in placed.values()}
        if table is not None and table.node:
            where.add(table.node)
        if len(where) > 1:
            on = "; ".join(f"{t} box {b!r} on {n[0]}" for (b, t), n in sorted(placed.items()))
            if table is not None and table.node:
                on += f"; the table on {table.node}"
            fail(boxes[0].origin, f"table {name!r} is accessed from several nodes ({on}): a table's rows live on "
                                  f"one node, so every box that accesses it runs there (docs/operators.md, "
                                  f"\"Table boxes\")")
