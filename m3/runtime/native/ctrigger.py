"""C for one trigger of the native backend: the loop over a columnar batch and its statements.

Why apart from :mod:`.cgen` (which assembles the module) and :mod:`.cexpr`
(the C of values and conditions): this is the part that follows
:mod:`..codegen` (the Python backend) statement by statement, so both
backends have the same semantics.  A trigger runs per event over a columnar
batch; guards over event variables are ``if``\\s; statements that differ
only in their scalar factor are fused (:func:`groups`); a full map reference
is a lookup; a *slice* walks the linked list of a secondary index; a loop
guard is tested inside the loop that binds its variable; an update journals
the old value and removes entries that become zero (FLOAT maps: within
epsilon).  A function of an event variable is computed in C (a date part) or
read from one more column the runtime computes with the batch (a
SUBSTRING's interned id: :attr:`.cgen.Module.computed`).  At the top of the
loop, the lookups a row a few ahead will make with its own values are hinted
to the cache (:func:`_prefetches`).  Updates of a map the trigger never reads
are queued and applied in batches (:func:`deferred_maps`, crt's
``upd_flush``): the batch hints all its slots and entries first, so their
cache misses overlap (here ``m`` is only written: its update is queued).

>>> from ...syntax import parse_program
>>> p = parse_program('''CREATE STREAM R(A INT, B FLOAT);
... DECLARE MAP m[A: INT] : FLOAT;
... ON +R(A, B) DO { m[A] += IF A < 3 THEN B ELSE 0 }''')
>>> gen = Gen(p, {})
>>> trigger_c(gen, p.triggers[0], 0)
(0, 1)
>>> print("\\n".join(gen.lines[2:]))
    updq_t q; q.n = 0;
    const int64_t *c0 = (const int64_t *)cols[0];
    const double *c1 = (const double *)cols[1];
    for (int64_t row = 0; row < n_rows; row++) {
        int64_t v_A = c0[row];
        double v_B = c1[row];
        {
            if ((v_A < INT64_C(3))) {
                double s = v_B;
                if (s != 0) {
                    int64_t KT[1] = {v_A};
                    if ((rc = upd_d(rt, &q, &rt->maps[0], KT, s)) != 0) return rc;
                }
            }
        }
    }
    if ((rc = upd_flush(rt, &q)) != 0) return rc;
    return 0;
}
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ast import Call, Const, Expr, MapRef, Statement, Trigger, Var, variables, walk
from ...functions import result_type
from ..codegen import statement_groups
from .cexpr import INLINE_CALLS, Gen, Unsupported, ctype, from_key, product_type, to_key


def groups(statements: tuple[Statement, ...]) -> list[tuple[tuple, list[list]]]:
    """Statements as ((target, guards, refs), [scalar factor lists]), split and fused as the Python generator
    does (:func:`..codegen.statement_groups`); a scalar factor other than a variable, a constant, a call C computes
    inline or a number the runtime computes as a column (``F * ATOI(S)``) is refused."""
    out = statement_groups(statements)
    for _, scalar_lists in out:
        for scalars in scalar_lists:
            for e in scalars:
                if not isinstance(e, (Var, Const)) and not (isinstance(e, Call) and (
                        e.fn in INLINE_CALLS or result_type(e.fn) in ("INT", "FLOAT"))):  # or a computed number
                    raise Unsupported(f"expression {type(e).__name__} in a trigger statement")
    return out


def _key_item(gen: Gen, a: Expr, want: str, types: dict[str, str], where: str) -> str:
    """One key column of a map reference: the value, typed as the map's key column."""
    expr, t = gen.value(a, types)
    if t != want:
        raise Unsupported(f"{where}: a {t} value as a {want} key column")
    return to_key(expr, want)


def trigger_c(gen: Gen, t: Trigger, tno: int) -> tuple[int, ...]:
    """Emit ``trig_<tno>``; return the relation columns it reads."""
    rel = gen.program.relation(t.relation)
    col_types = [c.type for c in rel.columns]
    if len(t.vars) != len(col_types):
        raise Unsupported(f"trigger {t.relation} binds {len(t.vars)} of {len(col_types)} columns")
    mentioned = set()
    for s in t.statements:
        mentioned |= set(variables(s.expr)) | set(variables(s.target))
    used = tuple(i for i, v in enumerate(t.vars) if v in mentioned)
    gen.emit(0, f"static int trig_{tno}(rt_t *rt, int64_t n_rows, void **cols) {{")
    gen.emit(1, "int rc;")
    gen.deferred = deferred_maps(t.statements)
    if gen.deferred:
        gen.emit(1, "updq_t q; q.n = 0;")
    for i in used:
        gen.emit(1, f"const {ctype(col_types[i])} *c{i} = (const {ctype(col_types[i])} *)cols[{i}];")
    gen.emit(1, "for (int64_t row = 0; row < n_rows; row++) {")
    calls = list(dict.fromkeys(n for s in t.statements for n in [*walk(s.target), *walk(s.expr)]
                               if isinstance(n, Call) and n.fn not in INLINE_CALLS))
    gen.computed = {c: f"fval{j}" for j, c in enumerate(calls)}
    for j in range(len(calls)):
        ft = ctype(result_type(calls[j].fn))  # a FLOAT column of doubles (ATOF), else int64
        gen.emit(1, f"const {ft} *fcol{j} = (const {ft} *)cols[{len(col_types) + j}];")
    for i in used:
        gen.emit(2, f"{ctype(col_types[i])} v_{t.vars[i]} = c{i}[row];")
    for j in range(len(calls)):
        gen.emit(2, f"{ctype(result_type(calls[j].fn))} fval{j} = fcol{j}[row];")
    for c in calls:
        if not (isinstance(c.args[0], Var) and c.args[0].name in t.vars):
            raise Unsupported(f"{c.fn} of something else than an event variable")
    gen.computed_columns[(t.relation, t.sign)] = tuple((t.vars.index(c.args[0].name), c) for c in calls)
    event_types = {v: col_types[i] for i, v in enumerate(t.vars)}
    mark = len(gen.lines)
    for (target, all_guards, refs), scalar_lists in groups(t.statements):
        _statement(gen, t, dict(event_types), target, all_guards, refs, scalar_lists)
    gen.lines[mark:mark] = _prefetches(gen, t, event_types, col_types, used)
    gen.emit(1, "}")
    if gen.deferred:
        gen.emit(1, "if ((rc = upd_flush(rt, &q)) != 0) return rc;")
    gen.emit(1, "return 0;")
    gen.emit(0, "}")
    return used


def deferred_maps(statements: tuple[Statement, ...]) -> frozenset[str]:
    """The maps a trigger updates but never reads: their updates are queued and applied in batches (crt's
    ``upd_flush``), whose cache misses overlap.  Why only these: a statement that reads a map must see the
    updates of the rows before it, so a map read anywhere in the trigger is updated at once, as the Python
    backend does; a map only written sees the same updates in the same order either way."""
    reads = {n.name for s in statements for n in walk(s.expr) if isinstance(n, MapRef)}  # every reference read
    return frozenset(s.target.name for s in statements) - reads


def _scalar(gen: Gen, scalar_lists, types: dict[str, str], factors: list, depth: int, opened: int) -> tuple[int, int]:
    """Emit the statement's scalar ``s`` (the sum of its fused scalar products) and skip a zero; as the first factor."""
    parts = []
    for scalars in scalar_lists:
        vals = [gen.value(f, types) for f in scalars]
        parts.append(gen.product(vals) if vals else ("INT64_C(1)", "INT"))
    if parts == [("INT64_C(1)", "INT")]:
        return depth, opened
    if len(parts) > 1:
        parts = [(f"({e})", ty) for e, ty in parts]
    total, st = gen.total(parts)
    gen.emit(depth, f"{ctype(st)} s = {total};")
    gen.emit(depth, "if (s != 0) {")
    factors.insert(0, ("s", st))
    return depth + 1, opened + 1


def _statement(gen: Gen, t: Trigger, types: dict[str, str], target: MapRef, all_guards, refs, scalar_lists) -> None:
    gen.target = gen.map_no[target.name]
    depth = 2
    gen.emit(depth, "{")
    opened = 1
    depth += 1
    event = set(t.vars)
    guards = [c for c in all_guards if set(variables(c)) <= event]
    pending = [c for c in all_guards if c not in guards]
    if guards:
        gen.emit(depth, f"if ({' && '.join(gen.cond(c, types) for c in guards)}) {{")
        depth, opened = depth + 1, opened + 1
    factors: list[tuple[str, str]] = []
    late = any(not set(variables(f)) <= event for scalars in scalar_lists for f in scalars)  # of a loop variable
    if not late:  # (VEC_LENGTH(X + -1 * X_2, ...): computed per entry once its loops bind it, as in Python)
        depth, opened = _scalar(gen, scalar_lists, types, factors, depth, opened)
    bound = set(t.vars)
    full = [r for r in refs if all(not (isinstance(a, Var) and a.name not in bound) for a in r.args)]
    sliced = [r for r in refs if r not in full]
    for r in full:
        gen.counter += 1
        c = gen.counter
        m = gen.decl[r.name]
        items = [_key_item(gen, a, k.type, types, f"map {r.name}") for a, k in zip(r.args, m.keys)]
        gen.emit(depth, f"int64_t K{c}[{max(1, len(items))}] = {{{', '.join(items) or '0'}}};")
        vt = m.value_type
        gen.emit(depth, f"{ctype(vt)} w{c} = map_get_{'d' if vt == 'FLOAT' else 'i'}({gen.mref(r.name)}, K{c});")
        gen.emit(depth, f"if (w{c} != 0) {{")
        depth, opened = depth + 1, opened + 1
        factors.append((f"w{c}", vt))
    for r in sliced:
        if r.name == target.name:
            raise Unsupported(f"statement updates map {r.name} while looping over a slice of it")
        gen.counter += 1
        c = gen.counter
        m = gen.decl[r.name]
        no = gen.map_no[r.name]
        stride = len(m.keys) + 1  # a record: the key columns, then the value (crt's ENT/VAL)
        pos = tuple(i for i, a in enumerate(r.args) if not (isinstance(a, Var) and a.name not in bound))
        if pos:
            ino = gen.specs[r.name].index(pos)
            gen.emit(depth, f"int64_t K{c}[{max(1, len(m.keys))}];")
            for i in pos:
                gen.emit(depth, f"K{c}[{i}] = {_key_item(gen, r.args[i], m.keys[i].type, types, f'map {r.name}')};")
            gen.emit(depth, f"for (int32_t e{c} = idx_head({gen.mref(r.name)}, {ino}, K{c}); e{c} >= 0; "
                            f"e{c} = rt->maps[{no}].idx[{ino}].next[e{c}]) {{")
        else:
            gen.emit(depth, f"for (int32_t e{c} = 0; e{c} < rt->maps[{no}].ptop; e{c}++) {{")
            gen.emit(depth + 1, f"if (!rt->maps[{no}].live[e{c}]) continue;")
        depth, opened = depth + 1, opened + 1
        checks, bound_here = [], []
        for i, a in enumerate(r.args):
            if i in pos:
                continue
            kt = m.keys[i].type
            col = from_key(f"rt->maps[{no}].ents[(int64_t)e{c} * {stride} + {i}]", kt)
            if a.name in bound_here:  # the same loop variable twice in one map: a diagonal
                checks.append(f"(v_{a.name} == {col})")
                continue
            bound_here.append(a.name)
            gen.emit(depth, f"{ctype(kt)} v_{a.name} = {col};")
            types[a.name] = kt
        vt = m.value_type
        gen.emit(depth, f"{ctype(vt)} w{c} = ((const val_t *)rt->maps[{no}].ents)[(int64_t)e{c} * {stride} + "
                        f"{len(m.keys)}].{'d' if vt == 'FLOAT' else 'i'};")
        event |= set(bound_here)
        ready = [g for g in pending if set(variables(g)) <= event]
        pending = [g for g in pending if g not in ready]
        checks += [gen.cond(g, types) for g in ready]
        if checks:
            gen.emit(depth, f"if ({' && '.join(checks)}) {{")
            depth, opened = depth + 1, opened + 1
        factors.append((f"w{c}", vt))
    if pending:
        raise Unsupported(f"a condition over variables no loop binds: {pending[0]}")
    if late:
        depth, opened = _scalar(gen, scalar_lists, types, factors, depth, opened)
    tm = gen.decl[target.name]
    dt = product_type([ty for _, ty in factors])
    if dt == "FLOAT" and tm.value_type != "FLOAT":
        raise Unsupported(f"a FLOAT value added to INT map {target.name}")
    if len(factors) > 1:
        gen.emit(depth, f"{ctype(dt)} d = {gen.product(factors)[0]};")
        delta = "d"
    else:
        delta = factors[0][0] if factors else "INT64_C(1)"
    items = [_key_item(gen, a, k.type, types, f"map {target.name}") for a, k in zip(target.args, tm.keys)]
    gen.emit(depth, f"int64_t KT[{max(1, len(items))}] = {{{', '.join(items) or '0'}}};")
    queued = target.name in gen.deferred
    add = ("upd_" if queued else "map_add_") + ("d" if tm.value_type == "FLOAT" else "i")
    cast = "(double)" if tm.value_type == "FLOAT" and dt != "FLOAT" and delta != "INT64_C(1)" else ""
    if tm.value_type == "FLOAT" and delta == "INT64_C(1)":
        delta = "1.0"
    gen.emit(depth, f"if ((rc = {add}(rt, {'&q, ' if queued else ''}{gen.mref(target.name)}, KT, {cast}{delta})) != 0) "
                    "return rc;")
    for _ in range(opened):
        depth -= 1
        gen.emit(depth, "}")




PREFETCH_AHEAD = (8, 4)  # rows ahead: the slot of a lookup keyed by the event (pf_slot), then its entry (pf_entry)


@dataclass(frozen=True)
class Lookup:
    """A lookup a row a few ahead can hint: map ``name``'s ``index`` (-1: the primary table) keyed by the
    event's values ``items`` ((position, C), the other positions unread), under the event's ``guard``."""

    guard: str
    name: str
    index: int
    items: tuple[tuple[int, str], ...]


def _lookups(gen: Gen, t: Trigger, types: dict[str, str]) -> list[Lookup]:
    """The trigger's lookups (full reads, slices by an index, updates) whose key is the event's own values.

    A lookup keyed by a loop's variable, a computed column or checked arithmetic (which may leave the
    trigger) is left out; duplicates are kept once.  (Hinting an update keyed through a slice's first entry
    as well, two stages later, measured no gain on Q3.)
    """
    event = set(t.vars)

    def plain(a: Expr) -> bool:
        return isinstance(a, Const) or (isinstance(a, Var) and a.name in event)

    out: dict[Lookup, None] = {}
    for (target, all_guards, refs), _ in groups(t.statements):
        conds = [gen.cond(c, types) for c in all_guards if set(variables(c)) <= event]
        if any("CK_" in c for c in conds):
            conds = []  # a guard that may overflow is left out: the hint is then only less precise
        guard = " && ".join(conds) or "1"
        for r in (*refs, target):
            if r is target and target.name in gen.deferred:
                continue  # a queued update: the queue hints it when it is applied
            m = gen.decl[r.name]
            pos = tuple(i for i, a in enumerate(r.args) if plain(a))
            if len(pos) == len(r.args):
                if not pos:
                    continue
                index = -1
            elif r is not target and pos in gen.specs.get(r.name, ()):
                index = gen.specs[r.name].index(pos)
            else:
                continue
            items = tuple((i, _key_item(gen, r.args[i], m.keys[i].type, types, f"map {r.name}")) for i in pos)
            out[Lookup(guard, r.name, index, items)] = None
    return list(out)


def _prefetches(gen: Gen, t: Trigger, types: dict[str, str], col_types: list[str], used) -> list[str]:
    """Lines at the top of the row loop that hint the lookups of rows ahead to the cache.

    Why: a map larger than the cache makes nearly every lookup two misses (the slot, then the entry's key
    and value), and the loop waits for each in turn; the event's values of a row a few ahead are at hand, so
    its slots and then its entries are asked for early (:data:`PREFETCH_AHEAD`) and arrive while this row is
    done.  Only hints, reading: a row's results are the same whatever they fetched.  On Q3 (1M events,
    docs/dataplane.md) they took the triggers from ~0.25 to ~0.20 us of CPU per event.
    """
    lookups = _lookups(gen, t, types)
    if not lookups:
        return []
    lines = []
    for ahead, call in zip(PREFETCH_AHEAD, ("pf_slot", "pf_entry")):
        lines.append(f"        if (row + {ahead} < n_rows) {{")
        for i in used:
            lines.append(f"            {ctype(col_types[i])} v_{t.vars[i]} = c{i}[row + {ahead}];")
        for x in lookups:
            no = gen.map_no[x.name]
            table = f"&rt->maps[{no}].prim" if x.index < 0 else f"&rt->maps[{no}].idx[{x.index}]"
            args = f"{table}, P" if call == "pf_slot" else f"&rt->maps[{no}], {table}, P"
            sets = " ".join(f"P[{i}] = {item};" for i, item in x.items)
            lines.append(f"            if ({x.guard}) {{ int64_t P[{max(1, len(gen.decl[x.name].keys))}] = {{0}}; "
                         f"{sets} {call}({args}); }}")
        lines.append("        }")
    return lines
