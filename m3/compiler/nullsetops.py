"""UNION [ALL], INTERSECT and EXCEPT of views of rows reading nullable columns: each branch rewritten alike.

Why its own module (called by :mod:`.threevalued` for a set operation at the top of a query): a branch is an
ordinary SELECT, rewritten in its own scope; a nullable column it selects is a key with its indicator beside
it (:mod:`.nullshown`), appended after its items.  The set operation then compares rows by their keys, the
indicators included, so NULLs are equal to each other and apart from 0, as SQL's UNION, INTERSECT and EXCEPT
treat them (unlike ``=``).  That holds only where every branch has its indicators at the same places: the
same items nullable in each (:func:`rewrite_branches` checks it; ``SELECT b FROM R UNION SELECT d FROM S``
with only ``b`` nullable is refused by name: the other branch would need a constant indicator, which a view of
rows reads as a value, not a key).  Branches with subqueries are refused by name too.  A set operation whose
branches are all aggregated has each rewritten as a query of its own, its hidden counts (``__nonnull_k``) and
indicator keys read by :mod:`.setagg` (:mod:`.setbranch`), which lines them up or refuses by name.

>>> import sqlglot
>>> from .examples import PlainErrors
>>> from .threevalued import rewrite
>>> from ..ast import Column, RelationDecl
>>> cols = lambda *names: tuple(Column(n, "INT") for n in names)
>>> rels = {"R": RelationDecl("R", "STREAM", cols("a", "b", "b__null")),
...         "S": RelationDecl("S", "STREAM", cols("b", "b__null", "d"))}
>>> def show(sql): return rewrite(sqlglot.parse_one(sql), rels, PlainErrors()).sql()
>>> show("SELECT a, b FROM R WHERE b > 1 EXCEPT SELECT d, b FROM S")
'SELECT a, b, b__null FROM R WHERE (b > 1 AND b__null = 0) EXCEPT SELECT d, b, b__null FROM S'
>>> show("SELECT b FROM R UNION SELECT d FROM S")
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported set operation over nullable columns whose branches differ in which items are nullable (SELECT b FROM R: b; SELECT d FROM S: none): every branch's item at a place nullable, or none (docs/m3.md, "NULLs")
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from ..nullable import SUFFIX
from .nodes import sql_of
from .nullexprkeys import KEY_PREFIX
from .resolve import Positions


def leaves(tree: exp.Expression) -> list[exp.Expression]:
    """The branches of a set operation, left to right (a branch that is not a SELECT among them)."""
    if isinstance(tree, exp.SetOperation):
        return leaves(tree.this) + leaves(tree.expression)
    return [tree.this if type(tree) is exp.Subquery else tree]


def rewrite_branches(tree: exp.SetOperation, one: Callable[[exp.Select], exp.Select], ctx: Positions) -> exp.Expression:
    """A copy of ``tree`` with each branch rewritten by ``one`` (module doc), or refused by name."""
    tree = tree.copy()
    patterns = []
    if all(type(b) is exp.Select and not any(isinstance(n, exp.Select) and n is not b for n in b.walk()) and
           any(isinstance(n, exp.AggFunc) for e in b.expressions for n in e.walk()) for b in leaves(tree)):
        for branch in leaves(tree):  # aggregated branches: each its own query, its parts lined up by :mod:`.setagg`
            branch.replace(one(branch.copy()))  # (detached: its rewrite sees no enclosing query)
        return tree
    for branch in leaves(tree):
        if type(branch) is not exp.Select or branch.args.get("group") is not None or any(
                isinstance(n, (exp.AggFunc, exp.Select)) and n is not branch for n in branch.walk()):
            raise ctx.error(f"unsupported set operation over nullable columns with a branch that is not a view of "
                            f"rows without subqueries ({sql_of(branch)}) (docs/m3.md, \"NULLs\")", branch)
        width, written = len(branch.expressions), sql_of(branch)
        done = one(branch)
        if done is not branch:
            branch.replace(done)
        patterns.append((written, width, *_nullable_items(done, width)))
    first = patterns[0]
    for other in patterns[1:]:
        if other[1:3] != first[1:3]:
            said = "; ".join(f"{s}: {', '.join(p) or 'none'}" for s, _, _, p in (first, other))
            raise ctx.error(f"unsupported set operation over nullable columns whose branches differ in which items "
                            f"are nullable ({said}): every branch's item at a place nullable, or none "
                            "(docs/m3.md, \"NULLs\")", tree)
    return tree


def _nullable_items(sel: exp.Select, width: int) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The places of a rewritten branch's items that got an indicator, and their names (in the order added)."""
    items = [e.this if type(e) is exp.Alias else e for e in sel.expressions]
    aliases = [e.alias if type(e) is exp.Alias else "" for e in sel.expressions]
    places, names = [], []
    for flag, alias in zip(items[width:], aliases[width:]):
        of = flag.name[:-len(SUFFIX)].lower() if type(flag) is exp.Column and flag.name.endswith(SUFFIX) else None
        at = next((i for i, e in enumerate(items[:width]) if type(e) is exp.Column and e.name.lower() == of and
                   e.table.lower() == flag.table.lower()), None)
        if alias.startswith(KEY_PREFIX) and alias[len(KEY_PREFIX):].isdigit():  # (an arithmetic key's indicator)
            at = int(alias[len(KEY_PREFIX):])
        places.append(at)
        names.append(items[at].sql() if at is not None else flag.sql())
    return tuple(places), tuple(names)
