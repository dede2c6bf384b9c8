"""Truth, ``and``/``or``/``not``, ``is true``, ``coalesce`` and ``is null`` on Arrow columns, as the row code has them.

Two logics, chosen per subtree as the row code chooses them
(:mod:`boreas.node.compile`): a subtree that reads a ``nullable`` field has
SQL's three-valued logic (:mod:`boreas.node.null_logic`: ``_and3``,
``_or3``, ``_not3``), which is Kleene's -- pyarrow's ``and_kleene`` and
``or_kleene`` over the operands' Python truth with NULL kept.  Elsewhere
Python's own: ``a and b`` is ``a`` when ``a`` is falsy, else ``b``, so it
is a value of its operands' kind (``if_else`` on ``a``'s truth), and where
the operands' kinds differ only its truth is known
(:attr:`~.arrow_nodes.Node.truth_only`).  Python's truth: None and ``""``
false, ``nan`` true.

>>> import pyarrow as pa
>>> from boreas.node.operators.arrow_nodes import Eval, Node
>>> i = Node("int", lambda ev: ev.column(0), nullable=True)
>>> ev = Eval(pa.record_batch([pa.array([0, 2, None])], names=["i"]))
>>> both(i, i, False).run(ev).to_pylist(), truth(i)(ev).to_pylist(), truth3(i)(ev).to_pylist()
([0, 2, None], [False, True, False], [False, True, None])
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from boreas.node.compile import BOOL, FLOAT, INT, STR

from . import arrow_mixed
from .arrow_nodes import NUM, Eval, Node, Run, Unsupported, Value
from .arrow_ops import wide


def truth3(node: Node) -> Run:
    """``ev ->`` each row value's Python truth, NULL kept (three-valued logic's operand).  Not of a truth-only
    value (``y and w`` of two kinds): its None (a failed upstream field) is not kept, so NULL would be lost."""
    if node.truth_only:
        raise Unsupported("the three-valued truth of a value whose kind depends on the row")
    if node.kind == BOOL:
        return node.run
    if node.kind == STR:
        return lambda ev: pc.greater(pc.utf8_length(node.run(ev)), 0)
    if node.kind in (INT, FLOAT, NUM):  # (a mixed value's double is zero where its int is)
        return lambda ev: pc.not_equal(node.run(ev), 0)
    raise Unsupported(f"the truth of a {node.kind}")


def truth(node: Node) -> Run:
    """``ev ->`` each row value's Python truth as a non-null mask (None is false)."""
    if node.truth_only:  # (its run is that truth already)
        return lambda ev: _filled(node.run(ev))
    test = truth3(node)
    if not node.nullable and node.kind == BOOL:
        return test
    return lambda ev: _filled(test(ev))


def _filled(value: Value) -> Value:
    if isinstance(value, pa.Scalar):
        return pa.scalar(bool(value.is_valid and value.as_py()))
    return pc.fill_null(value, False) if value.null_count else value


def both(a: Node, b: Node, three: bool) -> Node:
    """``a and b``."""
    return _logic(a, b, three, conjunction=True)


def either(a: Node, b: Node, three: bool) -> Node:
    """``a or b``."""
    return _logic(a, b, three, conjunction=False)


def _logic(a: Node, b: Node, three: bool, conjunction: bool) -> Node:
    if three:  # _and3/_or3: Kleene's, always a bool (or NULL)
        x, y = truth3(a), truth3(b)
        fn = pc.and_kleene if conjunction else pc.or_kleene
        return Node(BOOL, lambda ev: fn(x(ev), y(ev)), nullable=True)
    # Python skips b where a decides: b's failures there are only flagged (Eval.guarded)
    if a.kind == b.kind == BOOL and not (a.nullable or b.nullable or a.truth_only or b.truth_only):
        fn = pc.and_ if conjunction else pc.or_
        return Node(BOOL, lambda ev: fn(a.run(ev), ev.guarded(b.run)))
    tx, ty = truth(a), truth(b)
    if a.kind != b.kind or a.truth_only or b.truth_only or a.kind == NUM:  # one operand or the other: its truth
        fn = pc.and_ if conjunction else pc.or_
        return Node(BOOL, lambda ev: fn(tx(ev), ev.guarded(ty)), truth_only=True)

    def run(ev: Eval) -> Value:  # Python's: a if a is falsy (truthy, for or) else b
        first = tx(ev)
        x, y = a.run(ev), ev.guarded(b.run)
        return pc.if_else(first, y, x) if conjunction else pc.if_else(first, x, y)
    return Node(a.kind, run, nullable=a.nullable or b.nullable)


def negation(a: Node, three: bool) -> Node:
    """``not a``: a bool; under three-valued logic NOT NULL is NULL."""
    if three:
        x = truth3(a)
        return Node(BOOL, lambda ev: pc.invert(x(ev)), nullable=True)
    x = truth(a)
    return Node(BOOL, lambda ev: pc.invert(x(ev)))


def is_boolean(a: Node, value: bool) -> Node:
    """``a is true`` / ``a is false``: ``bool(a) is True`` (None is false, so ``None is false`` holds)."""
    x = truth(a)
    return Node(BOOL, x if value else (lambda ev: pc.invert(x(ev))))


def is_null(a: Node) -> Node:
    """``a is null``: Python's ``a is None``."""
    if a.truth_only:
        raise Unsupported("is null of a value whose kind depends on the row")
    if not a.nullable:  # never None, but computed all the same: a row where it fails fails the expression
        never = pa.scalar(False)
        return Node(BOOL, lambda ev: (a.run(ev), never)[1])
    return Node(BOOL, lambda ev: pc.is_null(a.run(ev)))


def coalesce(args: list[Node]) -> Node:
    """``coalesce(...)``: the first value that is not None (every argument is computed, as the row code's
    ``_coalesce(*values)`` does); the arguments of one kind (a null literal is skipped)."""
    values = [a for a in args if a.kind != "null"]
    kinds = {a.kind for a in values}
    if len(kinds) > 1 and kinds <= {INT, FLOAT, NUM} or kinds == {NUM}:  # ints and doubles: arrow_mixed
        return arrow_mixed.coalesce(values)
    if len(kinds) != 1 or any(a.truth_only for a in values):
        raise Unsupported("coalesce of mixed kinds (the row value's type depends on the row)")
    kind = kinds.pop()
    convert: Callable[[Value], Value] = (lambda v: wide(v, kind)) if kind in (INT, FLOAT) else (lambda v: v)
    if len(values) == 1:
        return values[0]

    def run(ev: Eval) -> Value:
        return pc.coalesce(*[convert(a.run(ev)) for a in values])
    return Node(kind, run, nullable=all(a.nullable for a in values))
