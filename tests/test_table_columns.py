"""select, joinstatic, delete, insert and update on Arrow columns (issue 30) give exactly what their row path gives.

The oracle is the same box built with ``columnar=False`` (the row path,
itself checked against a reference from the documented semantics in
tests/test_table_operators.py), each with a table receiving the same
changes; after every batch both tables are the same (rows, order, version).  Hypothesis draws the table's changes between
batches (so the table's batch is made again per version), batches of input
tuples cut anywhere, as Arrow columns or as rows, with null values and zero
divisors (a batch read by the row path), and a ``where`` with an equality
to narrow pairs by, without one, none at all, or one that does not
translate (the box on rows).  Separately: the columnar path is the one
taken, and a table a batch cannot hold is read as rows.
"""

from __future__ import annotations

import html

import pyarrow as pa
import pytest
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.table_params import bind
from boreas.catalog.validate import stream_schemas
from boreas.m3.boxtype import box_types
from boreas.node.operators import table
from boreas.node.operators.table import (DeleteOperator, InsertOperator, JoinStaticOperator, SelectOperator,
                                         UpdateOperator)
from boreas.node.operators.table_rows import KeyedRows
from boreas.wire.columns import Columns, arrow_schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.operators import normal
from support.property_scale import examples

SELECT_WHERES = ["T.k == input.k", "T.k == input.k or T.v == input.v", "T.w > input.d and T.k = input.k",
                 "T.v / input.v > 0", "T.w < input.d", None]
JOIN_PREDICATES = ["right.k = left.k", "right.k = left.k or right.v > left.v", "left.d / right.w > 1.0", "1 = 1"]
ON_ROWS = {"select": ["min(T.k, T.w) + 1.0 > input.d",
                      # (the row path tests the value made its inferred type, int: 0.5 and 0.5 is 0, false there)
                      "input.d and T.w", "T.k = input.k or input.d"],
           "joinstatic": ["min(right.k, right.w) + 1.0 > left.d", "left.d or right.w"]}
COLUMNS = ["*", "v, T.k", "w"]
OUTS = [(), ("left.k * 10 + right.v", "right.w"), ("left.d / right.w",)]


def app(box: str, nullable: bool = False) -> str:
    """``nullable``: v, w and d are declared nullable, and the input has a nullable string ``s`` (text casts).  The
    input's take SQL's three-valued logic; the table's are not nullable as its boxes see them (catalog/table_params.py
    ``bound_table`` drops the flag), so a None there is Python's, in the row path and on columns alike."""
    null = ' nullable="true"' if nullable else ""
    text = '<field name="s" type="string" size="8" nullable="true"/>' if nullable else ""
    return f"""<borealis>
  <schema name="Row"><field name="k" type="int"/><field name="v" type="int"{null}/><field name="w" type="double"{null}/>
  </schema>
  <schema name="Ask"><field name="k" type="int"/><field name="v" type="int"{null}/><field name="d" type="double"{null}/>
  {text}</schema>
  <input stream="Read" schema="Ask"/>
  <table name="T" schema="Row"><key field="k"/></table>
  {box}
</borealis>"""


def select_box(where: str | None, columns: str) -> str:
    sql = f"select {columns} from T" + (f" where {where}" if where else "")
    return (f'<box name="b" type="select"><in stream="Read"/><access table="T"/><out stream="Found"/>'
            f'<out stream="Missed"/><parameter name="sql" value="{html.escape(sql)}"/>'
            f'<parameter name="pass-on-no-results" value="1"/></box>')


def delete_box(where: str | None, deletions: bool, passed: bool) -> str:
    sql = "delete from T" + (f" where {where}" if where else "")
    outs = "".join(f'<out stream="{name}"/>' for name, on in (("Gone", deletions), ("DropIn", passed)) if on)
    return (f'<box name="b" type="delete"><in stream="Read"/><access table="T"/>{outs}'
            f'<parameter name="sql" value="{html.escape(sql)}"/>'
            f'<parameter name="pass-deletions" value="{int(deletions)}"/>'
            f'<parameter name="pass-input" value="{int(passed)}"/></box>')


def insert_box(values: str, passed: bool) -> str:
    out = '<out stream="PutDone"/>' if passed else ""
    return (f'<box name="b" type="insert"><in stream="Read"/><access table="T"/>{out}'
            f'<parameter name="sql" value="{html.escape(f"insert into T values ({values})")}"/>'
            f'<parameter name="pass-input" value="{int(passed)}"/></box>')


def update_box(sql: str, passed: bool) -> str:
    out = '<out stream="SetDone"/>' if passed else ""
    return (f'<box name="b" type="update"><in stream="Read"/><access table="T"/>{out}'
            f'<parameter name="sql" value="{html.escape(sql)}"/>'
            f'<parameter name="pass-input" value="{int(passed)}"/></box>')


def joinstatic_box(predicate: str, outs: tuple[str, ...]) -> str:
    fields = "".join(f'<parameter name="out-field.{i}" value="{html.escape(e)}"/>'
                     f'<parameter name="out-field-name.{i}" value="o{i}"/>' for i, e in enumerate(outs))
    return (f'<box name="b" type="joinstatic"><in stream="Read"/><access table="T"/><out stream="Paired"/>'
            f'<parameter name="predicate" value="{html.escape(predicate)}"/>{fields}</box>')


def build(text: str, nullable: bool = False):
    """The box built columnar and on rows, each with its table's rows (the same changes go to both)."""
    plan = plan_submission(Catalog(), [read_document(app(text, nullable), "app.xml")], box_types())
    assert not plan.problems, plan.problems
    schemas = stream_schemas(plan.catalog, box_types())
    box = bind(plan.catalog.boxes["b"], plan.catalog)
    kind = {"select": SelectOperator, "joinstatic": JoinStaticOperator, "delete": DeleteOperator,
            "insert": InsertOperator, "update": UpdateOperator}[box.type]
    inputs, outputs = [schemas[p.stream] for p in box.inputs], [schemas[s] for s in box.outputs]
    op, reference = kind(box, inputs, outputs), kind(box, inputs, outputs, columnar=False)
    rows, theirs = KeyedRows(op.key_indexes), KeyedRows(op.key_indexes)
    op.attach(rows)
    reference.attach(theirs)
    return op, reference, (rows, theirs), inputs[0]


small = st.integers(-3, 3)
maybe = st.one_of(small, st.none())
doubles = st.one_of(st.sampled_from([0.0, 0.5, 2.0, float("nan")]), st.floats(-4, 4), st.none())
changes = st.lists(st.one_of(st.tuples(st.just("put"), st.tuples(small, maybe, doubles)),
                             st.tuples(st.just("drop"), small)), max_size=6)
steps = st.lists(st.tuples(changes, st.lists(st.tuples(maybe, maybe, doubles), max_size=8), st.booleans()),
                 min_size=1, max_size=6)


def apply(rows: KeyedRows, change: list) -> None:
    for what, value in change:
        if what == "put":
            rows.put(value)
        elif any(r[0] == value for r in rows.rows()):
            rows.remove(next(r for r in rows.rows() if r[0] == value))


def run(op, reference, tables, schema, history) -> None:
    for change, tuples, as_rows in history:
        for rows in tables:
            apply(rows, change)
        names = [f.name for f in schema.fields]
        batch = Columns(pa.RecordBatch.from_pylist([dict(zip(names, t)) for t in tuples], schema=arrow_schema(schema)))
        got = op.process(0, batch.rows() if as_rows else batch, 0.0)
        want = reference.process(0, batch.rows(), 0.0)
        assert normal(got) == normal(want)
        assert tables[0].version == tables[1].version  # (nan != nan: the rows compared as normal() reads them)
        assert normal([(0, tables[0].rows())]) == normal([(0, tables[1].rows())])


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SELECT_WHERES + ON_ROWS["select"]), st.sampled_from(COLUMNS), steps)
def test_select_on_columns_emits_what_the_row_path_emits(where, columns, history):
    op, reference, rows, schema = build(select_box(where, columns))
    assert op.columnar == (where not in ON_ROWS["select"]) and not reference.columnar
    run(op, reference, rows, schema, history)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(JOIN_PREDICATES + ON_ROWS["joinstatic"]), st.sampled_from(OUTS), steps)
def test_joinstatic_on_columns_emits_what_the_row_path_emits(predicate, outs, history):
    op, reference, rows, schema = build(joinstatic_box(predicate, outs))
    assert op.columnar == (predicate not in ON_ROWS["joinstatic"]) and not reference.columnar
    run(op, reference, rows, schema, history)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SELECT_WHERES + ON_ROWS["select"]), st.booleans(), st.booleans(), steps)
def test_delete_on_columns_deletes_and_emits_what_the_row_path_does(where, deletions, passed, history):
    """A row a tuple deletes matches no later tuple of the batch: each goes once, in the row path's order."""
    op, reference, rows, schema = build(delete_box(where, deletions, passed))
    assert op.columnar == (where not in ON_ROWS["select"]) and not reference.columnar
    run(op, reference, rows, schema, history)


INSERTS = ["k, v, d", "v, k, d * 2.0", "k + 1, v * v, d / v", "k % 2, -v, 1.5"]
INSERTS_ON_ROWS = ["k, v, v"]  # an int into a double field (the row path's float())


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(INSERTS + INSERTS_ON_ROWS), st.booleans(), steps)
def test_insert_on_columns_puts_what_the_row_path_puts(values, passed, history):
    """Rows of a key already in the table (or earlier in the batch) replace it in place, as the row path's."""
    op, reference, rows, schema = build(insert_box(values, passed))
    assert op.columnar == (values in INSERTS) and not reference.columnar
    run(op, reference, rows, schema, history)


def test_the_columnar_path_is_taken_and_emits_columns():
    op, _, (rows, _), schema = build(select_box("T.k == input.k or T.v == input.v", "*"))
    for row in [(1, 5, 0.5), (2, 6, 1.5), (3, 5, 2.5)]:
        rows.put(row)
    batch = pa.RecordBatch.from_pylist([{"k": 2, "v": 5, "d": 0.0}, {"k": 9, "v": 9, "d": 0.0}],
                                       schema=arrow_schema(schema))
    [(found_port, found), (missed_port, missed)] = op.process(0, Columns(batch), 0.0)
    assert (found_port, missed_port) == (0, 1)
    assert isinstance(found, Columns) and found.rows() == [(1, 5, 0.5), (2, 6, 1.5), (3, 5, 2.5)]
    assert isinstance(missed, Columns) and missed.rows() == [(9, 9, 0.0)]
    paired, _, (rows, _), schema = build(joinstatic_box("right.k = left.k", ("left.d + right.w",)))
    rows.put((1, 5, 0.5))
    assert paired.process(0, Columns(batch.slice(0, 1)), 0.0) == []  # no key 2 in the table
    rows.put((2, 7, 1.0))
    [(port, out)] = paired.process(0, Columns(batch), 0.0)
    assert port == 0 and isinstance(out, Columns) and out.rows() == [(1.0,)]


def test_a_table_the_columns_cannot_hold_is_read_as_rows():
    """An int stored in a double field (as a restored table may hold it): that version is read on rows."""
    op, reference, tables, schema = build(select_box("T.k == input.k", "*"))
    for rows in tables:
        rows.put((1, 5, 2))
    got = op.process(0, [(1, 0, 0.0)], 0.0)
    assert got == reference.process(0, [(1, 0, 0.0)], 0.0) == [(0, [(1, 5, 2)])]
    assert op.columnar


def test_delete_on_columns_takes_rows_in_the_order_of_the_tuple_that_first_matches_them():
    """Tuple (3) deletes row 3, then tuple (1) row 1, and (9) nothing: the deleted rows come in that order, not the
    table's; a row two tuples match goes once."""
    op, reference, tables, schema = build(delete_box("T.k == input.k or T.v > input.v", True, True))
    for rows in tables:
        for row in [(1, 1, 1.0), (3, 3, 3.0), (2, 2, 2.0)]:
            rows.put(row)
    batch = pa.RecordBatch.from_pylist([{"k": 3, "v": 9, "d": 0.0}, {"k": 1, "v": 9, "d": 0.0},
                                        {"k": 3, "v": 9, "d": 0.0}, {"k": 9, "v": 1, "d": 0.0}],
                                       schema=arrow_schema(schema))
    got = op.process(0, Columns(batch), 0.0)
    assert got[0][0] == 0 and isinstance(got[0][1], Columns)
    assert normal(got) == normal(reference.process(0, Columns(batch).rows(), 0.0)) == normal([
        (0, [(3, 3, 3.0), (1, 1, 1.0), (2, 2, 2.0)]), (1, Columns(batch).rows())])
    assert tables[0].state() == tables[1].state() and tables[0].rows() == []


def test_a_table_named_input_stays_on_rows():
    """A table named ``input``, the input tuple's own qualifier: ``input.v`` is the input's (the row path's scope);
    the columns' pair translation would have one side for both, so such boxes read rows (they crashed when built)."""
    for text in (select_box("input.v > 1", "*"), delete_box("input.v > 1", True, True)):
        renamed = text.replace('table="T"', 'table="input"').replace("from T", "from input")
        plan = plan_submission(Catalog(), [read_document(app(renamed).replace('<table name="T"', '<table name="input"'),
                                                         "app.xml")], box_types())
        assert not plan.problems, plan.problems
        schemas = stream_schemas(plan.catalog, box_types())
        box = bind(plan.catalog.boxes["b"], plan.catalog)
        kind = SelectOperator if box.type == "select" else DeleteOperator
        inputs, outputs = [schemas[p.stream] for p in box.inputs], [schemas[s] for s in box.outputs]
        op, reference = kind(box, inputs, outputs), kind(box, inputs, outputs, columnar=False)
        tables = KeyedRows(op.key_indexes), KeyedRows(op.key_indexes)
        op.attach(tables[0])
        reference.attach(tables[1])
        assert not op.columnar
        for rows in tables:
            for row in [(1, 0, 1.0), (2, 5, 2.0)]:
                rows.put(row)
        batch = Columns(pa.RecordBatch.from_pylist([{"k": 1, "v": 0, "d": 0.0}, {"k": 2, "v": 3, "d": 0.0}],
                                                   schema=arrow_schema(inputs[0])))
        assert normal(op.process(0, batch, 0.0)) == normal(reference.process(0, batch.rows(), 0.0))


UPDATES = ["update T set T.v = input.v where T.k = input.k",  # a key repeated in a batch: that batch per tuple
           "update T set T.v = T.v + input.v, T.w = T.w * input.d where T.k = input.k",
           "update T set T.k = input.v where T.k = input.k",  # keys moved, onto other rows' keys too
           "update T set T.k = T.k + 1, T.v = input.v where T.v = input.k",  # several rows per tuple, moved
           "update T set T.w = input.d / T.v where T.v > input.v",  # several rows; zero divisors
           "update T set T.v = input.k",  # no where: every row, so only a batch of one tuple is on columns
           "update T set T.k = T.k where cast(T.w as varchar) = 'x'"]
UPDATES_ON_ROWS = ["update T set T.w = T.v where T.k = input.k",  # an int into a double field (the row path's float)
                   "update T set T.k = T.k where min(T.k, T.w) + 1.0 > input.d"]  # no translation


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(UPDATES + UPDATES_ON_ROWS), st.booleans(), steps)
def test_update_on_columns_leaves_the_table_the_row_path_leaves(sql, passed, history):
    """Batches cut anywhere, keys repeated in a batch, keys moved (onto a held key too), wheres matching several
    rows: the same rows in the same order, the same version, the same pass-input, after every batch."""
    op, reference, rows, schema = build(update_box(sql, passed))
    assert op.columnar == (sql in UPDATES) and not reference.columnar
    run(op, reference, rows, schema, history)


def _batch(schema, tuples):
    return pa.RecordBatch.from_pylist([dict(zip(("k", "v", "d"), t)) for t in tuples], schema=arrow_schema(schema))


def test_update_batches_that_repeat_a_match_or_rematch_an_updated_row_are_detected_and_take_the_tuple_path():
    """A: a row two tuples of the batch match; B: a row an update wrote that a later tuple matches (also when the
    first tuple's match is moved onto it).  Either raises PerTuple before anything is written; a batch with
    neither is applied on columns, in the row path's order (tuple, then table order), moves at the end."""
    from boreas.node.operators.table_update import PerTuple
    op, reference, tables, schema = build(update_box("update T set T.k = input.v, T.v = input.v where T.v = input.k",
                                                     False))
    for rows in tables:
        for row in [(1, 1, 1.0), (2, 2, 2.0), (3, 1, 3.0)]:
            rows.put(row)
    columns = op.columns
    for tuples in ([(1, 0, 0.0), (1, 5, 0.0)],  # A: rows 1 and 3 matched twice
                   [(2, 7, 0.0), (7, 8, 0.0)]):  # B: row 2 becomes (7, 7), which the next tuple matches
        try:
            columns.changes(_batch(schema, tuples), tables[0])
        except PerTuple:
            pass
        else:
            raise AssertionError(f"{tuples} was not detected")
    clean = [(2, 5, 0.0), (1, 6, 0.0)]  # (2,2) -> (5,5), then (1,1) -> (6,6) and (3,1) -> (6,6) over it
    assert columns.changes(_batch(schema, clean), tables[0]) == [
        ((2, 2, 2.0), (5, 5, 2.0)), ((1, 1, 1.0), (6, 6, 1.0)), ((3, 1, 3.0), (6, 6, 3.0))]
    for tuples in (clean, [(5, 1, 0.0), (6, 5, 0.0)], [(6, 7, 0.0), (5, 5, 0.0)]):
        op.process(0, Columns(_batch(schema, tuples)), 0.0)
        reference.process(0, Columns(_batch(schema, tuples)).rows(), 0.0)
        assert tables[0].state() == tables[1].state()
        if tuples is clean:
            assert tables[0].rows() == [(5, 5, 2.0), (6, 6, 3.0)] and tables[0].version == 6


# -- nullable fields, the math functions, text casts, overflow-prone ints (issue 30, item 7's per-box list) ----------
# Every expression below reads a nullable field or needs the row code for some rows (sqrt(-1), ln(0), pow of a
# negative, a double's %, int64 overflow, text that is not a number): the box is columnar, those rows alone are
# computed by its row code (arrow_exprs, "Exact, row by row").

BIG = 4611686018427387904  # 2**62: a product with it overflows int64 for |x| >= 2
NULL_WHERES = ["T.v = input.v", "T.k = input.k and coalesce(T.v, input.v) > 0", "sqrt(T.w) > input.d",
               "ln(T.w) < input.d or T.v is null", "T.w % input.d > 0.5", "pow(T.w, input.d) > 1.0",
               "exp(input.d) > T.w", f"input.k * {BIG} > T.v", "cast(input.s as int) = T.k",
               "cast(input.s as double) < T.w and not (T.v > input.v)"]
NULL_JOINS = ["right.v = left.v", "sqrt(right.w) > left.d", "coalesce(right.v, left.v) = left.k",
              "cast(left.s as int) = right.k or right.w % left.d > 1.0"]
NULL_OUTS = [(), ("coalesce(left.v, right.v)", "sqrt(right.w)"), ("cast(left.s as double) * right.w",),
             (f"left.k * {BIG} + right.k",)]
NULL_INSERTS = ["k, v, d", "k, coalesce(v, k), sqrt(d)", "k, cast(s as int), exp(d)", f"k % 3, v * {BIG}, d % 2.0",
                "k, v + k, ln(d)"]
NULL_UPDATES = ["update T set T.v = coalesce(input.v, T.v) where T.k = input.k",
                "update T set T.w = sqrt(T.w) where T.k = input.k",
                "update T set T.w = ln(input.d) where T.v = input.v",
                f"update T set T.v = cast(input.s as int) * {BIG} where T.k = input.k"]

null_doubles = st.one_of(st.sampled_from([0.0, -0.0, 0.5, -1.0, 2.0, 800.0, float("nan"), float("inf"),
                                          float("-inf")]), st.floats(-4, 4), st.none())
texts = st.one_of(st.sampled_from(["1", " 2 ", "-3", "1.5", "x", "", "1e3"]), st.none())
null_changes = st.lists(st.one_of(st.tuples(st.just("put"), st.tuples(small, maybe, null_doubles)),
                                  st.tuples(st.just("drop"), small)), max_size=6)
null_steps = st.lists(st.tuples(null_changes, st.lists(st.tuples(maybe, maybe, null_doubles, texts), max_size=8),
                                st.booleans()), min_size=1, max_size=4)


def null_box(kind: str, text: str, outs: tuple[str, ...]) -> str:
    return {"select": lambda: select_box(text, "*"), "delete": lambda: delete_box(text, True, True),
            "joinstatic": lambda: joinstatic_box(text, outs), "insert": lambda: insert_box(text, False),
            "update": lambda: update_box(text, False)}[kind]()


NULL_CASES = ([("select", w) for w in NULL_WHERES] + [("delete", w) for w in NULL_WHERES[::3]]
              + [("joinstatic", p) for p in NULL_JOINS] + [("insert", v) for v in NULL_INSERTS]
              + [("update", u) for u in NULL_UPDATES])


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(NULL_CASES), st.sampled_from(NULL_OUTS), null_steps)
def test_nullable_fields_math_and_text_casts_on_columns_are_the_row_path(case, outs, history):
    op, reference, rows, schema = build(null_box(*case, outs), nullable=True)
    assert op.columnar and not reference.columnar
    run(op, reference, rows, schema, history)


@pytest.mark.parametrize("kind, text", [("select", "sqrt(T.w) > input.d or T.v = input.v"),
                                        ("joinstatic", "cast(left.s as int) = right.k"),
                                        ("insert", "k, coalesce(v, k), ln(d)"),
                                        ("update", "update T set T.w = sqrt(T.w) where T.v = input.v")])
def test_a_batch_with_nulls_and_failing_math_is_not_read_as_rows(monkeypatch, kind, text):
    """NULLs, sqrt(-1), ln(0), text that is no int: the rows that need it get the row code, the batch stays
    columns (the table boxes' one way to rows, ``as_rows``, is never called)."""
    op, reference, tables, schema = build(null_box(kind, text, ("left.v", "right.w")), nullable=True)
    for rows in tables:
        for row in [(1, 5, -1.0), (2, None, 4.0), (3, 7, 0.0), (4, 2, None)]:
            rows.put(row)
    tuples = [(1, 5, -1.0, "3"), (2, None, 0.0, "x"), (3, 7, None, " 4 "), (4, 2, 1.0, None)]
    batch = Columns(pa.RecordBatch.from_pylist([dict(zip(("k", "v", "d", "s"), t)) for t in tuples],
                                               schema=arrow_schema(schema)))
    want = reference.process(0, batch.rows(), 0.0)
    monkeypatch.setattr(table, "as_rows", lambda rows: pytest.fail("the batch was read as rows"))
    got = op.process(0, batch, 0.0)
    assert normal(got) == normal(want)
    assert all(isinstance(out, Columns) for _, out in got)
    assert normal([(0, tables[0].rows())]) == normal([(0, tables[1].rows())])
