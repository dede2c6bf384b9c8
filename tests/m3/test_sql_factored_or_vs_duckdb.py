"""Deltas of ORs and IN lists over several relations are factored (compile time), and stay right against DuckDB.

The shapes are our own, written after DBToaster's suite (TPC-DS Q53a/Q63a: IN lists on a dimension's columns, an
OR of conjunctions of IN lists on another's, a CASE over the grouped derived table's SUM and AVG).  Inclusion–
exclusion makes the WHERE a sum of one term per combination of constants (here 3 x 8); each delta term is a
product of one map per dimension, and :func:`boreas.m3.compiler.materialize.factored` sums the terms that differ
in one map only, so an event on the fact relation updates each map with one statement instead of one per
combination.  Random insert/delete batches over small domains (``m3_harness``): every view equals DuckDB's,
every map its definition, deleting every row empties every map.
"""

from __future__ import annotations

from collections import Counter

import pytest
from boreas.m3 import compile_sql
from m3_harness import check_against_duckdb

#: Every shape runs on both backends (conftest's ``m3_backend``).
BOTH = pytest.mark.parametrize("m3_backend", ["python", "native"], indirect=True)

STAR = """
CREATE STREAM F(i INT, d INT, s INT, p INT);
CREATE STREAM I(i INT, cat VARCHAR, cls INT, m INT);
CREATE STREAM D(d INT, mon INT, q INT);
CREATE STREAM S(s INT, x INT);
"""

WHERE = """F.i = I.i AND F.d = D.d AND F.s = S.s AND D.mon IN (1, 2, 3)
    AND ((I.cat IN ('A', 'B') AND I.cls IN (0, 1)) OR (I.cat IN ('R', 'ASIA') AND I.cls IN (2, 3)))"""

CASES: dict[str, str] = {
    # Q53a's shape: the CASE over the derived table's SUM and AVG, a group column (D.q) not selected
    "case_over_star_with_in_lists": STAR + f"""SELECT * FROM (SELECT I.m, SUM(F.p) AS s, AVG(F.p) AS a
        FROM I, F, D, S WHERE {WHERE} GROUP BY I.m, D.q) t
        WHERE (CASE WHEN a > 0 THEN (s - a) / a ELSE 0 END) > 0.1""",
    # the same WHERE in a plain aggregate, and an OR across two dimensions (terms that overlap: -1 terms)
    "sum_over_star_with_in_lists": STAR + f"""SELECT I.m, D.q, SUM(F.p * S.x) AS s FROM I, F, D, S
        WHERE {WHERE} AND (S.x = 1 OR D.q = 2) GROUP BY I.m, D.q""",
}


#: TPC-DS Q46/Q68's shape: a grouped derived table over five relations joined with two more (one of them again)
#: on some of its group columns (:mod:`boreas.m3.compiler.liftpairs`: the pairs join 7 relations).
PAIRS = STAR + """CREATE STREAM H(h INT, dep INT, veh INT);
CREATE STREAM A(a INT, city VARCHAR);
CREATE STREAM C(cu INT, addr INT, nm INT);
SELECT C.nm, cur.city, t.bc, t.tk, t.amt FROM (SELECT F.p AS tk, F.i AS cu, A.city AS bc, SUM(F.p) AS amt
    FROM F, D, S, H, A WHERE F.d = D.d AND F.s = S.s AND F.i = H.h AND F.i = A.a AND (H.dep = 1 OR H.veh = 2)
    AND D.mon IN (0, 1) GROUP BY F.p, F.i, A.city) t, C, A cur
  WHERE t.cu = C.cu AND C.addr = cur.a AND cur.city <> t.bc"""


@BOTH
def test_pairs_of_seven_relations_match_duckdb(m3_backend):
    check_against_duckdb(PAIRS, examples=8)


@BOTH
@pytest.mark.parametrize("shape", sorted(CASES))
def test_factored_star_matches_duckdb(shape, m3_backend):
    check_against_duckdb(CASES[shape], examples=10)


@pytest.mark.parametrize(("shape", "most"), [("case_over_star_with_in_lists", 1), ("sum_over_star_with_in_lists", 3)])
def test_fact_event_updates_each_map_once(shape, most):
    """An event on the fact relation binds every join variable, so each dimension's 3 x 8 conditions sum inside
    its own map: one statement per map updated, not one per combination of constants (72 unfactored); with
    the OR across two dimensions, at most its three inclusion–exclusion terms (S.x = 1, D.q = 2, both)."""
    program = compile_sql(CASES[shape])
    inserts = next(t for t in program.triggers if t.relation == "F" and t.sign == 1)
    per_target = Counter(s.target.name for s in inserts.statements)
    assert per_target and max(per_target.values()) <= most, per_target
