"""The native backend's two per-batch bulk steps of branch nexQ, against what they replaced.

* ``NativeMaps.changed_entries`` (the keys a batch wrote in a map, each once in the order first written, with
  its value before and now) is made distinct in C (``rt_last_distinct``, one hash pass) instead of by sorting
  the journal with numpy: checked against that numpy reading of the raw journal (``rt_last``), over maps of
  arity 0, 1 and 3, INT and FLOAT values, keys written back to their old value.
* A computed column (``DATE_FORMAT``, ``SPLIT_INDEX``, ``LOWER``, ...) is evaluated once per distinct argument
  (m3/runtime/native/computed.py): the native runtime's views and changes equal the Python backend's over
  columns given as arrays (numpy's path, FLOAT bits: ``-0.0`` beside ``0.0``), as lists, and as interned ids.
"""

from __future__ import annotations

import random
from array import array

import numpy as np
import pytest
from boreas.m3 import Runtime
from hypothesis import given, settings
from hypothesis import strategies as st
from support.native import native, norm, skip_without_native


@pytest.fixture(autouse=True)
def _needs_native():
    skip_without_native()


def _numpy_reading(nat, name: str) -> tuple[list, list, list]:
    """What ``changed_entries`` returned before branch nexQ: the raw journal's keys made distinct by numpy."""
    m, arity = nat.map_no[name], nat.arity[name]
    n = nat.lib.rt_last(nat.rt, m, nat_ffi().NULL)
    if not n:
        return [], [], []
    flat = array("q", bytes(8 * n))
    nat.lib.rt_last(nat.rt, m, nat_ffi().from_buffer("int64_t[]", flat))
    table = np.frombuffer(flat, dtype=np.int64).reshape(n // (arity + 1), arity + 1)
    if arity:
        codes = np.ascontiguousarray(table[:, :arity])
        _, first = np.unique(codes.view(np.dtype((np.void, 8 * arity))).ravel(), return_index=True)
        first.sort()
    else:
        codes, first = np.zeros((1, 1), dtype=np.int64), np.zeros(1, dtype=np.int64)
    keys = array("q", np.ascontiguousarray(codes[first]).tobytes())
    olds = array("q", table[first, arity].tobytes())
    decoded = nat.codec.decode_keys(name, keys, len(first))
    news = nat.get_many(name, decoded)
    return decoded, list(nat.codec.decode_values(name, olds)), list(news)


def nat_ffi():
    from boreas.m3.runtime.native.backend import ffi

    return ffi


MAPS = """CREATE STREAM R(a INT, b VARCHAR, c INT, x DOUBLE);
SELECT COUNT(*) AS n, SUM(x) AS fx FROM R;
SELECT a, COUNT(DISTINCT c) AS dc, SUM(x) AS fx, MAX(c) AS hi FROM R GROUP BY a;
SELECT a, b, c, COUNT(*) AS n FROM R GROUP BY a, b, c"""


@pytest.mark.parametrize("seed", [0, 1])
def test_changed_entries_equal_the_journal_read_by_numpy(seed):
    rnd = random.Random(seed)
    nat = native(MAPS)
    c = nat.native_maps()
    live: list[tuple] = []
    arities = set()
    for _ in range(12):
        batch = []
        for _ in range(rnd.randint(1, 60)):
            if live and rnd.random() < 0.35:  # a delete (some batches insert and delete a row: written back)
                batch.append(("R", -1, live.pop(rnd.randrange(len(live)))))
            else:
                row = (rnd.randint(0, 4), rnd.choice("xyz"), rnd.randint(0, 6), rnd.choice([0.5, -0.0, 1e-3]))
                batch.append(("R", 1, row))
                live.append(row)
                if rnd.random() < 0.2:
                    batch.append(("R", -1, row))
                    live.pop()
        nat.apply_batch(batch)
        for name in c.map_no:
            got = c.changed_entries(name)
            assert (list(got[0]), list(got[1]), list(got[2])) == _numpy_reading(c, name), name
            arities.add(c.arity[name])
        nat.changes()
    assert {0, 1, 3} <= arities


COMPUTED = """CREATE STREAM R(a INT, u VARCHAR, t DOUBLE);
SELECT DATE_FORMAT(t, 'yyyy-MM-dd HH:mm') AS m, SPLIT_INDEX(u, '/', 1) AS d, LOWER(u) AS l, COUNT(*) AS n,
       SUM(a) AS s FROM R GROUP BY DATE_FORMAT(t, 'yyyy-MM-dd HH:mm'), SPLIT_INDEX(u, '/', 1), LOWER(u)"""

_T0 = 1_436_918_400_000.0
times = st.sampled_from([_T0, _T0 + 1, _T0 + 59_999, _T0 + 60_000, _T0 + 86_400_000 * 3.5, 0.0, -0.0, 1.5])
urls = st.sampled_from(["a/B/c", "a/b/c", "x", "", "A/b", "/x/"])
rows = st.lists(st.tuples(st.integers(-3, 3), urls, times), min_size=0, max_size=25)


@settings(max_examples=15, deadline=None)
@given(batches=st.lists(st.tuples(rows, st.sampled_from(["array", "list", "ids"])), min_size=1, max_size=4))
def test_computed_columns_once_per_distinct_argument_equal_the_python_backend(batches):
    py, nat = Runtime(COMPUTED, backend="python"), native(COMPUTED)
    for batch, form in batches:
        a, u, t = (list(col) for col in zip(*batch)) if batch else ([], [], [])
        nat_cols = [array("q", a), u, array("d", t)] if form == "array" else \
            [array("q", a), array("q", nat.string_ids(u)), array("d", t)] if form == "ids" else [a, u, t]
        py.apply_grouped_columns([("R", 1, [a, u, t])])
        nat.apply_grouped_columns([("R", 1, nat_cols)])
        assert sorted(nat.changes().get("Q1", []), key=repr) == sorted(py.changes().get("Q1", []), key=repr)
    assert sorted(nat.view("Q1").items(), key=repr) == sorted(py.view("Q1").items(), key=repr)
    assert norm(nat.state()) == norm(py.state())


def test_arguments_not_made_distinct_keep_the_per_row_path():
    """An INT argument given as a list (it may not fit 64 bits), or a FLOAT list holding a None, is computed per
    row (None), where the per-row path says what is wrong; packed ones are made distinct by their codes."""
    from boreas.m3.runtime.native.computed import distinct_arguments

    assert distinct_arguments([1, 2**70], "INT", []) is None
    assert distinct_arguments([1.0, None], "FLOAT", []) is None
    args, inverse = distinct_arguments(array("q", [5, 5, 3]), "INT", [])
    assert args == [3, 5] and inverse.tolist() == [1, 1, 0]


def test_a_double_column_given_as_python_ints_is_read_as_the_python_backend_reads_it():
    """A DOUBLE column's list may hold ints (rows as a publisher sent them): the function is called on each value
    as it is, as the Python backend calls it, so the backends keep agreeing (a review found ``CAST_STRING`` of
    ``5`` said ``'5.0'`` natively and ``'5'`` in Python once the list was made doubles first)."""
    sql = """CREATE STREAM R(a INT, x DOUBLE);
SELECT CAST_STRING(x) AS s, COUNT(*) AS n FROM R GROUP BY CAST_STRING(x)"""
    py, nat = Runtime(sql, backend="python"), native(sql)
    for runtime in (py, nat):
        runtime.apply_grouped([("R", 1, [(1, 5), (2, 5), (3, 2.5)])])
        runtime.apply_grouped_columns([("R", 1, [[4, 5], [5, 5.0]])])
    assert sorted(nat.view("Q1").items(), key=repr) == sorted(py.view("Q1").items(), key=repr)


READS_TWO = """CREATE STREAM R(a INT, u VARCHAR, t DOUBLE, x VARCHAR);
SELECT a, COUNT(*) AS n, MAX(t) AS hi FROM R GROUP BY a"""


def test_rows_into_c_as_the_columns_the_trigger_reads():
    """A batch of rows becomes only the columns its trigger reads (``mirror.read_columns``): the unread STRING
    columns are never turned into columns, and the maps are the Python backend's; a row of the wrong width is
    still refused by name."""
    py, nat = Runtime(READS_TWO, backend="python"), native(READS_TWO)
    c = nat.native_maps()
    assert c.read_positions("R", 1) == frozenset({0, 2})
    rnd = random.Random(3)
    for _ in range(5):
        rows = [(rnd.randint(0, 3), "u" * rnd.randint(0, 3), rnd.random(), "x") for _ in range(rnd.randint(1, 30))]
        py.apply_grouped([("R", 1, rows)])
        nat.apply_grouped([("R", 1, rows)])
        assert sorted(nat.changes().get("Q1", [])) == sorted(py.changes().get("Q1", []))
    assert norm(nat.state()) == norm(py.state())
    with pytest.raises(ValueError, match="relation R has 4 columns, got a row of 3"):
        nat.apply_grouped([("R", 1, [(1, "u", 2.0, "x"), (1, "u", 2.0)])])
