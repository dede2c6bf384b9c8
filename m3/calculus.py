"""The sum-of-products calculus the compiler works in (the "ring of databases" view of DBToaster).

A query is an :class:`Agg` — ``AggSum([keys], t1 + t2 + ...)`` — whose terms
are products of

* relation atoms ``R(x, y)`` (the multiplicity of a tuple),
* atomic comparisons ``{x < 5}`` (0 or 1),
* polynomial factors over variables (``(1 + -1*DISC)``), and
* a numeric coefficient.

Equi-joins are not conditions: joined columns share one variable.  The value
of an Agg at a key is the sum, over every assignment of the other variables,
of its terms.  Everything is immutable, so passes are pure functions.

>>> R = Atom("R", (V("A", "INT"), V("B", "INT")))
>>> q = Agg((V("A", "INT"),), (Term(2, (R,), (Cond("<", V("B", "INT"), Lit(5)),), (poly_var(V("B", "INT")),)),))
>>> print(q)
AggSum([A], 2 * R(A, B) * {B < 5} * B)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from . import ast

Number = int | float


@dataclass(frozen=True, order=True)
class V:
    """A variable, typed by the column it ranges over."""

    name: str
    type: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Lit:
    """A constant."""

    value: object

    def __str__(self) -> str:
        from .printer import format_const

        return format_const(self.value)


@dataclass(frozen=True)
class Fn:
    """A scalar function of a variable (and integer constants): ``YEAR(D)``, ``SUBSTRING(P, 1, 2)``
    (:mod:`.functions`), or of several values (``VEC_LENGTH(X + -1 * X_2, Y, 0)``: :data:`.library.VECTOR`).  It stands in a *lift* ``{K = YEAR(D)}`` (:func:`lifted`); once the event binds
    ``D``, the compiler puts the call where ``K`` was (a value computed from the event's row)."""

    name: str
    args: tuple  # V | Lit, or (a vector function's) any Value
    type: str  # the value's M3 type

    def vars(self) -> tuple[V, ...]:
        """Its variables: a one-variable call's, or those of a vector function's arguments (:data:`..library.VECTOR`:
        polynomials over the joined variables)."""
        return tuple(dict.fromkeys(v for x in self.args for v in value_vars(x)))

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.args))})"


@dataclass(frozen=True)
class PolyVal:
    """Arithmetic over variables as one side of a comparison (``{1000 < A_PRICE + -1 * B_PRICE}``: the axis
    finder's ``a.price - b.price > 1000``).  A comparison is 0/1, not a product, so its side cannot be split
    into polynomial factors as an aggregated value is: it stays a whole polynomial, built by :func:`poly_value`
    (which keeps a constant or a lone variable in its own form)."""

    poly: tuple  # a Poly (defined below): ((coefficient, (variable, ...)), ...)

    def vars(self) -> tuple[V, ...]:
        return tuple(dict.fromkeys(x for _, vs in self.poly for v in vs for x in value_vars(v)))

    def __str__(self) -> str:
        return poly_str(self.poly)


Value = V | Lit | Fn | PolyVal


def value_vars(x: Value) -> tuple[V, ...]:
    """The variables of a value: itself, or a call's, or those of a polynomial.

    >>> value_vars(Fn("YEAR", (V("D", "DATE"),), "INT")), value_vars(Lit(3))
    ((V(name='D', type='DATE'),), ())
    """
    return (x,) if isinstance(x, V) else x.vars() if isinstance(x, (Fn, PolyVal)) else ()


def poly_value(p: Poly) -> Value:
    """A polynomial as a comparison side: a constant as a :class:`Lit`, a lone variable (or call) as itself,
    anything else as a :class:`PolyVal` (so a comparison the event makes constant is decided by
    :mod:`.compiler.simplify`, and one it reduces to a variable reads as before).

    >>> a, b = V("A", "INT"), V("B", "INT")
    >>> poly_value(poly_const(3)), poly_value(poly_var(a)), str(poly_value(poly_add(poly_var(a), poly_scale(poly_var(b), -1))))
    (Lit(value=3), V(name='A', type='INT'), '(A + -1 * B)')
    """
    if not p:
        return Lit(0)
    if len(p) == 1 and not p[0][1]:
        return Lit(p[0][0])
    if len(p) == 1 and p[0][0] == 1 and len(p[0][1]) == 1:
        return p[0][1][0]
    return PolyVal(p)


@dataclass(frozen=True)
class Cond:
    """An atomic comparison ``left op right``, op in ``= <> < <=`` (or a lift ``{K = f(X)}``: :func:`lifted`)."""

    op: str
    left: Value
    right: Value

    def vars(self) -> tuple[V, ...]:
        return tuple(dict.fromkeys(value_vars(self.left) + value_vars(self.right)))

    def __str__(self) -> str:
        return f"{{{self.left} {self.op} {self.right}}}"


@dataclass(frozen=True)
class Atom:
    """A relation atom ``R(args)``."""

    rel: str
    args: tuple[Value, ...]

    def vars(self) -> tuple[V, ...]:
        return tuple(x for x in self.args if isinstance(x, V))

    def __str__(self) -> str:
        return f"{self.rel}({', '.join(map(str, self.args))})"


# A polynomial is a sorted tuple of monomials (coefficient, sorted variables).
Mono = tuple[Number, tuple[V, ...]]
Poly = tuple[Mono, ...]


def poly_const(c: Number) -> Poly:
    return ((c, ()),) if c else ()


def _order(v) -> tuple:
    """A monomial's factors in order: variables by name and type (as ever), then calls a bound lift left there
    (``C * MONTH(D)``, :mod:`boreas.m3.compiler.lifts`)."""
    return (0, v.name, v.type) if isinstance(v, V) else (1, v.name, str(v))


def poly_var(v: V) -> Poly:
    return ((1, (v,)),)


def poly_add(a: Poly, b: Poly) -> Poly:
    """Sum of two polynomials, like monomials merged, zeros dropped.

    >>> x = V("X", "INT")
    >>> poly_add(poly_var(x), poly_const(1))
    ((1, ()), (1, (V(name='X', type='INT'),)))
    """
    acc: dict[tuple[V, ...], Number] = {}
    for c, vs in a + b:
        acc[vs] = acc.get(vs, 0) + c
    return tuple(sorted(((c, vs) for vs, c in acc.items() if c), key=lambda m: (len(m[1]), [_order(v) for v in m[1]])))


def poly_mul(a: Poly, b: Poly) -> Poly:
    out: Poly = ()
    for (ca, va), (cb, vb) in itertools.product(a, b):
        out = poly_add(out, ((ca * cb, tuple(sorted(va + vb, key=_order))),))
    return out


def poly_scale(a: Poly, c: Number) -> Poly:
    return poly_add((), tuple((m * c, vs) for m, vs in a))


def poly_vars(p: Poly) -> tuple[V, ...]:
    return tuple(dict.fromkeys(v for _, vs in p for v in vs))


def poly_str(p: Poly) -> str:
    def mono(c, vs):
        parts = ([] if c == 1 and vs else [repr(c)]) + [v.name for v in vs]
        return " * ".join(parts)

    text = " + ".join(mono(c, vs) for c, vs in p) or "0"
    return text if len(p) == 1 else f"({text})"


@dataclass(frozen=True)
class Term:
    """``coef * atoms * conds * polys``."""

    coef: Number
    atoms: tuple[Atom, ...] = ()
    conds: tuple[Cond, ...] = ()
    polys: tuple[Poly, ...] = ()

    def vars(self) -> tuple[V, ...]:
        """Each variable once, in order of first occurrence (a dict, not a list scan: a TPC-DS term has ~100)."""
        seen: dict[V, None] = {}
        for group in ([a.vars() for a in self.atoms] + [c.vars() for c in self.conds] + [poly_vars(p) for p in self.polys]):
            seen.update(dict.fromkeys(group))
        return tuple(seen)

    def __str__(self) -> str:
        parts = ([] if self.coef == 1 and (self.atoms or self.conds or self.polys) else [repr(self.coef)])
        parts += [str(a) for a in self.atoms] + [str(c) for c in self.conds] + [poly_str(p) for p in self.polys]
        return " * ".join(parts)


@dataclass(frozen=True)
class Agg:
    """``AggSum([keys], terms)``: sum the terms over every non-key variable."""

    keys: tuple[Value, ...]
    terms: tuple[Term, ...]

    def __str__(self) -> str:
        body = " + ".join(str(t) for t in self.terms) or "0"
        return f"AggSum([{', '.join(map(str, self.keys))}], {body})"

    def relations(self) -> set[str]:
        return {a.rel for t in self.terms for a in t.atoms}

    def degree(self) -> int:
        return max((len(t.atoms) for t in self.terms), default=0)


def lifted(c: Cond) -> V | None:
    """``K`` when ``c`` is a lift ``{K = f(X)}`` (``K`` is the value of a function of ``X``), else None.

    >>> k, d = V("K", "INT"), V("D", "DATE")
    >>> lifted(Cond("=", k, Fn("YEAR", (d,), "INT"))), lifted(Cond("=", k, d))
    (V(name='K', type='INT'), None)
    """
    if c.op == "=" and isinstance(c.left, V) and isinstance(c.right, Fn):
        return c.left
    return None


def lift_in(c: Cond, atoms: tuple[Atom, ...]) -> V | None:
    """``K`` when ``c`` is a lift in a term with these atoms: of a call (:func:`lifted`), or of arithmetic
    ``{K = A + B}`` (DBToaster's ``(K ^= A + B)``: a computed key, :mod:`.compiler.arithkey`) whose ``K`` no atom
    binds; else None.  (An equality of a column with arithmetic, ``WHERE x = a + b``, has ``X`` in an atom: it
    is a comparison, not a lift.)

    >>> k, a, b = V("K", "INT"), V("A", "INT"), V("B", "INT")
    >>> s = PolyVal(poly_add(poly_var(a), poly_var(b)))
    >>> lift_in(Cond("=", k, s), (Atom("R", (a, b)),)), lift_in(Cond("=", a, s), (Atom("R", (a, b)),))
    (V(name='K', type='INT'), None)
    """
    if (k := lifted(c)) is not None:
        return k
    if c.op == "=" and isinstance(c.left, V) and isinstance(c.right, PolyVal) and \
            not any(c.left in a.vars() for a in atoms):
        return c.left
    return None


def substitute(x, mapping: dict[V, Value]):
    """Rename variables (or bind them to constants or calls) in a value, cond, atom, poly, term or Agg."""
    if isinstance(x, V):
        return mapping.get(x, x)
    if isinstance(x, Lit):
        return x
    if isinstance(x, Fn):
        return Fn(x.name, tuple(substitute(a, mapping) for a in x.args), x.type)
    if isinstance(x, PolyVal):
        return poly_value(_subst_poly(x.poly, mapping))
    if isinstance(x, Cond):
        return Cond(x.op, substitute(x.left, mapping), substitute(x.right, mapping))
    if isinstance(x, Atom):
        return Atom(x.rel, tuple(substitute(a, mapping) for a in x.args))
    if isinstance(x, Term):
        return _subst_term(x, mapping, {})
    if isinstance(x, Agg):
        memo: dict[int, object] = {}
        return Agg(tuple(substitute(k, mapping) for k in x.keys), tuple(_subst_term(t, mapping, memo) for t in x.terms))
    raise TypeError(x)


def _subst_term(t: Term, mapping: dict[V, Value], memo: dict[int, object]) -> Term:
    """:func:`substitute` of a term; ``memo`` (by identity) renames once the atoms and comparisons an Agg's terms
    share: inclusion–exclusion gives a TPC-DS query's map a thousand terms over the same four atoms."""

    def once(x):
        if id(x) not in memo:
            memo[id(x)] = (x, substitute(x, mapping))  # (x kept alive with its id)
        return memo[id(x)][1]

    return Term(t.coef, tuple(once(a) for a in t.atoms), tuple(once(c) for c in t.conds),
                tuple(_subst_poly(p, mapping) for p in t.polys))


def _subst_poly(p: Poly, mapping: dict[V, Value]) -> Poly:
    out: Poly = ()
    for c, vs in p:
        mono: Poly = poly_const(c)
        for v in vs:
            w = mapping.get(v, v)
            mono = poly_mul(mono, poly_const(w.value) if isinstance(w, Lit) else poly_var(w))
        out = poly_add(out, mono)
    return out


# -- conversion to the M3 AST (map definitions in program text) ----------------

def value_to_ast(x: Value) -> ast.Expr:
    """A value in M3: a variable, constant, call, or (a comparison side) a sum of products."""
    if isinstance(x, Fn):
        return ast.Call(x.name, tuple(value_to_ast(a) for a in x.args))
    if isinstance(x, PolyVal):
        return poly_to_ast(x.poly)
    return ast.Var(x.name) if isinstance(x, V) else ast.Const(x.value)


def poly_to_ast(p: Poly) -> ast.Expr:
    terms = []
    for c, vs in p:
        factors = ([] if c == 1 and vs else [ast.Const(c)]) + [value_to_ast(v) for v in vs]
        terms.append(factors[0] if len(factors) == 1 else ast.Prod(tuple(factors)))
    if not terms:
        return ast.Const(0)
    return terms[0] if len(terms) == 1 else ast.Sum(tuple(terms))


def term_to_ast(t: Term) -> ast.Expr:
    factors: list[ast.Expr] = [] if t.coef == 1 else [ast.Const(t.coef)]
    factors += [ast.RelAtom(a.rel, tuple(value_to_ast(x) for x in a.args)) for a in t.atoms]
    factors += [ast.Cmp(c.op, value_to_ast(c.left), value_to_ast(c.right)) for c in t.conds]
    factors += [poly_to_ast(p) for p in t.polys]
    if not factors:
        return ast.Const(1)
    return factors[0] if len(factors) == 1 else ast.Prod(tuple(factors))


def agg_to_ast(a: Agg) -> ast.Expr:
    terms = [term_to_ast(t) for t in a.terms]
    if not terms:
        return ast.Const(0)
    return terms[0] if len(terms) == 1 else ast.Sum(tuple(terms))
