"""The checker's rules for :class:`~.over.Over` and lifted view variables (a part of :mod:`.check`).

Why apart: the rules of one construct (aggregates over a map's entries, and
row variables bound by the values they read) in one place, beside the
checker's general rules.

* ``KIND(e FOR K : m[G, K] WHERE c)`` reads ``m`` at distinct variables: all
  of its own and some of the view's; ``e`` and ``c`` read those variables and
  maps at them (as a ``TOTAL``'s condition does).
* A lifted variable (:func:`.over.lifts`) is bound by the *source* aggregate:
  every lifted variable by the same one (equal aggregates count as one), whose
  map holds every other row variable, so the view's rows are its entries; or,
  in a WHERE that is an OR, one such source per disjunct
  (:func:`.over.lift_sources`: the rows are the union of theirs).

>>> from .syntax import parse_program
>>> from .check import check_errors
>>> p = parse_program('''DECLARE MAP r[K: INT] : INT; DECLARE MAP c[K: INT] : INT;
... DECLARE VIEW v[c := C, d := D](n := COUNT(1 FOR K : r[K] WHERE C = c[K]) + SUM(1 FOR J : r[J] WHERE D = c[J]));''')
>>> [message for message, _ in check_errors(p)]
['view v: its lifted variables (C, D) are bound by different aggregates (one must bind them all)']
"""

from __future__ import annotations

from collections.abc import Callable

from .ast import Var, ViewDecl
from .viewnodes import FOLDS
from .over import Over, lift_sources, lifts


def check_over(out: list, v: ViewDecl, e: Over, row: list[str], maps, types: dict[str, str],
               arity: Callable, nested: Callable) -> None:
    """An aggregate over a map's entries: its map read at distinct variables, all of its own and some of the
    row's; its value and condition read those and maps at them, as a TOTAL's condition.

    ``arity`` and ``nested`` are the checker's own rules for a map reference and a view expression
    (:mod:`.check` passes them: it imports this module, so this one does not import it back)."""
    if e.kind not in FOLDS:
        out.append((f"view {v.name}: unknown aggregate {e.kind} (one of {', '.join(FOLDS)})", e.pos or v.pos))
    if len(set(e.vars)) != len(e.vars) or set(e.vars) & set(row):
        out.append((f"view {v.name}: {e.kind} ranges over ({', '.join(e.vars)}): each once, none a key variable of "
                    "the view", e.pos or v.pos))
    arity(out, e.ref, maps, "map")
    names = [a.name if isinstance(a, Var) else None for a in e.ref.args]
    if None in names or len(set(names)) != len(names) or not set(e.vars) <= set(names) \
            or not set(names) <= set(row) | set(e.vars):
        out.append((f"view {v.name}: {e.kind} reads {e.ref.name} at ({', '.join(map(str, names))}): distinct "
                    f"variables, all of ({', '.join(e.vars)}) and some of the view's", e.ref.pos or v.pos))
    elif e.ref.name in maps and len(maps[e.ref.name].keys) == len(names):
        for n, k in zip(names, maps[e.ref.name].keys):
            if n in row:
                types.setdefault(n, k.type)
    for part in (e.expr,) + (() if e.cond is None else (e.cond,)):
        nested(out, v, part, row + list(e.vars), maps, types)


def check_lifts(out: list, v: ViewDecl, bound: set[str]) -> dict:
    """The view's lifted variables (:func:`.over.lifts`), checked to come from one source whose map holds every
    other row variable."""
    found = lifts(v, bound)
    sources = [o for o, b in lift_sources(v, bound) if len(b) == len(found)]
    if found and not sources:
        out.append((f"view {v.name}: its lifted variables ({', '.join(found)}) are bound by different "
                    "aggregates (one must bind them all)", v.pos))
    for o in sources:
        held = {a.name for a in o.ref.args if isinstance(a, Var)}
        for x in dict.fromkeys(v.key_vars):
            if x not in found and x not in held:
                out.append((f"view {v.name}: its rows are the entries of the aggregate over {o.ref.name}, which "
                            f"does not hold {x}", v.pos))
    return found
