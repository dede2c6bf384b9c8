"""A map's defining query evaluated over columns: each term's relations joined and filtered by Arrow, the
product summed per key by Arrow's group-by, no Python per row.

Why: a window join's upper stages (m3/winstages.py) evaluate their maps'
definitions over every closed window's rows with :func:`.initial.evaluate_definition`,
which joins and sums row at a time in Python: Nexmark q5's per-window
``MAX`` of each auction's count and the join ``num >= maxn`` cost a Python
step per leaf row, about a quarter of the query's CPU.  The common shape --
a product of relation atoms of variables, comparisons of variables and
constants, and INT variables or constants as factors -- is a relational
join, a filter and a grouped sum, which Arrow does in C.

Exact, or not used: :func:`evaluate_columns` answers None (the row
evaluator runs) for anything whose result could differ from the row
evaluator's: another factor (a lift, a function, an ``IF``, a nested
sum), a ``LIKE``, a column not all of one type among ``int``, ``float``,
``str`` (a NULL, a bool, a date), a NaN or a signed zero among floats, a
float join key or a float factor (a float sum depends on its order), an
int beyond 64 bits or a sum that could leave them, small inputs
(:data:`SMALL`, :data:`SMALL_COLUMNS`: Arrow's fixed cost per call), and
a term whose relations share no variable (a product) or whose join would
far outgrow its inputs (:data:`CAP_FACTOR`): Arrow holds a join's rows at
once, the row evaluator probes and holds none.

>>> from ..syntax import parse_program
>>> from .initial import _terms
>>> p = parse_program('''CREATE TABLE R(A INT, B INT); CREATE TABLE S(B INT, C INT);
... DECLARE MAP m[A: INT] : INT := R(A, B) * S(B, C) * C * {C < 10};''')
>>> m = p.maps[0]
>>> evaluate_columns(m, _terms(m.definition), {"R": [(1, 2), (1, 3)], "S": [(2, 5), (2, 20), (3, 1)]}, small=0)
{(1,): 6}
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..ast import Cmp, Const, Expr, MapDecl, RelAtom, Var

#: Below this many rows over a definition's relations the row evaluator is cheaper than making them columns and
#: Arrow's calls (each join or group-by costs about a millisecond whatever its size: Acero's plan); measured on
#: q5's stages' two definitions, docs/benchmarks.md.  Rows given as columns already (a table: closed windows,
#: m3/runtime/closed_columns.py) are cheaper in Arrow from :data:`SMALL_COLUMNS` on.
SMALL = 1024
SMALL_COLUMNS = 512
#: A join producing more than ``CAP_FACTOR`` times the term's largest relation plus ``CAP_SLACK`` rows is declined
#: (:func:`_cap`): Arrow would hold all of it at once, the row evaluator none of it.
CAP_FACTOR = 4
CAP_SLACK = 65536

_COMPARE = {"=": pc.equal, "<>": pc.not_equal, "<": pc.less, "<=": pc.less_equal}
_TYPES = {int: pa.int64(), float: pa.float64(), str: pa.string()}
_NUMPY = {int: np.int64, float: np.float64}
_LIMIT = 2 ** 62  # a sum of products kept below it cannot leave int64


class _Unsupported(Exception):
    """The term or its data is not one this module evaluates exactly: the row evaluator runs."""


def evaluate_columns(m: MapDecl, terms: Sequence[Sequence[Expr]], tables: dict[str, list],
                     epsilon: float = 0.0, small: int = SMALL) -> dict[tuple, object] | None:
    """``{key: value}`` of ``m``'s definition (distributed into ``terms``, factor lists) over ``tables``, as
    :func:`.initial.evaluate_definition` gives it; None where this module does not apply (module docstring)."""
    keys = [k.name for k in m.keys]
    try:
        plans = [_plan(factors, keys) for factors in terms]
        read = [tables.get(a.name, ()) for atoms, _, _ in plans for a in atoms]
        if sum(map(len, read)) < (min(small, SMALL_COLUMNS) if any(isinstance(t, pa.Table) for t in read) else small):
            return None
        out: dict[tuple, object] = {}
        for atoms, checks, factors in plans:
            _add_term(out, atoms, checks, factors, keys, tables)
    except (_Unsupported, pa.ArrowException, OverflowError):
        return None
    return {k: v for k, v in out.items() if abs(v) > epsilon}


def _plan(factors: Sequence[Expr], keys: list[str]) -> tuple[list[RelAtom], list[Cmp], list[Expr]]:
    """A term's atoms, comparisons and factors, checked to be the shape evaluated here."""
    atoms = [f for f in factors if isinstance(f, RelAtom)]
    bound = {a.name for atom in atoms for a in atom.args if isinstance(a, Var)}
    if not atoms or any(not isinstance(a, Var) for atom in atoms for a in atom.args):
        raise _Unsupported("a term without relations, or a constant in an atom")
    checks, rest = [], []
    for f in factors:
        if isinstance(f, RelAtom):
            continue
        if isinstance(f, Cmp) and f.op in _COMPARE and all(_operand(x, bound) for x in (f.left, f.right)):
            checks.append(f)
        elif _operand(f, bound) and not (isinstance(f, Const) and type(f.value) is not int):
            rest.append(f)
        else:
            raise _Unsupported(f"factor {f!r}")
    if not set(keys) <= bound:
        raise _Unsupported("a key no relation binds")
    return atoms, checks, rest


def _operand(e: Expr, bound: set[str]) -> bool:
    return (isinstance(e, Var) and e.name in bound) or (isinstance(e, Const) and type(e.value) in _TYPES)


def _column(values: Sequence) -> pa.Array:
    """One relation column as Arrow, its values all of one Python type (else :class:`_Unsupported`)."""
    kinds = set(map(type, values))
    if len(kinds) != 1 or (kind := kinds.pop()) not in _TYPES:
        raise _Unsupported(f"a column of {kinds}")
    if kind is str:
        try:
            return pa.array(values, pa.string())
        except UnicodeEncodeError:  # (a lone surrogate: Python holds and compares it, UTF-8 cannot)
            raise _Unsupported("a string UTF-8 cannot encode") from None
    array = pa.array(np.fromiter(values, _NUMPY[kind], len(values)))  # (a bigger int raises OverflowError)
    if kind is float:
        signed_zero = pc.and_(pc.equal(array, 0.0), pc.less(pc.divide(1.0, array), 0.0))
        if pc.any(pc.is_nan(array)).as_py() or pc.any(signed_zero).as_py():
            raise _Unsupported("a NaN or -0.0")
    return array


def _atom_table(atom: RelAtom, rows: list | pa.Table) -> pa.Table:
    """``atom``'s relation as a table of its variables, rows naming a variable twice kept where they agree."""
    if isinstance(rows, pa.Table):  # (made of INT columns alone: m3/runtime/closed_columns.py)
        if any(c.type != pa.int64() or c.null_count for c in rows.columns):
            raise _Unsupported("a column given as Arrow that is not INT")
        columns = list(rows.columns)
    else:
        columns = [_column(c) for c in zip(*rows)]
    first: dict[str, int] = {}
    mask = None
    for i, a in enumerate(atom.args):
        if a.name in first:
            same = pc.equal(columns[first[a.name]], columns[i])
            mask = same if mask is None else pc.and_(mask, same)
        else:
            first[a.name] = i
    table = pa.table({name: columns[i] for name, i in first.items()})
    return table if mask is None else table.filter(mask)


def _cap(largest: int) -> int:
    """The most rows a join may produce before the term is declined: a few times its largest relation, so
    Arrow's tables never hold much more than the row evaluator's (which probes and keeps only the sums)."""
    return CAP_FACTOR * largest + CAP_SLACK


def _join_size(left: pa.Table, right: pa.Table, keys: list[str]) -> int:
    """Rows of ``left``'s inner join with ``right`` on ``keys``, counted from each side's rows per key (two
    group-bys and a join of the counts: no product made)."""
    counts = [t.select(keys).group_by(keys, use_threads=False).aggregate([([], "count_all")]) for t in (left, right)]
    both = counts[0].join(counts[1], keys=keys, join_type="inner", right_suffix="_r", use_threads=False)
    if not len(both):
        return 0
    product = pc.multiply_checked(both.column("count_all"), both.column("count_all_r"))
    return pc.sum(product).as_py()


def _joined(atoms: list[RelAtom], tables: dict[str, list]) -> pa.Table | None:
    """The term's atoms joined on their shared variables (None: a relation is empty, the term adds nothing).

    In a connected order: the smallest atom first, then each time the smallest atom sharing a variable with
    those joined, so no join is a product of unlinked relations (by size alone, ``R(A,B) * S(C,D) * T(B,C)``
    built R x S before T linked them: 24 s and 2 GB at 6,000 rows each).  A term that needs a product, or a
    join whose output would pass :func:`_cap` (counted before it is made), is declined: the row evaluator
    probes row at a time and never holds the product."""
    relations = {a.name: tables.get(a.name, []) for a in atoms}
    if any(not len(rows) for rows in relations.values()):
        return None
    cap = _cap(max(map(len, relations.values())))
    pending = sorted(atoms, key=lambda a: len(relations[a.name]))
    first = pending.pop(0)
    joined = _atom_table(first, relations[first.name])
    while pending:
        atom = next((a for a in pending if any(v.name in joined.column_names for v in a.args)), None)
        if atom is None:
            raise _Unsupported("a product of relations sharing no variable")
        pending.remove(atom)
        table = _atom_table(atom, relations[atom.name])
        common = [n for n in table.column_names if n in joined.column_names]
        if any(pa.types.is_floating(table.schema.field(n).type) for n in common):
            raise _Unsupported("a FLOAT join key (Python's equality, not Arrow's bits)")
        if _join_size(joined, table, common) > cap:
            raise _Unsupported("a join larger than its inputs allow (the row evaluator probes)")
        joined = joined.join(table, keys=common, join_type="inner", use_threads=False)
    return joined


def _value_of(e: Expr, table: pa.Table):
    return table.column(e.name) if isinstance(e, Var) else pa.scalar(e.value, _TYPES[type(e.value)])


def _add_term(out: dict, atoms: list[RelAtom], checks: list[Cmp], factors: list[Expr], keys: list[str],
              tables: dict[str, list]) -> None:
    """Add one term's products, summed per key, to ``out``."""
    joined = _joined(atoms, tables)
    if joined is None:
        return
    for c in checks:
        left, right = _value_of(c.left, joined), _value_of(c.right, joined)
        if left.type != right.type:
            raise _Unsupported("a comparison of two types")
        joined = joined.filter(_COMPARE[c.op](left, right))
    if not len(joined):
        return
    value = pa.repeat(pa.scalar(1, pa.int64()), len(joined))
    for f in factors:
        x = _value_of(f, joined)
        if x.type != pa.int64():
            raise _Unsupported("a factor that is not an INT")
        value = pc.multiply_checked(value, x)
    biggest = pc.max(pc.abs_checked(value)).as_py()
    if biggest * len(joined) >= _LIMIT:
        raise _Unsupported("a sum that could leave 64 bits")
    summed = pa.table({**{k: joined.column(k) for k in keys}, "__v": value}).group_by(keys, use_threads=False) \
        .aggregate([("__v", "sum")])
    values = summed.column("__v_sum").to_pylist()
    if not keys:
        out[()] = out.get((), 0) + values[0]
        return
    for key, v in zip(zip(*(summed.column(k).to_pylist() for k in keys)), values):
        if v:
            out[key] = out.get(key, 0) + v


def table_rows(rows: Sequence[tuple] | pa.Table) -> list[tuple]:
    """A relation's rows as tuples, given as rows or as a table of columns (where the columns are declined).

    >>> table_rows(pa.table({"a": [1, 2], "b": [3, 4]})), table_rows([(5,)])
    ([(1, 3), (2, 4)], [(5,)])
    """
    if not isinstance(rows, pa.Table):
        return list(rows)
    return list(zip(*(c.to_pylist() for c in rows.columns))) if rows.num_columns else [()] * rows.num_rows
