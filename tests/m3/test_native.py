"""The native (C) backend: fallback announced, compile cache, atomic batches, changes and state shared with Python.

The per-shape comparison with DuckDB on the native backend is in the
``test_*_vs_duckdb`` modules (parametrised by conftest); here are the
properties of the backend itself.  INT values beyond 64 bits (the move to
the Python backend): ``test_native_overflow.py``.
"""

from __future__ import annotations

import datetime
import doctest
import logging
import math
import random

import pytest
from boreas.m3 import Runtime, RuntimeStateError, compile_sql
from m3_harness import shared_harness, workloads
from support.native import native, norm, skip_without_native

GROUPED = "CREATE STREAM R(a INT, b INT, c DOUBLE, s VARCHAR, d DATE);\n"
SUMS = GROUPED + "SELECT a, s, SUM(b) AS total, SUM(c) AS fs, COUNT(*) AS n FROM R GROUP BY a, s"
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
GENERAL = GROUPED + "SELECT a, MIN(b) AS lo, SUM(c) AS fs FROM R GROUP BY a HAVING COUNT(*) > 1"
DATES = [datetime.date(1995, 3, 1), datetime.date(1995, 4, 1)]


#: The tests that run without a C compiler: they check the fallback or need no compiled program.
RUN_WITHOUT_COMPILER = {"test_no_compiler_falls_back_to_python_and_says_so", "test_without_cffi_the_python_backend_runs",
                        "test_a_construct_the_generator_does_not_know_is_named", "test_partition_members_stay_on_python",
                        "test_doctests"}


@pytest.fixture(autouse=True)
def _needs_the_native_backend(request):
    """Every other test here needs the compiled backend: skipped, with the reason, on a machine without it."""
    if request.function.__name__ not in RUN_WITHOUT_COMPILER:
        skip_without_native()


def r_events(rnd: random.Random, n: int, live: list) -> list:
    out = []
    for _ in range(n):
        if live and rnd.random() < 0.3:
            out.append(("R", -1, live.pop(rnd.randrange(len(live)))))
            continue
        row = (rnd.randrange(4), rnd.randrange(-3, 5), rnd.randrange(-8, 9) / 4, rnd.choice("xyz"), rnd.choice(DATES))
        live.append(row)
        out.append(("R", 1, row))
    return out


def same_changes(a: dict, b: dict) -> bool:
    if set(a) != set(b):
        return False
    for view in a:
        x, y = dict(a[view]), dict(b[view])
        if set(x) != set(y) or len(x) != len(a[view]) or len(y) != len(b[view]):
            return False
        for k in x:
            u = x[k] if isinstance(x[k], tuple) else (x[k],)
            v = y[k] if isinstance(y[k], tuple) else (y[k],)
            if not all(math.isclose(p, q, abs_tol=1e-9) for p, q in zip(u, v)):
                return False
    return True


@pytest.mark.parametrize("sql", [SUMS, GENERAL, Q3], ids=["sums", "having-min", "q3"])
def test_changes_views_and_reads_equal_the_python_backend(sql):
    py, nat = Runtime(sql, backend="python"), native(sql)
    rnd, live = random.Random(7), []
    for i in range(30):
        if sql is Q3:
            from test_runtime import q3_events
            events = q3_events(i, 40)[0]
        else:
            events = r_events(rnd, rnd.randrange(1, 25), live)
        assert py.apply_batch(events) == nat.apply_batch(events)
        if i % 3:  # sometimes read nothing: the mirror and the changes must still come out right later
            assert same_changes(py.changes(), nat.changes()), i
        if i % 4 == 0:
            for v in py.views:
                assert same_changes({v: list(py.view(v).items())}, {v: list(nat.view(v).items())})
    assert norm(py.state()) == norm(nat.state())
    for m in py.program.maps:
        assert py.read_sum(m.name) == pytest.approx(nat.read_sum(m.name))
    assert py.entries() == nat.entries()


def test_a_mirror_left_unread_long_reloads_whole_maps_and_stays_exact():
    """Past 4x a map's size in written keys the pending list is dropped and the next read reloads the map."""
    sql = GROUPED + "SELECT a, SUM(b) AS t, COUNT(*) AS n FROM R GROUP BY a; SELECT SUM(c) AS total FROM R"
    py, nat = Runtime(sql, backend="python"), native(sql)
    nat.view("Q1")
    rows = [(i % 3, i % 7, (i % 5) / 4, "x", DATES[0]) for i in range(2000)]
    for _ in range(40):  # 80,000 writes per map of three entries, nothing read
        py.apply_grouped([("R", 1, rows)])
        nat.apply_grouped([("R", 1, rows)])
    assert nat._native.pending("Q1_t") is None  # overflowed: a whole-map reload is due
    assert py.view("Q1") == nat.view("Q1") and py.view("Q2") == pytest.approx(nat.view("Q2"))
    assert norm(py.state()) == norm(nat.state())
    assert nat._native.pending("Q1_t") == []
    py.apply_grouped([("R", -1, rows[:5])])
    nat.apply_grouped([("R", -1, rows[:5])])
    assert py.view("Q1") == nat.view("Q1") and same_changes(py.changes(), nat.changes())


def test_keys_that_collide_under_the_locality_hash_stay_exact():
    """One-column integer keys hash near their neighbours; keys that pile up (multiples of 2^20) make the
    table switch to a mixed hash mid-batch (crt ``tab_mix``): entries, indexes and removals must survive it."""
    sql = "CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS t FROM R GROUP BY a"
    join = ("CREATE STREAM R(a INT, b INT); CREATE STREAM S(b INT, c INT);"
            "SELECT r.a, SUM(s.c) AS t FROM R r, S s WHERE r.b = s.b GROUP BY r.a")
    for text, rel_rows in ((sql, [("R", (i << 20, i)) for i in range(3000)]),
                           (join, [("R", (i, i << 20)) for i in range(1500)] + [("S", (i << 20, 1)) for i in range(1500)])):
        py, nat = Runtime(text, backend="python"), native(text)
        events = [(rel, 1, row) for rel, row in rel_rows]
        py.apply_batch(events)
        nat.apply_batch(events)
        assert norm(py.state()) == norm(nat.state())
        gone = [(rel, -1, row) for rel, row in rel_rows[::3]]
        py.apply_batch(gone)
        nat.apply_batch(gone)
        assert norm(py.state()) == norm(nat.state()) and same_changes(py.changes(), nat.changes())
        assert py.view("Q1") == nat.view("Q1")


def test_a_failing_batch_rolls_back_and_keeps_the_last_changes():
    rt = native(SUMS)
    rnd, live = random.Random(3), []
    rt.apply_batch(r_events(rnd, 20, live))
    before, changes, version = rt.state(), rt.changes(), rt.version
    rt._native.fail_after(15)  # the 15th map update of the next batch fails inside C
    with pytest.raises(RuntimeStateError, match="rolled back"):
        rt.apply_batch(r_events(rnd, 20, list(live)))
    assert norm(rt.state()) == norm(before) and rt.version == version and rt.changes() == changes
    rt._native.fail_after(0)
    with pytest.raises(TypeError):  # a bad value is found while converting columns: nothing ran
        rt.apply_batch([("R", 1, (1, 2, 0.5, "x", DATES[0])), ("R", 1, (1, 2, 0.5, 7, DATES[0]))])
    with pytest.raises(ValueError):
        rt.apply_batch([("R", 1, (1, 2))])
    assert norm(rt.state()) == norm(before)


def test_no_compiler_falls_back_to_python_and_says_so(monkeypatch, caplog, tmp_path):
    monkeypatch.setenv("BOREAS_CC", str(tmp_path / "no-such-cc"))
    with caplog.at_level(logging.INFO, logger="boreas.m3.runtime.program"):
        rt = Runtime(SUMS)
    assert rt.backend == "python" and "no C compiler" in rt.backend_reason and "no-such-cc" in rt.backend_reason
    assert any("no C compiler" in r.getMessage() for r in caplog.records)
    rt.apply_batch([("R", 1, (1, 2, 0.5, "x", DATES[0]))])
    assert rt.view("Q1") == {(1, "x"): (2, 0.5, 1)}
    with pytest.raises(RuntimeStateError, match="no C compiler"):
        Runtime(SUMS, backend="native")


def test_without_cffi_the_python_backend_runs(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "boreas.m3.runtime.native.backend", None)  # as if cffi were not installed
    rt = Runtime(SUMS)
    assert rt.backend == "python" and "cffi is not importable" in rt.backend_reason


def test_a_construct_the_generator_does_not_know_is_named(monkeypatch):
    from dataclasses import replace

    from boreas.m3.ast import Const, Statement, Sum
    from boreas.m3.runtime.native import backend
    from boreas.m3.runtime.native.cexpr import Unsupported
    from boreas.m3.runtime.native.cgen import generate
    p = compile_sql(SUMS)
    t = p.triggers[0]
    odd = replace(t, statements=(Statement(t.statements[0].target, Sum((Const(1), Const(2)))),))
    with pytest.raises(Unsupported, match="expression Sum in a trigger"):
        generate(replace(p, triggers=(odd,) + p.triggers[1:]))

    def refuse(program):  # as a node type the compiler may add tomorrow would be refused
        raise Unsupported("expression Nested in a trigger statement")
    monkeypatch.setattr(backend, "generate", refuse)
    rt = Runtime(SUMS)
    assert rt.backend == "python" and rt.backend_reason == "expression Nested in a trigger statement"
    with pytest.raises(RuntimeStateError, match="cannot run this program: expression Nested"):
        Runtime(SUMS, backend="native")
    with pytest.raises(RuntimeStateError, match="backend must be"):
        Runtime(SUMS, backend="fast")


def test_strings_are_ordered_as_python_orders_them():
    sql = GROUPED + "SELECT a, SUM(b) AS t FROM R WHERE s < 'y' AND 'b' <= s GROUP BY a"
    py, nat = Runtime(sql, backend="python"), native(sql)
    words = ["", "a", "b", "ba", "x", "y", "yy", "z", "é", "B", "€uro", "b\u0000"]
    rnd = random.Random(5)
    for _ in range(5):
        events = [("R", 1, (rnd.randrange(3), rnd.randrange(1, 9), 0.0, rnd.choice(words), DATES[0]))
                  for _ in range(20)]
        py.apply_batch(events)
        nat.apply_batch(events)
        assert same_changes(py.changes(), nat.changes())
    assert py.view("Q1") == nat.view("Q1")
    moved = Runtime.from_state(py.state(), backend="native")  # strings arriving by restore are ordered too
    more = [("R", 1, (0, 1, 0.0, "bb", DATES[0])), ("R", 1, (0, 1, 0.0, "yz", DATES[0]))]
    moved.apply_batch(more)
    py.apply_batch(more)
    assert moved.view("Q1") == py.view("Q1")


def test_a_program_compiled_once_is_loaded_from_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("BOREAS_M3_CACHE", str(tmp_path))
    first = native(SUMS)
    assert not first._native.built.cached and first._native.built.path.parent == tmp_path
    second = native(SUMS)
    assert second._native.built.cached and second._native.built.path == first._native.built.path
    assert len(list(tmp_path.glob("*.so"))) == 1
    other = native(GENERAL)
    assert not other._native.built.cached and len(list(tmp_path.glob("*.so"))) == 2
    first.apply_batch([("R", 1, (1, 2, 0.5, "x", DATES[0]))])  # two runtimes of one library keep their own maps
    assert second.entries() == 0 and first.entries() > 0


def test_apply_columns_equals_apply_grouped():
    from array import array
    rows = [(i % 3, i, i / 4, "xyz"[i % 3], DATES[i % 2]) for i in range(50)]
    a, b, py = native(SUMS), native(SUMS), Runtime(SUMS, backend="python")
    a.apply_grouped([("R", 1, rows)])
    cols = list(zip(*rows))
    b.apply_columns("R", 1, [array("q", cols[0]), array("q", cols[1]), array("d", cols[2]), cols[3], cols[4]])
    py.apply_columns("R", 1, cols)
    assert norm(a.state()) == norm(b.state()) == norm(py.state())
    assert same_changes(a.changes(), py.changes())
    with pytest.raises(RuntimeStateError, match="unknown relation"):
        b.apply_columns("S", 1, cols)


@pytest.mark.parametrize("start, moves", [("native", {1: "python", 2: "native"}), ("python", {0: "native", 2: "python"})],
                         ids=["n-p-n", "p-n-p"])
def test_state_moves_between_backends_and_stays_exact(start, moves):
    """A box moving between a node with a compiler and one without: state() on one, restore on the other."""
    from hypothesis import HealthCheck, given, settings
    h = shared_harness(Q3)

    @settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(workloads(Runtime(h.program, backend="python").relations, max_batches=5, max_ops=12))
    def check(batches):
        import m3_harness
        m3_harness.BACKEND = start
        try:
            h.run(batches, moves=moves)
        finally:
            m3_harness.BACKEND = "python"

    check()


def test_partition_members_stay_on_python():
    from boreas.m3.cumulus import even_layout
    from boreas.m3.cumulus.member import MemberRuntime
    p = compile_sql("CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS total FROM R GROUP BY a")
    rt = MemberRuntime(p, even_layout("g", ["n1", "n2"], 4, maps=[("Q1_total", 0)]), 0)
    assert rt.backend == "python" and "partition member" in rt.backend_reason


def test_load_and_restore_fill_the_c_maps():
    rows = [(i % 3, i, i / 4, "xyz"[i % 3], DATES[i % 2]) for i in range(30)]
    py, nat = Runtime(SUMS, backend="python"), native(SUMS)
    py.load({"R": rows})
    nat.load({"R": rows})
    assert norm(py.state()) == norm(nat.state())
    more = [("R", -1, rows[0]), ("R", 1, (9, 9, 9.0, "q", DATES[0]))]
    py.apply_batch(more)
    nat.apply_batch(more)
    assert norm(py.state()) == norm(nat.state()) and same_changes(py.changes(), nat.changes())
    moved = Runtime.from_state(py.state(), backend="native")
    assert moved.backend == "native" and norm(moved.state()) == norm(py.state()) and moved.entries() == py.entries()


@pytest.mark.parametrize("name", ["cgen", "cexpr", "ctrigger", "crt_api", "crt_values", "build", "codes", "mirror"])
def test_doctests(name):
    import importlib
    module = importlib.import_module(f"boreas.m3.runtime.native.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_the_program_is_the_same_for_both_backends():
    p = compile_sql(SUMS)
    assert Runtime(p, backend="python").text() == native(p).text()


def test_batches_around_the_prefetch_distance_equal_the_python_backend():
    """The triggers hint the lookups of rows a few ahead to the cache (ctrigger's PREFETCH_AHEAD): batches
    shorter than, equal to and just past those distances, and one long enough that the maps grow while rows
    ahead are hinted, give the Python backend's state and changes, deletes included."""
    from boreas.m3.runtime.native.ctrigger import PREFETCH_AHEAD

    rnd = random.Random(7)
    py, nat = Runtime(Q3, backend="python"), native(Q3)
    live: dict[str, list] = {"customer": [], "orders": [], "lineitem": []}

    def row(rel):
        if rel == "customer":
            return (rnd.randrange(60), rnd.choice(["BUILDING", "AUTO"]))
        if rel == "orders":
            return (rnd.randrange(400), rnd.randrange(60), rnd.choice(DATES), rnd.randrange(3))
        return (rnd.randrange(400), rnd.randrange(1, 90) / 4, rnd.choice([0.0, 0.25]), rnd.choice(DATES))

    sizes = [*range(1, 2 * max(PREFETCH_AHEAD) + 2), 3000]
    for n in sizes:
        batch = []
        for _ in range(n):
            rel = rnd.choice(["customer", "orders", "lineitem", "lineitem"])
            if live[rel] and rnd.random() < 0.2:
                batch.append((rel, -1, live[rel].pop(rnd.randrange(len(live[rel])))))
            else:
                live[rel].append(row(rel))
                batch.append((rel, 1, live[rel][-1]))
        py.apply_batch(batch)
        nat.apply_batch(batch)
        assert same_changes(py.changes(), nat.changes()), n
    assert norm(py.state()) == norm(nat.state())


READ_AND_WRITTEN = """CREATE STREAM R(A INT, B INT);
DECLARE MAP m[B: INT] : INT; DECLARE MAP n[A: INT, B: INT] : INT; DECLARE MAP f[A: INT] : FLOAT;
ON +R(A, B) DO { m[C] += 2 * n[A, C]; n[A, B] += 1; f[A] += 0.5 * B }
ON -R(A, B) DO { n[A, B] += -1; m[C] += -2 * n[A, C]; f[A] += -0.5 * B }"""


def test_only_maps_a_trigger_never_reads_have_their_updates_queued():
    """ctrigger.deferred_maps: a map read in the trigger (``n``) is updated at once, for the rows after."""
    from boreas.m3.runtime.native.ctrigger import deferred_maps
    from boreas.m3.syntax import parse_program

    assert [deferred_maps(t.statements) for t in parse_program(READ_AND_WRITTEN).triggers] == [{"m", "f"}] * 2
    assert all(deferred_maps(t.statements) == {s.target.name for s in t.statements} for t in compile_sql(Q3).triggers)


def test_queued_updates_across_flushes_equal_the_python_backend():
    """The queue (crt's UPD_BATCH) applied when full and at the trigger's end: batches shorter than, equal to and
    past it, one key updated many times in one queue (to zero and back: removed, then inserted), a map read and
    written beside queued ones, and a failure inside a full queue rolling the whole batch back."""
    from boreas.m3.syntax import parse_program

    rnd = random.Random(11)
    program = parse_program(READ_AND_WRITTEN)
    py, nat = Runtime(program, backend="python"), native(program)
    live: list[tuple] = []
    for n in [*range(1, 70), 500]:
        batch = []
        for _ in range(n):
            if live and rnd.random() < 0.4:
                batch.append(("R", -1, live.pop(rnd.randrange(len(live)))))
            else:
                live.append((rnd.randrange(3), rnd.randrange(5)))
                batch.append(("R", 1, live[-1]))
        py.apply_batch(batch)
        nat.apply_batch(batch)
        assert norm(py.state()) == norm(nat.state()), n
    before = nat.state()
    nat._native.fail_after(20)  # inside the first queue of the batch (its updates 6-37: 1-5 are direct)
    with pytest.raises(RuntimeStateError, match="rolled back"):
        nat.apply_batch([("R", 1, (rnd.randrange(3), rnd.randrange(5))) for _ in range(100)])
    nat._native.fail_after(0)
    assert norm(nat.state()) == norm(before)
