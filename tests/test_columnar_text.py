"""Mixed int/double values, doubles written as text and LIKE of a column, on columns, against the row path.

Issue 30's "per box" list had filter and map boxes read rows for ``min``/``max``
or ``coalesce`` mixing ints and doubles, concat or a varchar cast of a double,
and ``like`` with a computed pattern (``node/operators/arrow_mixed.py``,
``arrow_text.py``).  The row code stays the definition: the same operator fed
``Columns.rows()`` is the oracle, over batches drawing ints near 2**53 and
2**63, doubles with exponents, -0.0, nan, inf, NULLs, and LIKE patterns with
``%``, ``_`` and backslashes.  Then: such a batch is not read as rows (a
counting test), and Python's ``repr`` of doubles against :func:`double_text`.
"""

from __future__ import annotations

import math
import struct
from functools import lru_cache

import pyarrow as pa
import pytest
from boreas.catalog.model import Field, FieldType, Schema
from boreas.node.operators import arrow_text
from boreas.node.operators.arrow_nodes import Eval
from boreas.wire.columns import Columns, arrow_schema
from boreas.node.operators.size_choice import SizeChoice
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.property_scale import examples
from test_columnar_operators import build, check

M = Schema("M", (
    Field("i", FieldType.INT), Field("l", FieldType.LONG), Field("d", FieldType.DOUBLE),
    Field("s", FieldType.STRING, 12), Field("p", FieldType.STRING, 8),
    Field("n", FieldType.INT, nullable=True), Field("z", FieldType.DOUBLE, nullable=True),
    Field("q", FieldType.STRING, 8, nullable=True),
))
LONGS = st.one_of(st.integers(-5, 5), st.integers(-(2**63), 2**63 - 1),
                  st.sampled_from([2**53, 2**53 + 1, -(2**53) - 1, 2**63 - 1, -(2**63), 2**62 + 1, 10**16]),
                  st.integers(2**53 - 3, 2**53 + 3), st.integers(-(2**53) - 3, -(2**53) + 3))
INTS = st.one_of(st.integers(-5, 5), st.integers(-(2**31), 2**31 - 1))
DOUBLES = st.one_of(
    st.floats(-10, 10), st.floats(allow_nan=True, allow_infinity=True),
    st.builds(lambda m, e: m * 10.0**e, st.floats(-10, 10), st.integers(-12, 22)),  # exponents either side of 1e16
    st.sampled_from([0.0, -0.0, 1e16, 1e-4, 1e-5, 9.999999999999999e-05, 2.0**53, 2.0**53 + 2, 9007199254740993.0,
                     1e15, 123456789012.25, 0.1 + 0.2, 5e-324, float("nan"), float("inf"), float("-inf")]))
TEXT = st.text(alphabet=st.sampled_from("ab1.%_\\\n-e"), max_size=6)
PATTERN = st.text(alphabet=st.sampled_from("ab1.%_\\\n"), max_size=5)


@st.composite
def batches(draw, max_rows: int = 20) -> Columns:
    """Batches of :data:`M`; the pattern columns drawn from a few patterns (so a batch repeats them) or free."""
    n = draw(st.integers(0, max_rows))
    few = draw(st.lists(PATTERN, min_size=1, max_size=3))
    patterns = st.one_of(st.sampled_from(few), PATTERN)
    values = [INTS, LONGS, DOUBLES, TEXT, patterns, st.one_of(st.none(), INTS), st.one_of(st.none(), DOUBLES),
              st.one_of(st.none(), patterns)]
    target = arrow_schema(M)
    arrays = [pa.array(draw(st.lists(v, min_size=n, max_size=n)), type=f.type) for v, f in zip(values, target)]
    return Columns(pa.RecordBatch.from_arrays(arrays, schema=target))


PREDICATES = [
    "min(l, d) < 0.0", "max(i, d) = l", "least(d, l, i) = min(l, d)", "greatest(l, d) > 1e16",
    "coalesce(n, d) > 1.0", "coalesce(n, z) is null", "coalesce(z, l) = l", "min(i, d) between 0 and 10",
    "min(l, d)", "concat(s, d) like '%1%'", "cast(d as varchar) like '%e%'", "cast(d as varchar) = '-0.0'",
    "cast(min(l, d) as varchar) like '%.0'", "s like p", "not (s like p)", "s like q", "s like concat(p, '%')",
    "concat(s, l, d) like p", "max(i, d) in (0, 1)", "concat(q) is null", "max(d, i) in (d, 7)", "d in (d, 1.0)",
    "z in (z, 2.0)",
]
VALUES = [
    "min(l, d)", "max(i, d)", "greatest(d, l, i)", "coalesce(n, z)", "coalesce(n, 2.5)", "coalesce(z, l, 0)",
    "cast(d as varchar)", "concat(s, d)", "concat(cast(min(l, d) as varchar), '|', coalesce(n, z))",
    "cast(max(l, d) as int)", "cast(min(i, d) as varchar)", "cast(coalesce(n, z) as varchar)",
    "concat(i, d > 0.0)", "cast(d > 0.0 as varchar)", "s like p", "s like q", "cast(min(i, d) as double)",
    "coalesce(concat(q), 'x')",
]


@lru_cache(maxsize=None)
def built(kind: str, expression: str):
    """One operator per expression (filter and map keep no state between batches)."""
    if kind == "filter":
        return build("filter", {"expression.0": expression}, M)
    return build("map", {"expression.0": expression, "output-field-name.0": "v"}, M)


@pytest.mark.parametrize("predicate", PREDICATES)
@settings(max_examples=examples(3), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns=batches())
def test_filter_on_columns_is_the_row_path(columns, predicate):
    op = built("filter", predicate)
    assert op.columnar
    check(op, columns)


@pytest.mark.parametrize("expression", VALUES)
@settings(max_examples=examples(3), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns=batches())
def test_map_on_columns_is_the_row_path(columns, expression):
    op = built("map", expression)
    assert op.columnar
    check(op, columns)


def batch_of(n: int, **columns: list) -> Columns:
    target = arrow_schema(M)
    values = {"i": [1] * n, "l": [2] * n, "d": [0.5] * n, "s": ["ab"] * n, "p": ["a%"] * n,
              "n": [None] * n, "z": [1.5] * n, "q": ["%b"] * n}
    values.update(columns)
    return Columns(pa.RecordBatch.from_arrays([pa.array(values[f.name], f.type) for f in target], schema=target))


@pytest.fixture
def rows_read(monkeypatch) -> list[int]:
    """How many rows each ``Columns.rows()`` call made (the row code's input, whole batch or flagged rows)."""
    counts: list[int] = []
    original = Columns.rows

    def counted(self):
        out = original(self)
        counts.append(len(out))
        return out
    monkeypatch.setattr(Columns, "rows", counted)
    return counts


@pytest.mark.parametrize("kind, expression", [
    ("map", "concat(cast(min(l, d) as varchar), '|', coalesce(n, z))"), ("filter", "s like p"),
    ("map", "cast(d as varchar)"), ("filter", "coalesce(n, d) > 1.0"), ("map", "max(i, d)"),
])
def test_such_a_batch_is_not_read_as_rows(rows_read, kind, expression):
    """A batch of these expressions stays columns and no row of it is made: not the batch, not one row."""
    op = built(kind, expression)
    op.sizes = SizeChoice.fixed(False)  # (on columns: a batch this small goes the row code as built)
    d = [0.5, 1e16, -0.0, 123456789012.25, 1e-5, float("nan"), 3.0, 1e300]
    [(_, out)] = op.process(0, batch_of(len(d), d=d, l=[2**53 - 1, 5, 0, -3, 7, 1, 3, 2], p=["a%", "_b"] * 4), 0.0)
    assert isinstance(out, Columns) and rows_read == []


def test_only_a_flagged_row_is_read_as_a_row(rows_read):
    """An int beyond 2**53 beside a double (Python compares it exactly): that row alone goes to the row code."""
    op = built("map", "min(l, d)")
    op.sizes = SizeChoice.fixed(False)  # (on columns: a batch this small goes the row code as built)
    [(_, out)] = op.process(0, batch_of(3, l=[2**53 + 1, 1, 2], d=[2.0**53 + 2, 0.5, 9.5]), 0.0)
    assert isinstance(out, Columns) and rows_read == [1]
    assert [r[0] for r in out.rows()] == [float(2**53 + 1), 0.5, 2.0]


def test_patterns_past_the_batchs_most_frequent_are_left_to_the_row_code(rows_read):
    many = [f"%{k}" for k in range(arrow_text.PATTERNS + 4)]
    texts = [f"x{k}" for k in range(len(many))]
    op = built("filter", "s like p")
    op.sizes = SizeChoice.fixed(False)  # (on columns: a batch this small goes the row code as built)
    columns = batch_of(len(many), s=texts, p=many)
    [(_, out)] = op.process(0, columns, 0.0)
    assert isinstance(out, Columns) and sum(rows_read) == 4  # the 4 patterns past PATTERNS (each seen once)
    assert out.rows() == op.process(0, columns.rows(), 0.0)[0][1]


@settings(max_examples=examples(30), deadline=None)
@given(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), DOUBLES,
                          st.integers(0, 2**64 - 1).map(lambda b: struct.unpack("<d", struct.pack("<Q", b))[0])),
                max_size=30))
def test_double_text_is_pythons_repr(values):
    ev = Eval(pa.record_batch([pa.array([0.0])], names=["d"]))
    out = arrow_text.double_text(pa.array(values, pa.float64()), ev).to_pylist()
    flagged = ev.redo()
    flags = flagged.to_pylist() if flagged is not None else [False] * len(values)
    assert [o for o, f in zip(out, flags) if not f] == [repr(v) for v, f in zip(values, flags) if not f]


def test_double_text_lays_out_every_shape_on_columns():
    """Each of Arrow's layouts that differs from Python's is rewritten, none left to the row code."""
    values = [123.0, -0.0, 0.0, 1e16, 1.5e300, 1e-5, 1.2345678901234567e-06, 9.999999999999999e-05, 1e-4,
              123456789012.25, 9999999999999998.0, 1e15, 0.30000000000000004, math.pi * 1e14, -2.5e-7,
              float("nan"), float("inf"), float("-inf"), 5e-324, 1.7976931348623157e308]
    ev = Eval(pa.record_batch([pa.array([0.0])], names=["d"]))
    assert arrow_text.double_text(pa.array(values), ev).to_pylist() == [repr(v) for v in values]
    assert ev.redo() is None
