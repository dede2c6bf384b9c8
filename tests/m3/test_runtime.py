"""The runtime: batches, atomicity, zero removal, view changes, query API, snapshots, state transfer, loading."""

from __future__ import annotations

import datetime
import json
import random

import pytest
from boreas.m3 import Runtime, RuntimeStateError, compile_sql

Q3 = """
CREATE STREAM customer(c_custkey INT, c_mktsegment VARCHAR);
CREATE STREAM orders(o_orderkey INT, o_custkey INT, o_orderdate DATE, o_shippriority INT);
CREATE STREAM lineitem(l_orderkey INT, l_extendedprice DOUBLE, l_discount DOUBLE, l_shipdate DATE);
SELECT l.l_orderkey, o.o_orderdate, o.o_shippriority, SUM(l.l_extendedprice * (1 - l.l_discount)) AS revenue
FROM customer c, orders o, lineitem l
WHERE c.c_mktsegment = 'BUILDING' AND c.c_custkey = o.o_custkey AND l.l_orderkey = o.o_orderkey
  AND o.o_orderdate < DATE '1995-03-15' AND l.l_shipdate > DATE '1995-03-15'
GROUP BY l.l_orderkey, o.o_orderdate, o.o_shippriority
"""
D1, D2 = datetime.date(1995, 3, 1), datetime.date(1995, 4, 1)


def q3_events(seed: int, n: int):
    rnd = random.Random(seed)
    live, out = [], []
    for _ in range(n):
        if live and rnd.random() < 0.2:
            ev = live.pop(rnd.randrange(len(live)))
            out.append((ev[0], -1, ev[2]))
            continue
        kind = rnd.choice(["customer", "orders", "lineitem", "lineitem"])
        if kind == "customer":
            row = (rnd.randrange(5), rnd.choice(["BUILDING", "AUTO"]))
        elif kind == "orders":
            row = (rnd.randrange(8), rnd.randrange(5), rnd.choice([D1, D2]), rnd.randrange(2))
        else:
            row = (rnd.randrange(8), rnd.randrange(1, 9) * 0.25, rnd.randrange(4) * 0.25, rnd.choice([D1, D2]))
        ev = (kind, 1, row)
        live.append(ev)
        out.append(ev)
    return out, live


@pytest.fixture(scope="module")
def q3_program():
    return compile_sql(Q3)


def test_ports_describe_relations_and_views(q3_program):
    rt = Runtime(q3_program)
    assert rt.relations["orders"] == (("o_orderkey", "INT"), ("o_custkey", "INT"), ("o_orderdate", "DATE"), ("o_shippriority", "INT"))
    v = rt.views["Q1"]
    assert v.keys == (("l_orderkey", "INT"), ("o_orderdate", "DATE"), ("o_shippriority", "INT"))
    assert v.values == ("revenue",)


def test_zero_entries_are_removed_and_changes_reported(q3_program):
    rt = Runtime(q3_program)
    rt.apply_batch([("customer", 1, (1, "BUILDING")), ("orders", 1, (7, 1, D1, 0)), ("lineitem", 1, (7, 2.0, 0.5, D2))])
    assert rt.view("Q1") == {(7, D1, 0): 1.0}
    assert rt.changes() == {"Q1": [((7, D1, 0), 1.0)]}
    rt.apply_batch([("lineitem", "-", (7, 2.0, 0.5, D2))])
    assert rt.view("Q1") == {}
    assert rt.changes() == {"Q1": [((7, D1, 0), 0)]}
    assert all(v != 0 for name in rt.store.data for _, v in rt.store.items(name))
    rt.apply_batch([("customer", -1, (1, "BUILDING")), ("orders", -1, (7, 1, D1, 0))])
    assert rt.entries() == 0 and all(not ix for m in rt.store.indexes.values() for ix in m.values())
    assert rt.version == 3


def test_a_batch_is_atomic(q3_program):
    rt = Runtime(q3_program)
    events, _ = q3_events(1, 200)
    rt.apply_batch(events)
    before = rt.state()
    bad = events[:50] + [("lineitem", 1, (1, "not a number", 0.5, D2))] + events[50:60]
    with pytest.raises(TypeError):
        rt.apply_batch(bad)
    assert rt.state() == before and rt.version == 1
    with pytest.raises(ValueError):  # wrong arity, after some valid events of another relation
        rt.apply_batch([("customer", 1, (9, "BUILDING")), ("orders", 1, (1, 2))])
    with pytest.raises(RuntimeStateError, match="unknown relation"):
        rt.apply_batch([("nope", 1, (1,))])
    with pytest.raises(RuntimeStateError, match="sign"):
        rt.apply_batch([("customer", 0, (1, "A"))])
    assert rt.state() == before
    # indexes were restored too: the runtime continues exactly like one that never saw the failures
    fresh = Runtime(q3_program)
    fresh.apply_batch(events)
    more, _ = q3_events(2, 200)
    rt.apply_batch(more)
    fresh.apply_batch(more)
    assert rt.store.data == fresh.store.data and rt.store.indexes == fresh.store.indexes


def test_state_restore_continues_exactly(q3_program):
    events, _ = q3_events(3, 400)
    a = Runtime(q3_program)
    for i in range(0, 200, 50):
        a.apply_batch(events[i:i + 50])
    state = json.loads(json.dumps(a.state()))  # only plain data: dict/list/str/int/float
    b = Runtime.from_state(state)
    c = Runtime(q3_program)
    c.restore(state)
    assert b.version == c.version == a.version == 4
    for i in range(200, 400, 50):
        for rt in (a, b, c):
            rt.apply_batch(events[i:i + 50])
        assert a.changes() == b.changes() == c.changes()
    assert a.store.data == b.store.data == c.store.data
    assert a.store.indexes == b.store.indexes
    assert a.view("Q1") == b.view("Q1")


def test_restore_refuses_other_programs(q3_program):
    other = Runtime("CREATE STREAM R(a INT); SELECT COUNT(*) AS n FROM R")
    with pytest.raises(RuntimeStateError, match="different program"):
        Runtime(q3_program).restore(other.state())
    with pytest.raises(RuntimeStateError, match="format"):
        other.restore({"format": 99})


def test_query_api_and_snapshot():
    rt = Runtime("CREATE STREAM R(a INT, b INT, c INT); SELECT a, b, SUM(c) AS s FROM R GROUP BY a, b")
    rt.apply_batch([("R", 1, (1, 1, 5)), ("R", 1, (1, 2, -3)), ("R", 1, (2, 1, 10))])
    m = "Q1_s"
    assert sorted(rt.read_slice(m, 1)) == [((1, 1), 5), ((1, 2), -3)]
    assert sorted(rt.read_slice(m, None, 1)) == [((1, 1), 5), ((2, 1), 10)]
    assert rt.read_slice(m, 2, 1) == [((2, 1), 10)]
    assert rt.read_slice(m, 3) == []
    assert (rt.read_sum(m), rt.read_sum(m, 1), rt.read_min(m), rt.read_max(m, None, 1)) == (12, 2, -3, 10)
    assert rt.read_min(m, 9) is None and rt.read_sum(m, 9) == 0
    snap = rt.snapshot()
    rt.apply_batch([("R", -1, (2, 1, 10))])
    assert snap.version == 1 and rt.version == 2
    assert snap.read_sum(m) == 12 and rt.read_sum(m) == 2
    assert rt.read_stable(m, "max") == 5 and snap.read_stable(m, "sum", None, 1) == 15
    with pytest.raises(TypeError):
        snap.maps[m][(9, 9)] = 1
    with pytest.raises(RuntimeStateError):
        rt.read_sum("nope")


def test_reads_through_indexes_equal_a_scan_for_every_pattern(q3_program):
    """READ_SLICE/SUM use a map's secondary index when the bound positions match one; answers never differ."""
    import itertools

    rt = Runtime(q3_program)
    events, _ = q3_events(5, 400)
    rt.apply_batch(events)
    indexed = 0
    for name in rt.store.data:
        entries = list(rt.store.items(name))
        n = rt.store.arity[name]
        indexed += len(rt.store.indexes[name])
        for key, _ in entries[:6] + [((99,) * n, 0)]:
            for bound in itertools.product([False, True], repeat=n):
                pattern = tuple(k if b else None for k, b in zip(key, bound))
                want = sorted((k, v) for k, v in entries if all(p is None or p == x for p, x in zip(pattern, k)))
                assert sorted(rt.read_slice(name, *pattern)) == want, (name, pattern)
                assert rt.read_sum(name, *pattern) == pytest.approx(sum(v for _, v in want))
    assert indexed >= 3  # the Q3 program slices m1, m4 and m5 by order or customer
    view = rt.view("Q1")
    some = next(iter(view))
    assert rt.view("Q1", some[0]) == {k: v for k, v in view.items() if k[0] == some[0]}
    assert rt.view("Q1", None, some[1]) == {k: v for k, v in view.items() if k[1] == some[1]}
    with pytest.raises(RuntimeStateError, match="pattern has 4 keys"):
        rt.read_slice("Q1_revenue", 1, 2, 3, 4)


def test_load_from_existing_data_equals_applying_events(q3_program):
    events, live = q3_events(4, 300)
    a = Runtime(q3_program)
    a.apply_batch(events)
    tables: dict = {"customer": [], "orders": [], "lineitem": []}
    for rel, _, row in live:
        tables[rel].append(row)
    b = Runtime(q3_program)
    b.load(tables)
    assert b.store.data.keys() == a.store.data.keys()
    for name in a.store.data:
        mine, theirs = dict(a.store.items(name)), dict(b.store.items(name))
        assert mine.keys() == theirs.keys(), name
        assert all(abs(mine[k] - theirs[k]) < 1e-9 for k in mine)
    more, _ = q3_events(5, 100)
    a.apply_batch(more)
    b.apply_batch(more)
    assert a.view("Q1").keys() == b.view("Q1").keys()


def test_runtime_accepts_m3_text_and_generates_code_once():
    text = """CREATE STREAM R(A INT);
    DECLARE MAP m[A: INT] : INT := R(A);
    ON +R(A) DO { m[A] += 1 }
    ON -R(A) DO { m[A] += -1 }"""
    rt = Runtime(text)
    assert "def t_ins_R(rows" in rt.source and "for (v_A,) in rows:" in rt.source
    rt.apply_batch([("R", 1, (3,)), ("R", 1, (3,)), ("R", -1, (4,))])
    assert dict(rt.store.items("m")) == {(3,): 2, (4,): -1}


NESTED = """CREATE STREAM R(A INT, B INT);
CREATE STREAM S(X INT, Y INT);
DECLARE MAP n[A: INT, B: INT] : INT;
DECLARE MAP by_x[X: INT, B: INT] : INT;
DECLARE MAP exact[X: INT, Y: INT] : INT;
DECLARE MAP scaled[A: INT, B: INT] : INT;
ON +R(A, B) DO { n[A, B] += 1 }
ON -R(A, B) DO { n[A, B] += -1 }
ON +S(X, Y) DO { by_x[X, B] += n[X, B]; exact[X, Y] += n[X, Y]; scaled[A, B] += Y * n[A, B] }
"""


def test_a_map_stored_in_its_index_is_sliced_read_by_key_and_scanned():
    """``n`` is sliced by A, so it lives in that index; the S trigger also reads it by full key and scans it whole."""
    rt = Runtime(NESTED)
    assert rt.store.primary["n"] == (0,) and rt.store.primary["exact"] is None
    rnd = random.Random(7)
    live: list[tuple] = []
    n: dict = {}
    want = {"by_x": {}, "exact": {}, "scaled": {}}

    def add(m, key, v):
        if v:
            want[m][key] = want[m].get(key, 0) + v
            if not want[m][key]:
                del want[m][key]

    for i in range(40):  # a batch runs its events grouped by relation: here R batches and S batches alternate
        batch = []
        for _ in range(rnd.randrange(1, 8)):
            if i % 2 == 0 and live and rnd.random() < 0.3:
                row = live.pop(rnd.randrange(len(live)))
                batch.append(("R", -1, row))
                n[row] -= 1
            elif i % 2 == 0:
                row = (rnd.randrange(4), rnd.randrange(4))
                live.append(row)
                batch.append(("R", 1, row))
                n[row] = n.get(row, 0) + 1
            else:
                x, y = rnd.randrange(5), rnd.randrange(-2, 3)
                batch.append(("S", 1, (x, y)))
                for (a, b), c in n.items():
                    if a == x:
                        add("by_x", (x, b), c)
                    add("scaled", (a, b), y * c)
                add("exact", (x, y), n.get((x, y), 0))
        rt.apply_batch(batch)
        assert dict(rt.store.items("n")) == {k: c for k, c in n.items() if c}
        for m, entries in want.items():
            assert dict(rt.store.items(m)) == entries, m
    assert rt.store.size("n") == len(live) - sum(c - 1 for c in n.values() if c > 1)
    copy = Runtime.from_state(rt.state())
    assert copy.store.data == rt.store.data and copy.store.indexes == rt.store.indexes


WINDOWED = """CREATE STREAM bid(auction INT, price INT, window_start INT, window_end INT);
CREATE STREAM hot(auction INT);
SELECT window_start, window_end, MAX(price) AS top, COUNT(*) AS n FROM bid GROUP BY window_start, window_end
HAVING COUNT(*) > 1;
SELECT b.window_end, MAX(b.price) AS top FROM bid b, hot h WHERE b.auction = h.auction GROUP BY b.window_end"""


@pytest.mark.parametrize("backend", ["python", "native"])
def test_closed_windows_rows_read_from_their_entries_equal_the_whole_views(backend):
    """A general view's rows of closed windows, read from the closed entries alone (no mirror sync), are the
    whole view's rows there; removing the closed entries leaves the open windows' rows as they were."""
    rt = Runtime(WINDOWED, backend=backend)
    rnd = random.Random(7)
    for _ in range(6):
        bids = [(rnd.randrange(6), rnd.randrange(1, 50), w, w + 10)
                for w in (rnd.choice((0, 10, 20, 30)) for _ in range(40))]
        rt.apply_grouped([("bid", 1, bids), ("hot", 1, [(rnd.randrange(6),)])])
        if rnd.random() < 0.3:
            rt.apply_grouped([("bid", -1, bids[:5])])
    ends = {m.name: [k.name for k in m.keys].index("WINDOW_END") for m in rt.program.maps
            if "WINDOW_END" in [k.name for k in m.keys]}
    for bound in (10, 20):
        before = {v: rt.view(v) for v in ("Q1", "Q2")}
        closed = {name: rt.entries_at_most(name, at, bound) for name, at in ends.items()}
        for view, end in (("Q1", 1), ("Q2", 0)):
            want = {k: v for k, v in before[view].items() if k[end] <= bound}
            assert want and dict(rt.closed_rows(view, closed, ends)) == want
        assert rt.remove_at_most({name: (at, bound) for name, at in ends.items()}) == sum(map(len, closed.values()))
        for view, end in (("Q1", 1), ("Q2", 0)):
            assert rt.view(view) == {k: v for k, v in before[view].items() if k[end] > bound}
    assert rt.closed_rows("Q1", closed, {}) is None  # a map it reads is not keyed by a window: read it whole


def test_a_view_whose_one_map_key_holds_its_row_reads_closed_rows_as_the_row_by_row_evaluation_does():
    """``closed.general_rows``' direct read (one map whose key holds every row variable, in any order: q5's
    counts) gives what evaluating each candidate row gives: zeros and null keys left out, the key reordered."""
    from boreas.m3.runtime import closed
    from boreas.m3.runtime.maps import MapStore
    from boreas.m3.runtime.viewchanges import current_reader
    from boreas.m3.runtime.views import candidate_rows, row_value, view_form
    from boreas.m3.syntax import parse_program

    program = parse_program("DECLARE MAP mm[P: INT, W: INT, E: INT] : INT;\n"
                            "DECLARE VIEW v[w := W, e := E, p := P](c := mm[P, W, E]);")
    form = view_form(program, program.views[0])
    rnd = random.Random(3)
    store = MapStore(program, {})
    store.add_many("mm", list({(rnd.randrange(5), w, w + 10): rnd.randrange(-1, 3)
                               for w in (rnd.choice((0, 10, 20)) for _ in range(40))}.items())
                   + [((None, 0, 10), 4)])
    reader = current_reader(store)
    want = {}
    for row in candidate_rows(form, reader.entries):
        inside, found = row_value(form, row, reader)
        if inside and None not in row:
            want[form.key_of(row)] = found
    got = closed.general_rows(form, store)
    assert got == want and len(got) > 5 and all(k[2] is not None for k in got)
