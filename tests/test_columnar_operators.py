"""filter, map and union on Arrow columns (issue 30) give exactly what their row paths give.

The oracle is the same operator fed the batch's rows (``Columns.rows()``):
the row path is the definition of the semantics (a failing predicate is
false, a failing map field None, Python's ints and doubles).  Hypothesis
draws batches with the values where a columnar evaluation could drift from
it -- ints at their type's limits, zero divisors, negative dividends,
doubles that are nan, inf, -0.0 or beyond a single's range, strings with
LIKE's and regexes' special characters, and nulls (what an upstream map
writes into a failing field) -- for expressions that run on columns and
ones that fall back to rows.  Separately: the columnar path is really taken
for the benchmark's boxes, and union passes columns through unchanged.

``BOREAS_PROPERTY_SCALE`` multiplies the example counts as in
``test_properties.py`` (``make test-fast`` runs a quarter of them).
"""

from __future__ import annotations


import pyarrow as pa
import pytest
from boreas.catalog.boxtypes import builtin_registry
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.operators.filter import FilterOperator
from boreas.node.operators.map import MapOperator
from boreas.node.operators.size_choice import LOWEST, PER_OPERATION, SizeChoice
from boreas.node.operators.union import UnionOperator
from boreas.wire.columns import Columns, arrow_schema, as_rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.operators import normal
from support.property_scale import examples

TYPES = builtin_registry()
R = Schema("R", (
    Field("b", FieldType.BYTE), Field("i", FieldType.INT), Field("l", FieldType.LONG),
    Field("d", FieldType.DOUBLE), Field("f", FieldType.SINGLE),
    Field("s", FieldType.STRING, 8), Field("t", FieldType.STRING, 4),
))

# -- batches ------------------------------------------------------------------------------


def ints(bits: int) -> st.SearchStrategy[int]:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    edges = [low, low + 1, high, high - 1, 0, -1] + ([2**53 + 1, -(2**53) - 1] if bits == 64 else [])
    return st.one_of(st.integers(-5, 5), st.integers(low, high), st.sampled_from(edges))


TAME = [st.integers(-100, 100).filter(bool)] * 3 + [
    st.one_of(st.floats(-100, 100), st.integers(-200, 200).map(lambda k: k / 2)),
    st.floats(-100, 100, width=32)] + [st.text(alphabet=st.sampled_from("ab.%_\né1"), max_size=6)] * 2
EDGY = [ints(8), ints(32), ints(64),
        st.one_of(st.floats(-100, 100), st.floats(allow_nan=True, allow_infinity=True),
                  st.sampled_from([0.0, -0.0, 0.5, -0.5, 2.5, 0.49999999999999994, 1e300, 2.0**53 + 2])),
        st.floats(width=32, allow_nan=True, allow_infinity=True),
        st.text(alphabet=st.sampled_from("ab.%_\n\\é-1 *"), max_size=10),
        st.text(max_size=10).filter(lambda t: t.isprintable())]


@st.composite
def batches(draw, schema: Schema = R, max_rows: int = 25) -> Columns:
    """A batch of ``schema`` as Columns.  Each column draws tame values (no zero divisor, no nan, no
    overflow: the columnar path runs) or edgy ones, possibly with nulls (as a map's failing field writes)."""
    n = draw(st.integers(0, max_rows))
    target = arrow_schema(schema)
    arrays = []
    for tame, edgy, field in zip(TAME, EDGY, target):
        values = tame
        if draw(st.booleans()):
            values = st.one_of(st.none(), edgy) if draw(st.booleans()) else edgy
        arrays.append(pa.array(draw(st.lists(values, min_size=n, max_size=n)), type=field.type))
    return Columns(pa.RecordBatch.from_arrays(arrays, schema=target))


def build(type_: str, params: dict[str, str], schema: Schema = R, outs: int = 1):
    box = Box("b", type_, (InPort("in"),), tuple(f"out{i}" for i in range(outs)), tuple(params.items()))
    outputs = TYPES.infer(box, [schema])
    return {"filter": FilterOperator, "map": MapOperator}[type_](box, [schema], outputs)


def check(op, columns: Columns) -> list:
    """The operator fed ``columns`` emits exactly the rows it emits fed ``columns.rows()``, whichever path takes
    the batch (its columns, or its row code as a small batch is taken: :mod:`~boreas.node.operators.size_choice`);
    its output on columns."""
    want = op.process(0, columns.rows(), 0.0)
    outputs = []
    for on_rows in (True, False):  # (the row code first: the columns' run must not lean on rows it made)
        op.sizes = SizeChoice.fixed(on_rows)
        got = op.process(0, Columns(columns.batch, weights=columns.weights), 0.0)
        assert normal(got) == normal(want)
        for port, out in got:
            if isinstance(out, Columns):
                assert out.batch.schema.equals(arrow_schema(op.outputs[port]))
        outputs.append(got)
    return outputs[-1]


# -- filter --------------------------------------------------------------------------------

ON_COLUMNS = [  # every one translates; a batch may still fall back (a zero divisor, a null, ...)
    "d > -90.0 and d < 60.0", "i > l", "b < i", "i * 2 + l < 100", "d * i >= 0.5", "l > d", "l = d",
    "i / l > 0.5", "b / 3 < -0.3", "i % 3 = -1", "l % i = 0", "l % -3 <> 0", "not (d < 0.0) or i = 0",
    "s = 'ab' or s <> t", "s = t", "s like 'a%'", "s like '_b%'", "s like '%.%'", "s like '%\\%'",
    "s like 'a*'", "concat(s, t) = 'abab'", "s + t > 'b'", "concat(s, i) like '%1%'", "cast(d as int) = i",
    "cast(i as varchar) like '-%'", "cast(l as double) > d", "i in (0, 1, -1)", "s in ('a', '')",
    "d between -1.0 and 1.0", "s is null", "d is not null", "abs(i) > 5", "abs(l) > 5", "-l < i",
    "min(i, l) < 0", "max(d, f) > 1.0", "least(d, f, 0.0) = 0.0", "floor(d) = 0", "round(d) >= 1",
    "ceil(f) < 2", "i", "d", "s", "1 = 1", "false", "l - i > 0", "f * 2.0 > d", "-d = d", "l * l > 0",
    "l + 0.5 > d", "l / 3.0 > d", "i / 0 > 1.0", "-(-90.0) < d", "d / 2 > 1.0",
    "sqrt(d) > 1.0", "d % 2.0 > 0.5", "cast(s as int) > 0", "ln(d) < 0.0", "i and d",  # (rows before)
    "concat(s, d) like '%1%'", "min(i, d) < 0",  # (rows before: tests/test_columnar_text.py)
    "l % -1 = 0", "i % 1 = 0", "l % 1 <> 0",  # (a divisor of -1 or 1: no shortcut, -2**63 % -1 is 0)
]
ON_ROWS = ["(i > 0) = 1"]


@pytest.mark.parametrize("predicate", ON_COLUMNS + ON_ROWS)
@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns=batches())
def test_filter_on_columns_emits_what_the_row_path_emits(columns, predicate):
    op = build("filter", {"expression.0": predicate})
    assert op.columnar == (predicate in ON_COLUMNS)
    check(op, columns)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns=batches(), predicates=st.lists(st.sampled_from(ON_COLUMNS + ON_ROWS), min_size=1, max_size=3),
       false_port=st.booleans())
def test_filter_with_several_predicates_and_a_false_port(columns, predicates, false_port):
    params = {f"expression.{i}": p for i, p in enumerate(predicates)}
    params["pass-on-false-port"] = "1" if false_port else "0"
    op = build("filter", params, outs=len(predicates) + false_port)
    check(op, columns)


def test_a_false_port_gets_the_rest_as_columns():
    op = build("filter", {"expression.0": "i < 0", "expression.1": "i < 10", "pass-on-false-port": "1"}, outs=3)
    rows = [(0, i, 0, 0.0, 0.0, "", "") for i in (-3, 5, 20, -1, 7)]
    target = arrow_schema(R)
    columns = Columns(pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(zip(*rows), target)],
                                                 schema=target))
    got = check(op, columns)
    assert all(isinstance(out, Columns) for _, out in got)
    assert [(p, [r[1] for r in out.rows()]) for p, out in got] == [(0, [-3, -1]), (1, [5, 7]), (2, [20])]


# -- map -----------------------------------------------------------------------------------

VALUES_ON_COLUMNS = [
    "d * 9.0 / 5.0 + 32.0", "i", "l", "s", "f", "b", "i + l", "i * i", "b * b", "l * l", "i / l", "i % l",
    "l % b", "-l", "-i", "abs(l)", "d > 0.0 and i < l", "concat(s, '-', t)", "s + t", "concat(i, s)",
    "cast(d as bigint)", "cast(d as tinyint)", "cast(i as double)", "cast(l as double)", "cast(l as varchar)",
    "cast(f as float)", "cast(d as float)", "min(d, f)", "max(i, l)", "max(b, i)", "floor(d)", "round(d)",
    "ceil(f)", "i in (1, 2)", "s like '%a'", "1 = 1", "5", "2.5", "'txt'", "d", "i - 2.5", "l * 1.0",
    "s is null", "d / f", "l / 3", "l + 0.5", "b % 0", "-(3 * 2) + i", "i / 2",
]
VALUES_ON_COLUMNS += ["sqrt(d)", "d % 2.0", "cast(s as int)", "exp(d)"]  # (rows before: tests/test_columnar_exprs.py)
VALUES_ON_COLUMNS += ["concat(s, d)", "min(i, d)", "cast(d as varchar)"]  # (rows before: tests/test_columnar_text.py)
VALUES_ON_ROWS = ["s or t"]  # (s or t: text in an int field)


@pytest.mark.parametrize("expression", VALUES_ON_COLUMNS + VALUES_ON_ROWS)
@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns=batches(), others=st.lists(st.sampled_from(VALUES_ON_COLUMNS + VALUES_ON_ROWS), max_size=1))
def test_map_on_columns_emits_what_the_row_path_emits(columns, expression, others):
    picked = [expression, *others]
    params = {}
    for i, e in enumerate(picked):
        params[f"expression.{i}"], params[f"output-field-name.{i}"] = e, f"f{i}"
    op = build("map", params)
    assert op.columnar == all(e in VALUES_ON_COLUMNS for e in picked)
    check(op, columns)


# -- the columnar path is taken ------------------------------------------------------------

READING = Schema("Reading", (Field("sensor", FieldType.INT), Field("time", FieldType.INT),
                             Field("celsius", FieldType.DOUBLE)))


@settings(max_examples=examples(50), deadline=None)
@given(celsius=st.lists(st.floats(-150, 150), min_size=1, max_size=50))
def test_the_benchmarks_filter_and_map_run_on_columns(celsius):
    """bench/dataplane.py's boxes on clean readings: the output is columns, equal to the row path's."""
    n = len(celsius)
    batch = pa.RecordBatch.from_arrays(
        [pa.array(range(n), pa.int32()), pa.array([k // 10 for k in range(n)], pa.int32()), pa.array(celsius)],
        schema=arrow_schema(READING))
    valid = build("filter", {"expression.0": "celsius > -90.0 and celsius < 60.0"}, READING)
    convert = build("map", {"expression.0": "sensor", "output-field-name.0": "sensor",
                            "expression.1": "time", "output-field-name.1": "time",
                            "expression.2": "celsius * 9.0 / 5.0 + 32.0", "output-field-name.2": "fahrenheit"},
                    READING)
    passed = check(valid, Columns(batch))
    assert all(isinstance(out, Columns) for _, out in passed)
    if passed:
        converted = check(convert, passed[0][1])
        assert isinstance(converted[0][1], Columns)
        assert converted[0][1].rows() == [(s, t, c * 9.0 / 5.0 + 32.0) for s, t, c in passed[0][1].rows()]


def test_a_batch_that_passes_whole_goes_on_as_it_came():
    columns = Columns(pa.RecordBatch.from_arrays(
        [pa.array([1, 2], pa.int32()), pa.array([0, 0], pa.int32()), pa.array([1.0, 2.0])],
        schema=arrow_schema(READING)), ipc=b"the bytes it came with")
    op = build("filter", {"expression.0": "celsius > 0.0"}, READING)
    op.sizes = SizeChoice.fixed(False)  # (on columns: a batch this small goes the row code as built)
    assert op.process(0, columns, 0.0) == [(0, columns)]


def test_a_zero_divisor_makes_that_rows_field_none_and_the_batch_stays_columns():
    columns = Columns(pa.RecordBatch.from_arrays(
        [pa.array([1, 2], pa.int32()), pa.array([0, 1], pa.int32()), pa.array([1.0, 2.0])],
        schema=arrow_schema(READING)))
    op = build("map", {"expression.0": "sensor / time", "output-field-name.0": "q"}, READING)
    op.sizes = SizeChoice.fixed(False)  # (on columns: a batch this small goes the row code as built)
    [(port, out)] = op.process(0, columns, 0.0)
    assert isinstance(out, Columns) and out.rows() == [(None,), (2.0,)]  # a failing field is None, in its row


# -- a batch's size picks its path -------------------------------------------------------


def weighed(emitted) -> list:
    """Each port's rows (of :func:`normal`'s values: a NaN equals a NaN) with their weights."""
    return [(port, list(zip(rows, out.weight_list() if isinstance(out, Columns) else [1] * len(out))))
            for (port, rows), (_, out) in zip(normal(emitted), emitted)]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns=batches(), weights=st.lists(st.sampled_from([1, -1, 2, -3]), min_size=25, max_size=25),
       box=st.sampled_from([("filter", {"expression.0": "i * 2 + l < 100", "expression.1": "d > 0.0",
                                        "pass-on-false-port": "1"}),
                            ("map", {"expression.0": "l * l", "output-field-name.0": "sq",
                                     "expression.1": "concat(s, d)", "output-field-name.1": "t"})]))
def test_a_changelog_batch_keeps_its_weights_on_either_path(columns, weights, box):
    """A changelog batch taken by the row code (a small one) emits the rows and weights the columns emit."""
    type_, params = box
    op = build(type_, params, outs=3 if type_ == "filter" else 1)
    changes = Columns(columns.batch, weights=pa.array(weights[:len(columns)], pa.int64()))
    op.sizes = SizeChoice.fixed(True)
    on_rows = op.process(0, changes, 0.0)
    op.sizes = SizeChoice.fixed(False)
    on_columns = op.process(0, Columns(changes.batch, weights=changes.weights), 0.0)
    assert weighed(on_rows) == weighed(on_columns)
    assert all(isinstance(out, Columns) and out.weights is not None for _, out in on_rows + on_columns)


def test_batches_below_the_cut_over_go_the_row_code_and_larger_ones_the_columns():
    """The box as built: a batch below its cut-over leaves as rows (the row code's), one at or above it as
    columns; either way a subscriber sees the same rows."""
    op = build("filter", {"expression.0": "d > 0.0"})
    cut = op.sizes.rows_below
    rows = [(0, 1, 2, float(k) - 5.0, 0.0, "", "") for k in range(cut)]
    whole = Columns(pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(zip(*rows), arrow_schema(R))],
                                               schema=arrow_schema(R)))
    small = Columns(whole.batch.slice(0, cut - 1))
    [(port, out)] = op.process(0, small, 0.0)
    assert not isinstance(out, Columns) and out == [r for r in rows[:cut - 1] if r[3] > 0.0]
    [(port, out)] = op.process(0, whole, 0.0)
    assert isinstance(out, Columns) and out.rows() == [r for r in rows if r[3] > 0.0]


def test_the_cut_over_grows_with_the_operations_and_reads_no_clock():
    plain = build("map", {"expression.0": "i", "output-field-name.0": "i"})
    simple = build("filter", {"expression.0": "d > 0.0"})
    wide = build("filter", {"expression.0": "i * 2 + l < 100 and d > -1.0 and s like 'a%'"})
    assert plain.sizes.rows_below == LOWEST  # field references alone: no operation on columns
    assert simple.sizes.rows_below == PER_OPERATION
    assert wide.sizes.rows_below == 7 * PER_OPERATION  # *, +, <, >, like and two ands
    again = build("filter", {"expression.0": "i * 2 + l < 100 and d > -1.0 and s like 'a%'"})
    assert again.sizes == wide.sizes  # (a replay's box chooses as the first run's did)


# -- union ---------------------------------------------------------------------------------


@pytest.mark.parametrize("out_names", [("sensor", "time", "celsius"), ("a", "b", "c")])
def test_union_passes_columns_and_rows_through_in_order(out_names):
    out = Schema("Out", tuple(Field(n, f.type) for n, f in zip(out_names, READING.fields)))
    box = Box("u", "union", (InPort("x"), InPort("y")), ("out",), ())
    op = UnionOperator(box, [READING, READING], [out])
    assert op.takes_columns
    first = Columns(pa.RecordBatch.from_arrays(
        [pa.array([1], pa.int32()), pa.array([2], pa.int32()), pa.array([3.0])], schema=arrow_schema(READING)))
    second = [(4, 5, 6.0)]
    emitted = [e for port, batch in ((0, first), (1, second)) for e in op.process(port, batch, 0.0)]
    assert [as_rows(rows) for _, rows in emitted] == [[(1, 2, 3.0)], [(4, 5, 6.0)]]
    assert isinstance(emitted[0][1], Columns) and emitted[0][1].batch.schema.names == list(out_names)
    if out_names[0] == "sensor":
        assert emitted[0][1] is first  # the same batch, IPC bytes and all
    assert op.process(0, Columns(first.batch.slice(0, 0)), 0.0) == []
