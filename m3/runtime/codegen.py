"""Code generation: each trigger of a checked program becomes the source of one Python function.

As DBToaster does, triggers are compiled once per program rather than
interpreted per event.  A generated function takes a *batch* of rows of one
relation and runs the trigger for each row in a tight loop: maps, their
``get`` methods and indexes are bound as default arguments (fast locals),
guards are plain ``if``\\s, a slice is one index lookup and a loop over a small
dict, and consecutive statements that differ only in their event-only factor
(as ``x * (1 - d)`` expands to) are fused into one loop.  A *loop guard* (a
condition over a loop variable: a comparison between columns) is tested
inside the loop that binds its variable.

Keys appear in the maps' stored form (see ``maps``): one column is the value
itself, and a map with indexes lives in its primary index, so its entries
are reached by bound part, then remaining part (``n`` below).  Every update
appends the key and the value it had to a per-map *journal* (a flat list:
two appends cost less than one ``dict.setdefault``, which hashes the key
again and regrows a table every batch).  Undone in reverse, the journal
makes a batch atomic; its first value per key yields the batch's changed
view entries.

>>> from ..syntax import parse_program
>>> from .maps import index_specs
>>> p = parse_program('''CREATE STREAM R(A INT, B INT);
... DECLARE MAP m[B: INT] : INT; DECLARE MAP n[A: INT, B: INT] : INT;
... ON +R(A, B) DO { m[C] += 2 * n[A, C]; n[A, B] += 1 }''')
>>> src, consts, names = trigger_source(p, p.triggers[0], index_specs(p), set(), 1e-9)
>>> print(src)  # doctest: +ELLIPSIS
def t_ins_R(rows, ...):
    for v_A, v_B in rows:
        s = 2
        sl1 = XG_n_0(v_A)
        if sl1:
            for v_C, w1 in sl1.items():
                d = s * w1
                k = v_C
                o = G_m(k, 0)
                n = o + d
                J_m(k)
                J_m(o)
                if n:
                    M_m[k] = n
                elif o:
                    del M_m[k]
        k = (v_A, v_B)
        b = v_A
        r = v_B
        x = XG_n_0(b)
        o = 0 if x is None else x.get(r, 0)
        n = o + 1
        J_n(k)
        J_n(o)
        if n:
            if x is None:
                X_n_0[b] = {r: n}
            else:
                x[r] = n
        elif o:
            del x[r]
            if not x:
                del X_n_0[b]
"""

from __future__ import annotations

import datetime
from collections.abc import Callable

from ..ast import (
    LIKE_OPS,
    Call,
    Cmp,
    Const,
    Expr,
    IfThen,
    MapRef,
    Prod,
    Program,
    Statement,
    Sum,
    Trigger,
    Var,
    variables,
)
from ..functions import NAMESPACE, PYTHON
from ..like import like_matcher
from .keybind import bind_keys
from .maps import primary_index

_PYOP = {"=": "==", "<>": "!=", "<": "<", "<=": "<="}


def function_name(relation: str, sign: int) -> str:
    return f"t_{'ins' if sign > 0 else 'del'}_{relation}"


class _Gen:
    def __init__(self, program: Program, specs, float_maps: set[str], trigger: Trigger):
        self.specs, self.float_maps, self.trigger = specs, float_maps, trigger
        self.arity = {m.name: len(m.keys) for m in program.maps}
        self.lines: list[str] = []
        self.names: dict[str, str] = {}  # default-argument name -> binding expression
        self.consts: dict[str, object] = {}
        self.counter = 0

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def bind(self, name: str, expr: str) -> str:
        self.names[name] = expr
        return name

    def val(self, e: Expr) -> str:
        if isinstance(e, Var):
            return f"v_{e.name}"
        if isinstance(e, Const):
            if isinstance(e.value, (datetime.date, str)):
                for k, v in self.consts.items():
                    if v == e.value and type(v) is type(e.value):
                        return self.bind(k, f"_consts[{k!r}]")
                name = f"K{len(self.consts)}"
                self.consts[name] = e.value
                return self.bind(name, f"_consts[{name!r}]")
            return repr(e.value)
        if isinstance(e, Prod):
            return "(" + " * ".join(self.val(f) for f in e.factors) + ")"
        if isinstance(e, Sum):  # arithmetic as a side of a comparison (``IF 1000 < (P + -1 * P_2) THEN ...``)
            return "(" + " + ".join(self.val(t) for t in e.terms) + ")"
        if isinstance(e, Call):  # YEAR(D), SUBSTRING(P, 1, 2), VEC_LENGTH(X + -1 * X_2, Y, 0): inlined (..functions)
            rest = (a.value if isinstance(a, Const) else self.val(a) for a in e.args[1:])
            return PYTHON[e.fn](self.val(e.args[0]), *rest)
        raise TypeError(f"cannot generate code for {e!r}")

    def cond(self, c: Cmp) -> str:
        """A guard: a comparison, or a LIKE as the bound ``fullmatch`` of its pattern (:mod:`..like`)."""
        if c.op in LIKE_OPS:
            if not (isinstance(c.right, Const) and isinstance(c.right.value, str)):
                raise TypeError(f"LIKE needs a string pattern, not {c.right!r}")
            self.val(c.right)  # the pattern is a constant: _consts holds it under its name
            name = next(k for k, v in self.consts.items() if v == c.right.value and type(v) is str)
            match = self.bind(f"LIKE_{name}", f"_like(_consts[{name!r}])")
            return f"({match}({self.val(c.left)}) {'is not' if c.op == 'LIKE' else 'is'} None)"
        return f"{self.val(c.left)} {_PYOP[c.op]} {self.val(c.right)}"

    def key(self, items: list[str]) -> str:
        """A key (or key part) in the maps' stored form: one column is the value itself (see ``maps``)."""
        return "()" if not items else items[0] if len(items) == 1 else f"({', '.join(items)})"

    # -- maps ------------------------------------------------------------
    def m(self, name):
        return self.bind(f"M_{name}", f"_data[{name!r}]")

    def g(self, name):
        return self.bind(f"G_{name}", f"_data[{name!r}].get")

    def x(self, name, pos):
        tag = "_".join(map(str, pos))
        return self.bind(f"X_{name}_{tag}", f"_indexes[{name!r}][{pos!r}]")

    def xg(self, name, pos):
        tag = "_".join(map(str, pos))
        return self.bind(f"XG_{name}_{tag}", f"_indexes[{name!r}][{pos!r}].get")

    def primary(self, name) -> tuple[int, ...] | None:
        return primary_index(self.specs, name)

    def empty(self) -> str:
        """An empty dict, only ever read: the default of an index lookup that is followed by ``.get``."""
        return self.bind("E0", "{}")

    def j(self, name):
        return self.bind(f"J_{name}", f"_journals[{name!r}].append")


def flatten(e: Expr, guards: list, scalars: list, refs: list) -> None:
    """A monomial's guards, scalar factors and map references, in order (the native generator splits them so too)."""
    if isinstance(e, Prod):
        for f in e.factors:
            flatten(f, guards, scalars, refs)
    elif isinstance(e, IfThen):
        guards.append(e.cond)
        flatten(e.then, guards, scalars, refs)
    elif isinstance(e, Cmp):
        guards.append(e)
    elif isinstance(e, MapRef):
        refs.append(e)
    else:
        scalars.append(e)


def statement_groups(statements: tuple[Statement, ...]) -> list[tuple[tuple, list[list]]]:
    """Statements as (target, guards, refs, [scalar factor lists]); adjacent equal shapes fused."""
    out: list[tuple] = []
    for s in statements:
        guards: list[Cmp] = []
        scalars: list[Expr] = []
        refs: list[MapRef] = []
        flatten(s.expr, guards, scalars, refs)
        key = (s.target, tuple(guards), tuple(refs))
        if out and out[-1][0] == key:
            out[-1][1].append(scalars)
        else:
            out.append((key, [scalars]))
    return out


def trigger_source(program: Program, trigger: Trigger, specs, float_maps: set[str], epsilon: float,
                   consts: dict | None = None) -> tuple[str, dict, dict]:
    """The source of the trigger's batch function, the constants it needs, and its name bindings (the trigger
    read with the loop variables an equality guard binds bound: :func:`.keybind.bind_keys`, as the specs are)."""
    trigger = bind_keys(program, trigger)
    gen = _Gen(program, specs, float_maps, trigger)
    if consts is not None:
        gen.consts = consts
    gen.bind("EPS", "_epsilon")
    body_depth = 2
    for (target, all_guards, refs), scalar_lists in statement_groups(trigger.statements):
        depth = body_depth
        event = set(trigger.vars)
        guards = [c for c in all_guards if set(variables(c)) <= event]
        pending = [c for c in all_guards if c not in guards]  # loop guards: tested once their loops bind them
        if guards:
            cond = " and ".join(gen.cond(c) for c in guards)
            gen.emit(depth, f"if {cond}:")
            depth += 1
        parts = []
        for scalars in scalar_lists:
            parts.append(" * ".join(gen.val(f) for f in scalars) if scalars else "1")
        total = "s = " + " + ".join(parts if len(parts) == 1 else [f"({p})" for p in parts])
        if (late := any(not set(variables(f)) <= event for fs in scalar_lists for f in fs)) or parts == ["1"]:
            scalar = None
        else:
            scalar = "s"
            gen.emit(depth, total)
            if not all(p.lstrip("-").replace(".", "").isdigit() for p in parts):
                gen.emit(depth, "if s:")
                depth += 1
        factors = ["s"] if scalar or late else []  # (late: ``s`` is computed once the loops bind it, below)
        bound_vars = set(trigger.vars)
        full = [r for r in refs if all(not (isinstance(a, Var) and a.name not in bound_vars) for a in r.args)]
        sliced = [r for r in refs if r not in full]
        for r in full:
            gen.counter += 1
            w = f"w{gen.counter}"
            items = [gen.val(a) for a in r.args]
            primary = gen.primary(r.name)
            if primary is None:
                gen.emit(depth, f"{w} = {gen.g(r.name)}({gen.key(items)})")
            else:
                b, rest = _split(items, primary)
                gen.emit(depth, f"{w} = {gen.xg(r.name, primary)}({gen.key(b)}, {gen.empty()}).get({gen.key(rest)})")
            gen.emit(depth, f"if {w}:")
            depth += 1
            factors.append(w)
        for r in sliced:
            gen.counter += 1
            w = f"w{gen.counter}"
            pos = tuple(i for i, a in enumerate(r.args) if not (isinstance(a, Var) and a.name not in bound_vars))
            loop_targets, checks = [], []
            for i, a in enumerate(r.args):
                if i in pos:
                    continue
                name = gen.val(a)
                if name in loop_targets:  # the same loop variable twice in one map: a diagonal
                    dup = f"dup{gen.counter}_{i}"
                    checks.append(f"{dup} == {name}")
                    name = dup
                loop_targets.append(name)
            unpack = gen.key(loop_targets)
            if pos:
                sl = f"sl{gen.counter}"
                gen.emit(depth, f"{sl} = {gen.xg(r.name, pos)}({gen.key([gen.val(r.args[i]) for i in pos])})")
                gen.emit(depth, f"if {sl}:")
                gen.emit(depth + 1, f"for {unpack}, {w} in {sl}.items():")
                depth += 2
            elif gen.primary(r.name) is None:
                gen.emit(depth, f"for {unpack}, {w} in {gen.m(r.name)}.items():")
                depth += 1
            else:
                b, rest = _split(loop_targets, gen.primary(r.name))
                gen.emit(depth, f"for {gen.key(b)}, sub{gen.counter} in {gen.m(r.name)}.items():")
                gen.emit(depth + 1, f"for {gen.key(rest)}, {w} in sub{gen.counter}.items():")
                depth += 2
            event |= {a.name for a in r.args if isinstance(a, Var)}
            ready = [c for c in pending if set(variables(c)) <= event]
            pending = [c for c in pending if c not in ready]
            checks += [gen.cond(c) for c in ready]
            if checks:
                gen.emit(depth, f"if {' and '.join(checks)}:")
                depth += 1
            factors.append(w)
        if late:  # a factor of a loop variable (VEC_LENGTH(X + -1 * X_2, ...)): computed once the loops bind it
            gen.emit(depth, total)
        if len(factors) > 1:
            gen.emit(depth, f"d = {' * '.join(factors)}")
            delta = "d"
        else:
            delta = factors[0] if factors else "1"
        _update(gen, depth, target, delta)
    if len(gen.lines) == 0:
        gen.emit(body_depth, "pass")
    unpack = ", ".join(f"v_{v}" for v in trigger.vars) if len(trigger.vars) != 1 else f"(v_{trigger.vars[0]},)"
    unpack = unpack or "()"
    head = f"def {function_name(trigger.relation, trigger.sign)}(rows, {', '.join(f'{n}={n}' for n in gen.names)}):"
    loop = f"    for {unpack} in rows:"
    return "\n".join([head, loop] + gen.lines), gen.consts, gen.names


def _split(items: list, pos: tuple[int, ...]) -> tuple[list, list]:
    """Items at positions ``pos``, and the others."""
    return [items[i] for i in pos], [x for i, x in enumerate(items) if i not in pos]


def _update(gen: _Gen, depth: int, target: MapRef, delta: str) -> None:
    name = target.name
    key_items = [gen.val(a) for a in target.args]
    nz = "n > EPS or n < -EPS" if name in gen.float_maps else "n"
    primary = gen.primary(name)
    gen.emit(depth, f"k = {gen.key(key_items)}")
    if primary is None:
        gen.emit(depth, f"o = {gen.g(name)}(k, 0)")
    else:  # stored in its primary index: find the entry by bound part, then the rest
        _emit_index_key(gen, depth, key_items, primary)
        gen.emit(depth, f"x = {gen.xg(name, primary)}(b)")
        gen.emit(depth, "o = 0 if x is None else x.get(r, 0)")
    gen.emit(depth, f"n = o + {delta}")
    gen.emit(depth, f"{gen.j(name)}(k)")
    gen.emit(depth, f"{gen.j(name)}(o)")
    gen.emit(depth, f"if {nz}:")
    specs = gen.specs.get(name, [])
    if primary is None:
        gen.emit(depth + 1, f"{gen.m(name)}[k] = n")
    else:
        _emit_index_set(gen, depth + 1, name, primary)
    for pos in specs:
        if pos != primary:
            _emit_index_key(gen, depth + 1, key_items, pos)
            gen.emit(depth + 1, f"x = {gen.xg(name, pos)}(b)")
            _emit_index_set(gen, depth + 1, name, pos)
    gen.emit(depth, "elif o:")
    if primary is None:
        gen.emit(depth + 1, f"del {gen.m(name)}[k]")
    else:
        _emit_index_del(gen, depth + 1, name, primary)
    for pos in specs:
        if pos != primary:
            _emit_index_key(gen, depth + 1, key_items, pos)
            gen.emit(depth + 1, f"x = {gen.x(name, pos)}[b]")
            _emit_index_del(gen, depth + 1, name, pos)


def _emit_index_set(gen: _Gen, depth: int, name: str, pos) -> None:
    """Store ``n`` at ``b``/``r`` of index ``pos``, where ``x`` is that index's sub-map for ``b`` (or None)."""
    gen.emit(depth, "if x is None:")
    gen.emit(depth + 1, f"{gen.x(name, pos)}[b] = {{r: n}}")
    gen.emit(depth, "else:")
    gen.emit(depth + 1, "x[r] = n")


def _emit_index_del(gen: _Gen, depth: int, name: str, pos) -> None:
    """Remove ``r`` from sub-map ``x`` of index ``pos``, and the sub-map once empty."""
    gen.emit(depth, "del x[r]")
    gen.emit(depth, "if not x:")
    gen.emit(depth + 1, f"del {gen.x(name, pos)}[b]")


def program_source(program: Program, specs, float_maps: set[str], epsilon: float) -> tuple[str, dict]:
    """One module: a factory ``_make(_data, _indexes, _journals, _consts, _epsilon)`` returning the trigger functions.

    The factory binds every map, ``get`` method, index and journal once; each
    trigger function takes them as default arguments.
    """
    bindings: dict[str, str] = {}
    consts: dict[str, object] = {}
    defs, names = [], []
    for t in program.triggers:
        src, _, b = trigger_source(program, t, specs, float_maps, epsilon, consts)
        bindings.update(b)
        defs.append(src)
        names.append(((t.relation, t.sign), function_name(t.relation, t.sign)))
    lines = ["def _make(_data, _indexes, _journals, _consts, _epsilon):"]
    lines += [f"    {n} = {expr}" for n, expr in bindings.items()]
    for src in defs:
        lines += ["    " + ln for ln in src.split("\n")]
    lines.append("    return {" + ", ".join(f"{key!r}: {fn}" for key, fn in names) + "}")
    return "\n".join(lines) + "\n", consts


def build(source: str, data, indexes, journals, consts, epsilon) -> dict[tuple[str, int], Callable]:
    """Compile the generated module once and bind it to a store."""
    namespace: dict = {"_like": like_matcher, **NAMESPACE}  # the functions generated code calls by name
    exec(compile(source, "<m3-generated>", "exec"), namespace)  # noqa: S102 - our own generated code
    return namespace["_make"](data, indexes, journals, consts, epsilon)


def _emit_index_key(gen, depth: int, key_items: list, pos) -> None:
    """``b``: the key's bound part for the index on positions ``pos``; ``r``: the rest."""
    gen.emit(depth, f"b = {gen.key([key_items[i] for i in pos])}")
    gen.emit(depth, f"r = {gen.key([key_items[i] for i in range(len(key_items)) if i not in pos])}")
