"""Map definitions as SQL (m3/cumulus/definitions.py): DuckDB running the SQL equals ``evaluate_definition``.

For every query shape of ``test_views_vs_duckdb`` (joins, self-joins,
selections with OR, BETWEEN/IN, arithmetic, TPC-H Q3/Q5/Q10 with DATE
comparisons), every map's defining query is written as SQL and run by DuckDB
over random tables (small domains, so joins hit, duplicate rows included);
the rows must be exactly the map's non-zero entries that the runtime's own
evaluator computes over the same tables.
"""

from __future__ import annotations

import doctest
import importlib
import random

import duckdb
import pytest
from boreas.m3 import compile_sql
from boreas.m3.ast import (
    Column,
    Const,
    MapDecl,
    MapRef,
    Prod,
    RelationDecl,
    RelAtom,
    Sum,
    Var,
)
from boreas.m3.ast import Program as M3Program
from boreas.m3.cumulus.definitions import (
    DefinitionError,
    definition_sql,
    definitions_sql,
    output_columns,
)
from boreas.m3.runtime.initial import evaluate_definition
from m3_harness import DATES, DUCK_TYPES, close, scaled
from test_views_vs_duckdb import SHAPES

_programs: dict[str, object] = {}


def program(shape: str):
    if shape not in _programs:
        _programs[shape] = compile_sql(SHAPES[shape])
    return _programs[shape]


def random_value(rng: random.Random, kind: str):
    if kind == "INT":
        return rng.randrange(4)
    if kind == "FLOAT":
        return rng.randrange(-8, 9) / 4
    if kind == "STRING":
        return rng.choice(["A", "B", "BUILDING", "R", "ASIA", "it's"])
    return rng.choice(DATES)


def random_tables(p, rng: random.Random, rows: int) -> dict[str, list[tuple]]:
    tables = {}
    for rel in p.relations:
        made = [tuple(random_value(rng, c.type) for c in rel.columns) for _ in range(rng.randrange(rows + 1))]
        tables[rel.name] = made + rng.sample(made, min(len(made), 2))  # a few duplicate rows: multiplicities
    return tables


def duckdb_with(p, tables: dict[str, list[tuple]]):
    con = duckdb.connect()
    for rel in p.relations:
        columns = ", ".join(f'"{c.name}" {DUCK_TYPES[c.type]}' for c in rel.columns)
        con.execute(f'CREATE TABLE "{rel.name}" ({columns})')
        if tables[rel.name]:
            con.executemany(f'INSERT INTO "{rel.name}" VALUES ({", ".join("?" * len(rel.columns))})',
                            tables[rel.name])
    return con


def same_entries(got: dict, want: dict, what: str) -> None:
    assert set(got) == set(want), (what, sorted(set(got) ^ set(want), key=repr)[:5])
    bad = [(k, got[k], want[k]) for k in want if not close(got[k], want[k])]
    assert not bad, (what, bad[:5])


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_map_definition_as_sql_equals_evaluate_definition(shape):
    p = program(shape)
    sqls = definitions_sql(p)
    assert set(sqls) == {m.name for m in p.maps}
    rng = random.Random(shape)
    for trial in range(scaled(6, floor=3)):  # make test-fast: the first 3 (3 to 11 rows a table)
        tables = random_tables(p, rng, rows=3 + 4 * trial)
        con = duckdb_with(p, tables)
        for m in p.maps:
            cur = con.execute(sqls[m.name])
            assert [d[0] for d in cur.description] == output_columns(m)
            got = {tuple(row[:-1]): row[-1] for row in cur.fetchall()}
            same_entries(got, evaluate_definition(p, m, tables), f"{shape} {m.name} trial {trial}\n{sqls[m.name]}")
        con.close()


def test_constants_in_atoms_repeated_variables_and_quotes():
    rel = RelationDecl("R", "STREAM", (Column("a", "INT"), Column("b", "INT"), Column("s", "STRING")))
    # m[A] := R(A, A, 'it''s') * 2 + R(A, 1, S) * -3
    defn = Sum((Prod((RelAtom("R", (Var("A"), Var("A"), Const("it's"))), Const(2))),
                Prod((RelAtom("R", (Var("A"), Const(1), Var("S"))), Const(-3)))))
    m = MapDecl("m", (Column("A", "INT"),), "INT", definition=defn)
    p = M3Program(relations=(rel,), maps=(m,))
    tables = {"R": [(1, 1, "it's"), (1, 1, "x"), (2, 1, "it's"), (2, 2, "it's"), (2, 2, "it's"), (3, 3, "y")]}
    con = duckdb_with(p, tables)
    got = {tuple(r[:-1]): r[-1] for r in con.execute(definition_sql(p, m)).fetchall()}
    assert got == evaluate_definition(p, m, tables) == {(1,): -4, (2,): 1}
    assert "'it\\'s'" in definition_sql(p, m, dialect="spark")


def test_what_cannot_be_written_is_refused():
    rel = RelationDecl("R", "STREAM", (Column("a", "INT"),))
    unbound = MapDecl("m", (Column("B", "INT"),), "INT", definition=RelAtom("R", (Var("A"),)))
    over_maps = MapDecl("n", (), "INT", definition=MapRef("m", (Var("B"),)))
    p = M3Program(relations=(rel,), maps=(unbound, over_maps))
    with pytest.raises(DefinitionError, match="key B is bound by no relation atom"):
        definition_sql(p, "m")
    with pytest.raises(DefinitionError, match="defined over other maps"):
        definition_sql(p, "n")
    with pytest.raises(ValueError, match="unknown SQL dialect"):
        definition_sql(p, "m", dialect="oracle")


def test_doctests():
    module = importlib.import_module("boreas.m3.cumulus.definitions")
    assert doctest.testmod(module).failed == 0


@pytest.mark.parametrize("pattern", ["%BR_SS", "%a\\%", "a\\_%", "%!%"])
def test_like_conditions_as_sql_equal_evaluate_definition(pattern):
    """LIKE and NOT LIKE with M3's meaning (a backslash is an ordinary character) in both dialects."""
    quoted = pattern.replace("'", "''")
    p = compile_sql(f"""CREATE STREAM R(a INT, s VARCHAR);
        SELECT a, SUM(1) AS n, SUM(CASE WHEN s NOT LIKE '{quoted}' THEN 1 ELSE 0 END) AS other
        FROM R WHERE s LIKE '%' GROUP BY a""")
    rng = random.Random(pattern)
    words = ["BRASS", "BRISS", "xBRASS", "a\\%", "ba\\x", "a\\_z", "a_z", "!x!", "x!", "%"]
    tables = {"R": [(rng.randrange(3), rng.choice(words)) for _ in range(40)]}
    con = duckdb_with(p, tables)
    for m in p.maps:
        sql = definition_sql(p, m)
        got = {tuple(row[:-1]): row[-1] for row in con.execute(sql).fetchall()}
        same_entries(got, evaluate_definition(p, m, tables), f"{m.name}\n{sql}")
        spark = definition_sql(p, m, dialect="spark")
        assert ("LIKE" in spark) == ("LIKE" in sql) and ("ESCAPE" in spark) == ("LIKE" in sql and "\\" in pattern)
