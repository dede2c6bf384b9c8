"""The SQL → M3 compiler: the seeds' programs, and errors that name the construct and its position."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from boreas.m3 import (
    CompileError,
    check_program,
    compile_sql,
    compile_to_text,
    parse_program,
)
from boreas.m3.ast import Const, IfThen, MapRef, Prod, Var
from seed_programs import SEED1_RELATIONS, SEED1_TRIGGERS

# Seed 001, Example 2.1 (transcribed: the schema the program implies)
SEED1_SQL = """
CREATE STREAM CUSTOMERS(CID INT, NATION INT);
CREATE STREAM ORDERS(CID INT, OID INT, DISCOUNT DOUBLE);
CREATE STREAM LINEITEMS(OID INT, PRICE DOUBLE, PART INT);
SELECT c.nation, l.part, SUM(o.discount * l.price)
FROM CUSTOMERS c, ORDERS o, LINEITEMS l
WHERE c.cid = o.cid AND o.oid = l.oid
GROUP BY c.nation, l.part
"""
SEED1_M3 = SEED1_RELATIONS + """
DECLARE MAP q[PART: INT, NATION: INT] : FLOAT; DECLARE MAP m1[OID: INT, NATION: INT] : FLOAT;
DECLARE MAP m2[CID: INT, PART: INT] : FLOAT; DECLARE MAP m3[CID: INT, OID: INT] : FLOAT;
DECLARE MAP m4[OID: INT, PART: INT] : FLOAT; DECLARE MAP m5[CID: INT, NATION: INT] : INT;
""" + SEED1_TRIGGERS

# Seed 002 (DBToaster, "Recursive Delta Compilation"), variables upper-cased:
# ck→CUSTKEY, nm→NAME, nk→NATIONKEY, bal→ACCTBAL, ok→ORDKEY, ep→EXTPRICE, sp→SPRIOR
SEED2_SQL = """
CREATE STREAM Customer(custkey INT, name VARCHAR, nationkey INT, acctbal DOUBLE);
CREATE STREAM Orders(custkey INT, ordkey INT, sprior INT);
CREATE STREAM Lineitem(ordkey INT, extprice DOUBLE);
select l.ordkey, o.sprior, sum(l.extprice)
from Customer c, Orders o, Lineitem l
where c.custkey = o.custkey and l.ordkey = o.ordkey
group by l.ordkey, o.sprior
"""
SEED2_M3 = """
CREATE STREAM Customer(custkey INT, name STRING, nationkey INT, acctbal FLOAT);
CREATE STREAM Orders(custkey INT, ordkey INT, sprior INT);
CREATE STREAM Lineitem(ordkey INT, extprice FLOAT);
DECLARE MAP m[ORDKEY: INT, SPRIOR: INT] : FLOAT; DECLARE MAP mc[CUSTKEY: INT, ORDKEY: INT, SPRIOR: INT] : FLOAT;
DECLARE MAP ml[ORDKEY: INT, SPRIOR: INT] : INT; DECLARE MAP mo[CUSTKEY: INT] : INT;
DECLARE MAP mco[ORDKEY: INT] : FLOAT; DECLARE MAP mcl[CUSTKEY: INT, ORDKEY: INT, SPRIOR: INT] : INT;
ON +Customer(CUSTKEY, NAME, NATIONKEY, ACCTBAL) DO {
  m[ORDKEY, SPRIOR] += mc[CUSTKEY, ORDKEY, SPRIOR];
  ml[ORDKEY, SPRIOR] += mcl[CUSTKEY, ORDKEY, SPRIOR];
  mo[CUSTKEY] += 1 }
ON +Lineitem(ORDKEY, EXTPRICE) DO {
  m[ORDKEY, SPRIOR] += EXTPRICE * ml[ORDKEY, SPRIOR];
  mc[CUSTKEY, ORDKEY, SPRIOR] += EXTPRICE * mcl[CUSTKEY, ORDKEY, SPRIOR];
  mco[ORDKEY] += EXTPRICE }
ON +Orders(CUSTKEY, ORDKEY, SPRIOR) DO {
  m[ORDKEY, SPRIOR] += mco[ORDKEY] * mo[CUSTKEY];
  ml[ORDKEY, SPRIOR] += mo[CUSTKEY];
  mc[CUSTKEY, ORDKEY, SPRIOR] += mco[ORDKEY];
  mcl[CUSTKEY, ORDKEY, SPRIOR] += 1 }
"""


def _factors(e, out):
    if isinstance(e, Prod):
        for f in e.factors:
            _factors(f, out)
    elif isinstance(e, IfThen):
        out.append(("if", e.cond))
        _factors(e.then, out)
    elif not (isinstance(e, Const) and e.value == 1):
        out.append(e)
    return out


def shape(program, sign=1, rename=None):
    """Triggers as {relation: Counter(statements)}, a statement being (target, key set, factor multiset).

    Map references compare by (renamed) name and *set* of arguments: modulo map naming and key order.
    """
    rename = rename or {}

    def ref(r: MapRef):
        # Sorted, not a frozenset: the statements below compare by repr, and a set's repr
        # follows the hash seed.
        return (rename.get(r.name, r.name), tuple(sorted({repr(a.name if isinstance(a, Var) else a.value)
                                                         for a in r.args})))

    out = {}
    for t in program.triggers:
        if t.sign != sign:
            continue
        stmts = Counter()
        for s in t.statements:
            fs = [ref(f) if isinstance(f, MapRef) else f for f in _factors(s.expr, [])]
            stmts[(ref(s.target), frozenset(Counter(map(repr, fs)).items()))] += 1
        out[t.relation] = stmts
    return out


def map_keys(program, rename=None):
    rename = rename or {}
    return {rename.get(m.name, m.name): frozenset(k.name for k in m.keys) for m in program.maps}


def equivalent_modulo_naming(compiled, seed) -> bool:
    mine = [m.name for m in compiled.maps]
    theirs = [m.name for m in seed.maps]
    if len(mine) != len(theirs):
        return False
    target = shape(seed)
    for perm in itertools.permutations(theirs):
        rename = dict(zip(mine, perm))
        if map_keys(compiled, rename) == map_keys(seed) and shape(compiled, 1, rename) == target:
            return True
    return False


@pytest.mark.parametrize("sql, m3", [(SEED1_SQL, SEED1_M3), (SEED2_SQL, SEED2_M3)], ids=["seed001_example_2_1", "seed002_three_relations"])
def test_compiles_to_the_seed_program(sql, m3):
    compiled = compile_sql(sql)
    seed = check_program(parse_program(m3))
    assert equivalent_modulo_naming(compiled, seed), compile_to_text(sql)


@pytest.mark.parametrize("sql", [SEED1_SQL, SEED2_SQL])
def test_delete_triggers_are_insert_triggers_negated(sql):
    p = compile_sql(sql)
    for ins in (t for t in p.triggers if t.sign == 1):
        dele = p.trigger(ins.relation, -1)
        assert len(dele.statements) == len(ins.statements)
        for a, b in zip(ins.statements, dele.statements):
            fa, fb = _factors(a.expr, []), _factors(b.expr, [])
            neg = [f for f in fb if isinstance(f, Const)]
            assert a.target == b.target and neg and neg[0].value in (-1, -1.0) or any(
                isinstance(f, Const) and isinstance(g, Const) and f.value == -g.value for f, g in zip(fa, fb))


def test_compiled_text_parses_back_equal():
    for sql in (SEED1_SQL, SEED2_SQL):
        p = compile_sql(sql)
        assert parse_program(compile_to_text(sql)) == p


def test_maps_are_shared_between_queries():
    sql = SEED1_SQL + "; SELECT o.cid, o.oid, SUM(o.discount) AS d FROM ORDERS o GROUP BY o.cid, o.oid"
    p = compile_sql(sql)
    assert len(p.maps) == 6  # the second query is the seed's m3, and the first query's triggers read it
    reads = {f.name for t in p.triggers for s in t.statements for f in _factors(s.expr, []) if isinstance(f, MapRef)}
    assert "Q2_d" in reads


def test_avg_is_sum_over_count():
    p = compile_sql("CREATE STREAM R(a INT, b DOUBLE); SELECT a, AVG(b) AS av FROM R GROUP BY a")
    col = p.views[0].columns[0]
    assert (col.numerator, col.denominator) == ("Q1_av_sum", "Q1_av_count")


SCHEMA = "CREATE STREAM R(a INT, b INT);\nCREATE STREAM S(b INT, c INT);\n"


@pytest.mark.parametrize(
    "query, fragment, pos",
    [
        ("SELECT MEDIAN(a) FROM R", "unsupported aggregate MEDIAN (only SUM, COUNT, AVG, MIN and MAX)", (3, 8)),
        ("SELECT MIN(a + 1) FROM R", "unsupported MIN(a + 1): only of a column", (3, 12)),
        ("SELECT MAX(DISTINCT a * 2) FROM R", "unsupported MAX(DISTINCT a * 2): only of a column", (3, 21)),
        ("SELECT a, SUM(b) FROM R GROUP BY a ORDER BY r.zz", "unknown column r.zz", (3, 45)),
        ("SELECT SUM(b) FROM R LIMIT 3", "unsupported LIMIT clause (a view holds every group", (3, 22)),
        ("SELECT a, SUM(b) FROM R GROUP BY a HAVING SUM(b) > 'x'", "cannot compare a NUMBER with a STRING", (3, 43)),
        ("SELECT a, SUM(b) FROM R GROUP BY a HAVING SUM(b) LIKE 'x'", "unsupported condition LIKE", (3, 43)),
        ("SELECT a, SUM(b) FROM R GROUP BY a HAVING b > 1", "column R.b in HAVING is neither grouped", (3, 43)),
        ("SELECT DISTINCT SUM(b) FROM R GROUP BY a", "unsupported SELECT DISTINCT over groups", (3, 8)),
        ("SELECT DISTINCT ON (a) a, b FROM R", "unsupported DISTINCT ON", (3, 8)),
        ("SELECT SUM(b) FROM R WHERE a < 1 OR a IN (SELECT b FROM S)", "unsupported subquery inside OR", (3, 28)),
        ("SELECT COUNT(DISTINCT x.n) FROM (SELECT b, COUNT(*) AS n FROM R GROUP BY b) x",
         "unsupported COUNT(DISTINCT x.n) over a grouped derived table (no DISTINCT)", (3, 8)),
        ("SELECT SUM(r.b) FROM R r, S s WHERE r.a < s.c / r.a", "unsupported division by r.a in a comparison",
         (3, 43)),
        ("SELECT r.a, SUM(DISTINCT s.c) FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a",
         "unsupported SUM(DISTINCT s.c) over an outer join", (3, 13)),
        ("SELECT s.c, s.c + COUNT(*) FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY s.c",
         "unsupported LEFT JOIN reading the padded key s.c outside an aggregate", (3, 13)),
        ("SELECT SUM(r.b) FROM R r, S s WHERE r.a = 1 OR r.b < s", "unknown column s", (3, 54)),
        ("SELECT SUM(b) FROM R WHERE NOT a = ABS(b) + a", "unsupported ABS (ABS(b)) in a comparison with arithmetic",
         (3, 36)),
        ("SELECT SUM(b) FROM R WHERE a LIKE 'x'", "LIKE on INT column a", (3, 28)),
        ("SELECT SUM(b) FROM R WHERE a + 1 IS NULL", "unsupported IS (a + 1 IS NULL): of a column, IS [NOT] NULL",
         (3, 28)),
        ("SELECT SUM(b) FROM R WHERE a / b IS NOT NULL", "unsupported IS (a / b IS NULL)", (3, 28)),
        ("SELECT SUM(b) FROM R WHERE a BETWEEN SYMMETRIC 2 AND 1", "unsupported SYMMETRIC of BETWEEN", (3, 28)),
        ("SELECT SUM(b) FROM R WHERE a IN UNNEST(b)", "unsupported IN UNNEST", (3, 28)),
        ("SELECT SUM(b) FROM R WHERE a = 'x'", "cannot compare INT column a with the string 'x'", (3, 32)),
        ("SELECT SUM(b) FROM R WHERE a < DATE '1995-01-01' + INTERVAL 1 HOUR",
         "unsupported INTERVAL unit HOUR", (3, 52)),
        ("SELECT SUM(b) FROM R WHERE ABS(a) = 1", "unsupported condition ABS(a) = 1", (3, 28)),
        ("SELECT SUM(CASE WHEN a = 1 THEN b END + 1) FROM R", "unsupported CASE without ELSE inside arithmetic",
         (3, 12)),
        ("SELECT SUM(b + NULL) FROM R", "unsupported NULL inside arithmetic", (3, 16)),
        ("SELECT a, SUM(b) FROM R", "column a is selected beside aggregates but there is no GROUP BY", (3, 8)),
        ("SELECT a AS x, SUM(b) AS s FROM R GROUP BY s", "GROUP BY s names the aggregate SUM(b)", (3, 44)),
        ("SELECT a, SUM(b) FROM R GROUP BY 3", "GROUP BY 3: the SELECT list has 2 items", (3, 34)),
        ("SELECT a, SUM(b) FROM R GROUP BY ABS(a)", "unsupported GROUP BY expression ABS(a)", (3, 34)),
        ("SELECT SUM(b) FROM R AS r(x, y)", "unsupported column aliases in FROM", (3, 20)),
        ("SELECT SUM(b) FROM R TABLESAMPLE (10 ROWS)", "unsupported SAMPLE of TABLE", (3, 20)),
        ("SELECT COUNT(DISTINCT a, b) FROM R", "unsupported COUNT(DISTINCT ...) of 2 expressions", (3, 8)),
        ("SELECT SUM(a) / b FROM R", "column R.b in SUM(a) / b is neither grouped nor inside an aggregate",
         (3, 8)),
        ("SELECT SUM(a) || 'x' FROM R", "unsupported expression DPIPE", (3, 8)),
        ("SELECT SUM(a / b) FROM R", "unsupported division by b", (3, 12)),
        ("SELECT b, SUM(a) FROM R GROUP BY a", "column b is selected but not in GROUP BY", (3, 8)),
        ("SELECT SUM(z) FROM R", "unknown column z", (3, 12)),
        ("SELECT SUM(b) FROM X", "unknown relation X", (3, 20)),
        ("SELECT SUM(b) FROM R, S", "ambiguous column b", (3, 12)),
        ("SELECT a AS x, 1 + 2 AS y FROM R GROUP BY y", "GROUP BY y names the expression 1 + 2", (3, 43)),
        ("SELECT SUM(b) OVER () FROM R", "unsupported window function", (3, 8)),
        ("SELECT SUM(b) FROM R UNION SELECT SUM(b) FROM R WHERE b IN (SELECT b FROM R)", "unsupported UNION of aggregated queries",
         (3, 1)),
        ("INSERT INTO R VALUES (1, 2)", "unsupported statement INSERT", (3, 1)),
        ("SELECT SUM(b) FROM R WHERE a < DATE 'nope'", "invalid DATE literal", (3, 32)),
        ("SELECT SUM(b FROM R", "SQL syntax error", (3, 14)),
    ],
)
def test_unsupported_sql_names_construct_and_position(query, fragment, pos):
    with pytest.raises(CompileError) as info:
        compile_sql(SCHEMA + query)
    err = info.value
    assert fragment in err.message, err.message
    assert (err.pos.line, err.pos.col) == pos, str(err)
    assert f"line {pos[0]}, col" in str(err)


def test_schema_errors():
    with pytest.raises(CompileError, match="unsupported column type VARBINARY of column a"):
        compile_sql("CREATE STREAM R(a BLOB); SELECT COUNT(*) FROM R")
    with pytest.raises(CompileError, match="no SELECT query"):
        compile_sql("CREATE STREAM R(a INT)")
    with pytest.raises(CompileError, match="declared twice"):
        compile_sql("CREATE STREAM R(a INT); CREATE TABLE r(a INT); SELECT COUNT(*) FROM R")
