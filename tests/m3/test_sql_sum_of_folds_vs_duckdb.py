"""An aggregate over a grouped derived table's ``MAX``/``MIN`` (``AVG``/``SUM``/``COUNT`` of each inner group's
fold: Nexmark q4's average of each auction's highest bid per category) kept per row as a sum of the groups' terms,
revised from each batch's journals (``m3/runtime/foldsums.py``).  The views against DuckDB after every batch of
random inserts and deletes, both backends (``m3_harness`` reads ``view()``, the loop); each batch's ``changes()``
(which the memo makes) folded and compared with DuckDB, both backends, some batches left unread and a
``restore()`` between; and that a batch touching one group of a large row reads that group's fold alone.
"""

from __future__ import annotations

import duckdb
import pytest
from boreas.m3 import Runtime, compile_sql
from boreas.m3.runtime import viewchanges
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from m3_harness import check_against_duckdb, close, fold_changes, scaled, shape_params

STREAMS = ("CREATE STREAM auction(id INT, category INT, seller INT);\n"
           "CREATE STREAM bid(auction INT, price INT, w FLOAT);\n")

SHAPES: dict[str, str] = {
    "avg_of_max": STREAMS + """SELECT Q.category, AVG(Q.final) AS avg_final FROM (SELECT MAX(B.price) AS final,
        A.category FROM auction A, bid B WHERE A.id = B.auction GROUP BY A.id, A.category) Q GROUP BY Q.category""",
    "sum_and_count_of_min_two_columns": STREAMS + """SELECT Q.category, Q.seller, SUM(Q.low) AS s, COUNT(*) AS n
        FROM (SELECT MIN(B.price) AS low, A.category, A.seller FROM auction A, bid B WHERE A.id = B.auction
        GROUP BY A.id, A.category, A.seller) Q GROUP BY Q.category, Q.seller""",
    "avg_of_float_max": STREAMS + """SELECT Q.category, AVG(Q.top) AS a FROM (SELECT MAX(B.w) AS top, A.category
        FROM auction A, bid B WHERE A.id = B.auction GROUP BY A.id, A.category) Q GROUP BY Q.category""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape], examples=8)  # (kept cheap: the suite is near its CI budget)


def _runtime(program, backend: str) -> Runtime:
    rt = Runtime(program, backend=backend)
    if rt.backend != backend:
        pytest.skip(rt.backend_reason)
    return rt


_EVENT = st.one_of(
    st.tuples(st.just("auction"), st.tuples(st.integers(0, 5), st.integers(0, 1), st.integers(0, 1))),
    st.tuples(st.just("bid"), st.tuples(st.integers(0, 5), st.integers(1, 9), st.sampled_from([0.5, 1.25, 2.0]))),
    st.tuples(st.just("del"), st.integers(0, 40)))
_STEPS = st.lists(st.tuples(st.lists(_EVENT, min_size=1, max_size=10), st.sampled_from(["read", "read", "unread",
                                                                                         "restore"])),
                  min_size=1, max_size=8)


@pytest.mark.parametrize("backend", ["python", "native"])
@pytest.mark.parametrize("shape", ["avg_of_max", "sum_and_count_of_min_two_columns", "avg_of_float_max"])
def test_changes_folded_match_duckdb(shape, backend):
    """The memo answers only inside ``changes()``: every read batch's changes, folded, are DuckDB's result (a
    batch left unread, or a ``restore()``, makes the fold start again from the view)."""
    program = compile_sql(SHAPES[shape])
    (view,) = [v for v in program.views if not v.internal]
    select = SHAPES[shape][len(STREAMS):]
    _runtime(program, backend)

    @settings(max_examples=scaled(10), deadline=None, suppress_health_check=list(HealthCheck))
    @given(_STEPS)
    def check(steps):
        rt = _runtime(program, backend)
        con = duckdb.connect()
        con.execute("CREATE TABLE auction(id INT, category INT, seller INT)")
        con.execute("CREATE TABLE bid(auction INT, price INT, w DOUBLE)")
        live: list[tuple[str, tuple]] = []
        folded: dict = {}
        for events, how in steps:
            batch = []
            for kind, x in events:
                if kind == "del":
                    if not live:
                        continue
                    rel, row = live.pop(x % len(live))
                    cols = ("id", "category", "seller") if rel == "auction" else ("auction", "price", "w")
                    con.execute(f"DELETE FROM {rel} WHERE rowid = (SELECT MIN(rowid) FROM {rel} WHERE "
                                + " AND ".join(f"{c} = ?" for c in cols) + ")", list(row))
                    batch.append((rel, -1, row))
                else:
                    live.append((kind, x))
                    con.execute(f"INSERT INTO {kind} VALUES (?, ?, ?)", list(x))
                    batch.append((kind, 1, x))
            rt.apply_batch(batch)
            if how == "unread":
                folded = None
                continue
            changes = rt.changes().get(view.name, [])
            if folded is None:
                folded = dict(rt.view(view.name))
            else:
                fold_changes(folded, changes)
            want = {tuple(r[:len(view.keys)]): r[len(view.keys):] for r in con.execute(select).fetchall()}
            assert set(folded) == set(want), (folded, want)
            for key, vals in want.items():
                got = folded[key] if isinstance(folded[key], tuple) else (folded[key],)
                assert all(close(a, b) for a, b in zip(got, vals)), (key, got, vals)
            if how == "restore":  # the memos forgotten: the next batch's changes are read from the loop
                moved = _runtime(program, backend)
                moved.restore(rt.state())
                rt = moved
                rt.restore(rt.state())  # (again into a runtime whose memos were just built: they must go)
        con.close()

    check()


def test_a_batch_reads_the_fold_of_the_group_it_changed_only(monkeypatch):
    """50 auctions in one category: a bid on one of them revises that auction's term, not the 50 (the loop reads
    every auction's fold before and after)."""
    program = compile_sql(SHAPES["avg_of_max"])
    rt = Runtime(program, backend="python")
    rt.apply_batch([("auction", 1, (i, 1, 0)) for i in range(50)] + [("bid", 1, (i, i, 0.5)) for i in range(50)])
    assert rt.changes()["Q1"] == [((1,), sum(range(50)) / 50)]
    rt.apply_batch([("bid", 1, (3, 100, 0.5))])
    rt.changes()  # (the sums are kept from the first read of the row)
    folds: list = []
    fold = viewchanges.StoreReader.fold

    def counting(self, name, pattern, at):
        folds.append(pattern)
        return fold(self, name, pattern, at)

    monkeypatch.setattr(viewchanges.StoreReader, "fold", counting)
    rt.apply_batch([("bid", 1, (7, 200, 0.5)), ("bid", -1, (3, 100, 0.5))])
    assert rt.changes()["Q1"] == [((1,), (sum(range(50)) - 7 + 200) / 50)]
    assert sorted(p[0] for p in folds) == [3, 7], folds
    assert dict(rt.view("Q1")) == {(1,): (sum(range(50)) - 7 + 200) / 50}


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_restore_forgets_the_kept_sums(backend):
    """A runtime restored to another's state at the same version, with other data: its kept sums are that state's,
    not the ones it built before (a kept term of 5 and 7 would otherwise be revised into 6, not 101)."""
    program = compile_sql(STREAMS + """SELECT Q.c, SUM(Q.m) AS s FROM (SELECT a.id, a.category AS c, MAX(b.price) AS m
        FROM auction a, bid b WHERE a.id = b.auction GROUP BY a.id, a.category) Q GROUP BY Q.c""")
    rt, other = _runtime(program, backend), _runtime(program, backend)
    rt.apply_batch([("auction", 1, (1, 0, 0)), ("auction", 1, (2, 0, 0)), ("bid", 1, (1, 5, 0.5)),
                    ("bid", 1, (2, 7, 0.5))])
    rt.changes()
    other.apply_batch([("auction", 1, (1, 0, 0)), ("auction", 1, (2, 0, 0)), ("bid", 1, (1, 100, 0.5))])
    rt.restore(other.state())
    rt.apply_batch([("bid", 1, (2, 1, 0.5))])
    assert dict(rt.changes().get("Q1", [])) == {(0,): 101} == dict(rt.view("Q1"))

