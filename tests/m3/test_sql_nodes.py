"""No silent drops (issue 14, item 5): every sqlglot node the front end meets is translated or refused, never ignored.

Three properties, over sqlglot's own classes rather than over examples we
thought of:

1. **Every class, every position.**  Each class in ``sqlglot.expressions``
   is put (built with column or constant children) into every position the
   front end accepts an expression, clause item or statement in.  The front
   end must raise a :class:`CompileError` or translate it; it must never
   raise anything else (the old ``IN LIST`` inside AND raised a TypeError),
   and it may translate only the classes it declares it reads
   (:data:`boreas.m3.compiler.nodes.READS`).
2. **Every unread field refuses.**  In a corpus of accepted queries, every
   node gets, one at a time, each field of its class that the front end does
   not read: the query must now be refused (``x IN LIST (...)`` was ``In``
   with its list in the unread field ``field``).
3. **Every read field matters.**  Each expression-valued field the front end
   reads is replaced by other expressions: the result must change or be
   refused; a field whose content never matters would be one it ignores.
"""

from __future__ import annotations

import pytest
import sqlglot
from boreas.m3 import CompileError
from boreas.m3.ast import Column, RelationDecl
from boreas.m3.compiler.frontend import translate_statement
from boreas.m3.compiler.nodes import READS, present
from sqlglot import exp

RELATIONS = {
    "R": RelationDecl("R", "STREAM", (Column("a", "INT"), Column("b", "INT"), Column("g", "STRING"),
                                      Column("d", "DATE"))),
    "S": RelationDecl("S", "STREAM", (Column("b", "INT"), Column("c", "FLOAT"))),
}

# every position the front end accepts something in; `hole` (a column, or the FROM table) marks it
POSITIONS = [
    "SELECT SUM(b) AS s FROM R WHERE hole",
    "SELECT SUM(b) AS s FROM R WHERE a = 1 AND hole",
    "SELECT SUM(b) AS s FROM R WHERE a = 1 OR hole",
    "SELECT SUM(b) AS s FROM R WHERE NOT hole",
    "SELECT SUM(b) AS s FROM R WHERE a < hole",
    "SELECT SUM(b) AS s FROM R WHERE hole < a",
    "SELECT SUM(b) AS s FROM R WHERE a IN (1, hole)",
    "SELECT SUM(b) AS s FROM R WHERE a BETWEEN hole AND 3",
    "SELECT SUM(b) AS s FROM R WHERE g LIKE hole",
    "SELECT SUM(b) AS s FROM R WHERE d < DATE '1995-01-01' + hole",
    "SELECT SUM(b) AS s FROM R WHERE a = 1 + hole",
    "SELECT SUM(r.b) AS s FROM R r JOIN S s ON hole",
    "SELECT SUM(r.b) AS s FROM R r JOIN S s ON r.b = s.b AND hole",
    "SELECT a, hole FROM R GROUP BY a",
    "SELECT a, hole AS x, SUM(b) AS s FROM R GROUP BY a",
    "SELECT SUM(hole) AS s FROM R",
    "SELECT SUM(b * hole) AS s FROM R",
    "SELECT SUM(-hole) AS s FROM R",
    "SELECT COUNT(hole) AS n FROM R",
    "SELECT AVG(hole) AS v FROM R",
    "SELECT SUM(CASE WHEN hole THEN b ELSE 0 END) AS s FROM R",
    "SELECT SUM(CASE WHEN a = 1 THEN hole ELSE 0 END) AS s FROM R",
    "SELECT SUM(CASE WHEN a = 1 THEN b ELSE hole END) AS s FROM R",
    "SELECT SUM(CASE a WHEN hole THEN b ELSE 0 END) AS s FROM R",
    "SELECT a, SUM(b) AS s FROM R GROUP BY hole",
    "SELECT a, SUM(b) AS s FROM R GROUP BY a ORDER BY hole",
    "SELECT SUM(b) AS s FROM hole",
    "SELECT SUM(r.b) AS s FROM R r, hole",
    "CREATE VIEW v AS SELECT SUM(b) AS s FROM R WHERE hole",
    "SELECT a, SUM(b) AS s FROM R GROUP BY a HAVING hole",
    "SELECT a, SUM(b) AS s FROM R GROUP BY a HAVING SUM(b) > hole",
    "SELECT a, SUM(b) AS s FROM R GROUP BY a HAVING NOT hole",
    "SELECT a, SUM(b) * hole AS s FROM R GROUP BY a",
    "SELECT a, hole / COUNT(*) AS s FROM R GROUP BY a",
    "SELECT MIN(hole) AS m FROM R",
    "SELECT COUNT(DISTINCT hole) AS n FROM R",
    "SELECT DISTINCT a, hole FROM R",
    "SELECT SUM(x) AS s FROM (SELECT a AS x FROM R WHERE hole) t",
    "SELECT SUM(y) AS s FROM (SELECT hole AS y FROM R) t",
    "SELECT SUM(y) AS s FROM (SELECT b AS y FROM hole) t",
    "WITH v AS (SELECT a, b FROM R WHERE hole) SELECT SUM(b) AS s FROM v",
    "SELECT a, b FROM R UNION ALL SELECT a, hole FROM R",
    "SELECT k, SUM(v) AS s FROM (SELECT a AS k, b AS v FROM R UNION ALL SELECT a, hole FROM R) u GROUP BY k",
    "SELECT k, MAX(v) AS m FROM (SELECT a AS k, b AS v FROM R UNION SELECT a, hole FROM R) u GROUP BY k",
    "SELECT SUM(s) AS x FROM (SELECT a, SUM(hole) AS s FROM R GROUP BY a) t",
    "SELECT a, SUM(b) AS s FROM R GROUP BY a HAVING SUM(b) > (SELECT SUM(c) FROM S) * hole",
    "SELECT a, SUM(b) AS s FROM R GROUP BY a HAVING hole < (SELECT SUM(c) FROM S WHERE c > 0)",
    "SELECT t.a, MAX(t.m) AS x FROM (SELECT a, b, MAX(b) AS m FROM R GROUP BY a, b) t WHERE hole GROUP BY t.a",
]

FILLERS = [exp.column("a"), exp.Literal.number(2), exp.Literal.string("A")]


def _classes() -> list[type[exp.Expression]]:
    seen = {}
    for value in vars(exp).values():
        if isinstance(value, type) and issubclass(value, exp.Expression):
            seen[value.__name__] = value
    return [seen[n] for n in sorted(seen)]


def _instance(cls: type[exp.Expression], filler: exp.Expression) -> exp.Expression | None:
    args = {k: ([filler.copy()] if k == "expressions" else filler.copy()) for k, required in cls.arg_types.items()
            if required}
    try:
        return cls(**args)
    except Exception:  # noqa: BLE001 - a class that cannot be built this way cannot be placed either
        return None


def _hole(tree: exp.Expression) -> exp.Expression:
    return next(n for n in tree.walk() if isinstance(n, (exp.Column, exp.Table)) and n.name == "hole")


def _translate(tree: exp.Expression, sql: str = ""):
    """The front end's answer: its result, or the CompileError; anything else fails the test."""
    try:
        return translate_statement(tree, RELATIONS, sql)
    except CompileError as e:
        return e


def _built() -> list[tuple[type[exp.Expression], exp.Expression, exp.Expression]]:
    """Every class of sqlglot's built with each filler: (class, filler, node), for the classes that build."""
    return [(cls, filler, node) for cls in _classes() for filler in FILLERS
            if (node := _instance(cls, filler)) is not None]


def test_every_sqlglot_class_is_refused_as_a_statement():
    classes = _classes()
    assert len(classes) > 500  # sqlglot's expression classes, not a hand-picked list
    built = _built()
    assert len(built) > 900
    for cls, _, node in built:
        assert isinstance(_translate(node), CompileError), f"{cls.__name__} accepted as a statement"


#: make test-fast walks every eighth position (a spread over WHERE, joins, SELECT, GROUP BY, HAVING);
#: make test walks them all.
POSITION_PARAMS = [sql if i % 8 == 0 else pytest.param(sql, marks=pytest.mark.slow) for i, sql in enumerate(POSITIONS)]


def _walk(sql: str, every_filler: bool = False) -> set[str]:
    """Every built class in the hole of ``sql``: the names of those the front end translated there.

    A class is placed with one of its fillers, turning with the position (:func:`_one_filler_each`), so every
    class meets every position and each of its fillers a third of them; ``every_filler``: all three here."""
    template = sqlglot.parse_one(sql)
    assert _hole(template) is not template
    translated: set[str] = set()
    for cls, filler, node in (_built() if every_filler else _one_filler_each(POSITIONS.index(sql) if sql in POSITIONS else 0)):
        tree = template.copy()
        _hole(tree).replace(node.copy())
        try:
            out = _translate(tree, sql)
        except Exception as e:  # the property under test: nothing but CompileError
            raise AssertionError(f"{cls.__name__} (filler {filler.sql()}) in {sql!r} raised {e!r}") from e
        if not isinstance(out, CompileError):
            translated.add(cls.__name__)
            assert cls in READS, f"{cls.__name__} in {sql!r} was accepted but the front end does not read it"
    return translated


def _one_filler_each(turn: int) -> list[tuple[type[exp.Expression], exp.Expression, exp.Expression]]:
    """Of :func:`_built`, one node per class: the ``turn``-th of the fillers it builds with (modulo their number).
    Translating a node is what costs; a class's three fillers in all 68 positions took minutes of the suite."""
    per_class: dict[type, list] = {}
    for built in _built():
        per_class.setdefault(built[0], []).append(built)
    return [found[turn % len(found)] for found in per_class.values()]


@pytest.mark.parametrize("sql", POSITION_PARAMS)
def test_every_sqlglot_class_in_every_position_is_translated_or_refused(sql):
    _walk(sql)


@pytest.mark.slow  # (a check of the harness: make test runs it)
def test_the_walk_reaches_positions_where_classes_are_translated():
    """The harness itself: filled in, the plain classes do compile somewhere (a broken walk refuses all)."""
    translated = set()
    for sql in ("SELECT SUM(b) AS s FROM R WHERE a = 1 + hole", "SELECT SUM(hole) AS s FROM R",
                "SELECT SUM(b) AS s FROM R WHERE hole", "SELECT SUM(b) AS s FROM R WHERE g LIKE hole",
                "SELECT a, hole FROM R GROUP BY a"):
        translated |= _walk(sql, every_filler=True)
    assert {"Column", "Literal", "EQ", "Add", "Sum"} <= translated, translated


# accepted queries using every construct the front end reads (property 2 and 3 mutate them)
CORPUS = [
    "SELECT LOWER(g) AS l, UPPER(g) AS u, CHAR_LENGTH(g) AS n, REGEXP_EXTRACT(g, '(a)', 1) AS x, HOUR(b) AS h, "
    "SPLIT_INDEX(g, '/', 1) AS y FROM R",
    "SELECT g, COUNT(*) FILTER (WHERE b > 1) AS f FROM R GROUP BY g",
    "CREATE TABLE X(k INT NOT NULL, v DECIMAL(15, 2), w VARCHAR(3))",
    "SELECT a, SUM(b) AS s FROM R WHERE a IN LIST (1, 2) AND g IN ('A') GROUP BY a",
    "SELECT a AS k, COUNT(*) AS n, AVG(b) AS v FROM R WHERE NOT (a BETWEEN 1 AND 2 OR b <> 0) GROUP BY k ORDER BY n DESC",
    "SELECT g, SUM(r.b * 2 - -r.a / 4) AS s FROM R r JOIN S s ON r.b = s.b WHERE s.c >= 0.5 GROUP BY 1",
    "SELECT a, SUM(GREATEST(b, 2)) AS x, SUM(LEAST(a, b, 1)) AS y FROM R GROUP BY a",
    "SELECT SUM(CASE WHEN g LIKE 'B%' THEN b WHEN g NOT LIKE 'A' THEN 1 ELSE a END) AS s FROM R WHERE TRUE",
    "SELECT g, SUM(CASE a WHEN 1 THEN b END) AS s, COUNT(IF(b > 1, 1, NULL)) AS n FROM R GROUP BY ALL",
    "SELECT SUM(b) AS s FROM R WHERE d < CAST('1995-01-01' AS DATE) - INTERVAL '3' MONTH AND d > DATE('1994-01-01')",
    "SELECT SUM(b) AS s FROM R WHERE a = EXTRACT(MONTH FROM DATE '1995-03-01') AND d >= TS_OR_DS_TO_DATE('1990-01-01')",
    "SELECT SUM(b) AS s FROM R WHERE a < 1 + 2 * 3 AND b = (4) AND b <= 9 AND a > -1",
    "CREATE VIEW v(x) AS SELECT a, SUM(b) AS s FROM R GROUP BY a",
    "SELECT COUNT(r.g) AS n FROM R AS r, S WHERE r.b = S.b",
    """SELECT a, MIN(b) AS lo, MAX(DISTINCT g) AS hi, COUNT(DISTINCT d) AS n, SUM(b) / COUNT(*) - -1 AS r FROM R
       GROUP BY a HAVING NOT (SUM(b) > 2 OR MIN(b) BETWEEN 1 AND 3) AND COUNT(*) IN (1, 2) AND a <> 0""",
    "SELECT DISTINCT r.*, s.c FROM R r, S s WHERE r.b = s.b",
    "SELECT *, b FROM S WHERE c > 0",
    "SELECT t.x, SUM(y) AS s FROM (SELECT r.a AS x, r.b * s.c AS y FROM R r, S s WHERE r.b = s.b) AS t GROUP BY t.x",
    "WITH v(k, w) AS (SELECT a, b FROM R WHERE a > 1) SELECT k, SUM(w) AS n FROM v GROUP BY k",
    "SELECT a, b FROM R WHERE a > 1 UNION ALL SELECT b, a FROM R WHERE b < 2",
    "SELECT a, b FROM R WHERE a > 1 INTERSECT SELECT b, a FROM R WHERE b < 2",
    "SELECT a FROM R EXCEPT SELECT b FROM S",
    "SELECT t.g, SUM(t.s) AS total, COUNT(*) AS n FROM (SELECT a AS g, b, SUM(b) AS s FROM R GROUP BY a, b) AS t "
    "WHERE t.g > 1 GROUP BY t.g",
    "SELECT a, SUM(b) AS s FROM R GROUP BY a HAVING COUNT(*) > 1 AND SUM(b) > (SELECT SUM(c) FROM S WHERE c < 2) - 1",
    "SELECT u.k, SUM(v) AS s FROM (SELECT a AS k, b AS v FROM R UNION ALL SELECT r.b, s.b FROM R r, S s WHERE r.a = s.b) u GROUP BY u.k",
    "SELECT u.k, v FROM (SELECT a AS k, b AS v FROM R WHERE a > 1 UNION SELECT b, a FROM R) u WHERE u.v < 3",
    "SELECT SUBSTRING(g, 1, 2) AS p, YEAR(d) AS y, QUARTER(d) AS q, MONTH(d) AS m, DAY(d) AS dd, COUNT(*) AS n "
    "FROM R WHERE SUBSTRING(g, 2) IN ('A') GROUP BY p, y, q, m, dd",
    "SELECT DAYOFWEEK(d) AS w, ISODOW(d) AS i, DAYOFYEAR(d) AS y, WEEKOFYEAR(d) AS k, SUM(b * MONTH(d)) AS n "
    "FROM R GROUP BY w, i, y, k",
    "SELECT MOD(a, 3) AS m, SUM(b % 2) AS n FROM R WHERE a % 4 = 1 GROUP BY m",
    "SELECT r.a, SUM(COALESCE(s.c, 1)) AS t, COUNT(NULLIF(r.b, 2)) AS n FROM R r LEFT JOIN S s ON r.b = s.b "
    "WHERE s.c IS NULL OR r.a > 1 GROUP BY r.a",
    # derived tables read by the rules for others: one row (onerow), DISTINCT (distinctgroup), in a subquery
    # (subregroup), joined on some of its group columns (liftpairs)
    "SELECT r.a, SUM(r.b * t.x) AS s FROM R r, (SELECT SUM(S.c) AS x FROM S WHERE S.b > 1) t WHERE r.a < t.x "
    "GROUP BY r.a",
    "SELECT * FROM (SELECT DISTINCT S.b FROM S WHERE S.c > 0) t JOIN R r ON t.b = r.b",
    "SELECT a, SUM(b) AS s FROM R WHERE b IN (SELECT t.k FROM (SELECT S.b AS k, SUM(S.c) AS v FROM S GROUP BY "
    "S.b) t WHERE t.v > 1) GROUP BY a",
    "SELECT S.c, t.a, t.n FROM S, (SELECT R.a, R.b, COUNT(*) AS n FROM R GROUP BY R.a, R.b) t WHERE S.b = t.b",
]

# read fields whose content does not change the result, by design
NO_EFFECT = {
    ("Ordered", "desc"), ("Ordered", "nulls_first"),  # ORDER BY is ignored: a view is a set
    ("DataType", "expressions"), ("DataType", "nested"),  # DECIMAL(15, 2) is FLOAT whatever its precision
    ("Count", "big_int"),  # COUNT_BIG counts the same rows
    ("Create", "replace"), ("Create", "exists"),  # one declaration per name anyway
    ("Identifier", "quoted"),  # names are matched case-insensitively either way
    ("Literal", "is_string"),  # tried through other mutants (a string where a number was)
    ("Greatest", "ignore_nulls"), ("Least", "ignore_nulls"),  # the runtime has no NULLs (yet: issue 33)
}
MUTANTS = [exp.Literal.number(7), exp.column("b"), exp.Literal.string("Z"), exp.column("zz"), exp.Boolean(this=False)]


def _nodes(tree: exp.Expression) -> list[exp.Expression]:
    return list(tree.walk())


@pytest.mark.slow  # (make test-fast: the class walk over sampled positions stays)
def test_a_field_the_front_end_does_not_read_is_refused():
    checked = set()
    for sql in CORPUS:
        tree = sqlglot.parse_one(sql)
        assert not isinstance(_translate(tree, sql), CompileError), sql
        for i, node in enumerate(_nodes(tree)):
            reads = READS[type(node)]
            checked.add(type(node))
            for arg in type(node).arg_types:
                if arg in reads or present(node.args.get(arg)):
                    continue
                for value in (exp.column("a"), True):
                    copy = tree.copy()
                    _nodes(copy)[i].set(arg, value)
                    out = _translate(copy, sql)
                    assert isinstance(out, CompileError), f"{type(node).__name__}.{arg} = {value!r} ignored in {sql!r}"
    # every node type the front end reads occurs in an accepted query
    assert not set(READS) - checked, set(READS) - checked


@pytest.mark.slow
def test_a_field_the_front_end_reads_matters():
    for sql in CORPUS:
        tree = sqlglot.parse_one(sql)
        before = _translate(tree, sql)
        for i, node in enumerate(_nodes(tree)):
            if node.find_ancestor(exp.DataType) is not None:  # type parameters: DECIMAL(15, 2) is FLOAT
                continue
            for arg, value in node.args.items():
                if (type(node).__name__, arg) in NO_EFFECT or not present(value):
                    continue
                variants = _variants(value)
                outcomes = []
                for v in variants:
                    copy = tree.copy()
                    _nodes(copy)[i].set(arg, v)
                    outcomes.append(_translate(copy, sql))
                assert any(isinstance(o, CompileError) or o != before for o in outcomes), (
                    f"{type(node).__name__}.{arg} of {sql!r} never changes the result")


def _variants(value) -> list:
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, str):
        return [value + "x", ""]
    if isinstance(value, list):
        return [[m.copy()] + [v.copy() for v in value[1:]] for m in MUTANTS] + [[]]
    if isinstance(value, exp.Expression):
        return [m.copy() for m in MUTANTS if m != value]
    return [None]
