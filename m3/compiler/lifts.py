"""Pass 3a', bind lifts: a computed key the event determines becomes the function of the event's column.

A query grouped by (or comparing) a function of a column (``EXTRACT(YEAR
FROM d)``, ``SUBSTRING(p, 1, 2)``) has a variable ``K`` for the value and
a *lift* ``{K = YEAR(D)}`` in every term (:func:`.normalize.lift_computed`,
DBToaster's ``(K ^= f(D))``).  After the delta of an event that binds ``D``,
``K`` is a function of the event: this pass puts ``YEAR(D)`` where ``K`` was
(the statement's target key, map arguments, guards), so the trigger computes
it from the row and the lift, now ``{YEAR(D) = YEAR(D)}``, is decided true
by :mod:`.simplify`.  Where ``D`` is not bound by the event, the lift stays:
:mod:`.materialize` puts it in the map of the atoms that bind ``D``, and that
map is keyed by ``K`` (by the year, not the date) where the target needs it.
A call of constants only (an atom's constant argument) is folded.  A
variable that a lift over loop variables defines stays a loop variable even
where the event gives it a value too (``YEAR(r.d) = YEAR(s.e)``: on an S
event ``{K = YEAR(E)}`` is a loop guard over R's map keyed by ``K``, not a
lift: putting ``YEAR(E)`` there would compare it with ``YEAR(D)`` of a loop
variable, which a trigger cannot compute).

>>> from ..calculus import Atom, Cond, Fn, Lit, Term, V
>>> from .delta import DeltaTerm
>>> K, D, E = V("K", "INT"), V("D", "DATE"), V("E", "DATE")
>>> lift = Cond("=", K, Fn("YEAR", (E,), "INT"))
>>> for d in bind_lifts((DeltaTerm((K,), Term(1, (), (lift, Cond("<", Lit(1994), K)))),), (E,)): print(d)
[YEAR(E)] += {YEAR(E) = YEAR(E)} * {1994 < YEAR(E)}
>>> print(bind_lifts((DeltaTerm((K,), Term(1, (Atom("R", (D,)),), (Cond("=", K, Fn("YEAR", (D,), "INT")),))),), (E,))[0])
[K] += R(D) * {K = YEAR(D)}
"""

from __future__ import annotations

from dataclasses import replace

from ..calculus import Atom, Cond, Fn, Lit, PolyVal, Term, V, Value, lift_in, substitute  # noqa: F401 (Atom, Term: doctest)
from ..functions import apply
from .delta import DeltaTerm


def fold_call(f: Fn) -> Value:
    """A call of constants only as its constant, else the call.

    >>> import datetime
    >>> fold_call(Fn("YEAR", (Lit(datetime.date(1995, 3, 15)),), "INT")), fold_call(Fn("DAY", (V("D", "DATE"),), "INT")).name
    (Lit(value=1995), 'DAY')
    """
    if all(isinstance(a, Lit) for a in f.args):
        return Lit(apply(f.name, tuple(a.value for a in f.args)))
    return f


def _lift(c: Cond, atoms) -> V | None:
    """``K`` when ``c`` lifts it (:func:`..calculus.lift_in`), or binds it to a constant no atom binds it to (a
    constant key, ``{K = 0}``: :mod:`.outerkeys`)."""
    if c.op == "=" and isinstance(c.left, V) and isinstance(c.right, Lit) and not any(c.left in a.vars() for a in atoms):
        return c.left
    return lift_in(c, atoms)


def bind_lift(d: DeltaTerm, event: set[V]) -> DeltaTerm:
    """``d`` with every lifted variable the event determines replaced by its call (module doc); a constant
    key's, by its constant.

    >>> K, D = V("K", "INT"), V("D", "DATE")
    >>> print(bind_lift(DeltaTerm((K, D), Term(1, (Atom("R", (D,)),), (Cond("=", K, Lit(0)),))), set()))
    [0, D] += R(D) * {0 = 0}
    """
    while True:
        atoms = d.term.atoms
        loops = {k for c in d.term.conds if (k := _lift(c, atoms)) is not None and not _bindable(c, event)}
        found = next(((k, c.right) for c in d.term.conds if (k := _lift(c, atoms)) is not None and k not in event
                      and k not in loops and _bindable(c, event)), None)
        if found is None:
            return d
        k, call = found
        mapping = {k: _fold(call)}
        term = substitute(d.term, mapping)
        conds = tuple(Cond(c.op, _fold(c.left), _fold(c.right)) for c in term.conds)
        d = DeltaTerm(tuple(substitute(x, mapping) for x in d.keys), replace(term, conds=conds))


def _bindable(c: Cond, event: set[V]) -> bool:
    """Whether the trigger computes the lift's value: a call of event variables, or arithmetic that reads the
    event (``{K = A + C}``, ``A`` the event's, ``C`` a loop variable: the statement computes ``A + C`` per
    entry of the map that binds ``C``, :mod:`.materialize`), or a vector function of both (``VEC_LENGTH(A + -1 * C,
    ...)``, :mod:`.libargs`), computed so."""
    vs = set(c.right.vars()) if not isinstance(c.right, Lit) else set()
    return vs <= event or (isinstance(c.right, (PolyVal, Fn)) and bool(vs & event))


def _fold(x: Value) -> Value:
    return fold_call(x) if isinstance(x, Fn) else x


def bind_lifts(terms: tuple[DeltaTerm, ...], event: tuple[V, ...]) -> tuple[DeltaTerm, ...]:
    """:func:`bind_lift` of every term."""
    ev = set(event)
    return tuple(bind_lift(d, ev) for d in terms)
