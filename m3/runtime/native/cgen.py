"""C code generation for a checked M3 program: the maps' shapes and one C function per trigger.

The generated code follows :mod:`..codegen` (the Python backend) statement by
statement, so both backends have the same semantics: a trigger runs per event
over a columnar batch; guards over event variables are ``if``\\s; statements
that differ only in their scalar factor are fused; a full map reference is a
lookup; a *slice* walks the linked list of a secondary index; a loop guard is
tested inside the loop that binds its variable; an update journals the old
value and removes entries that become zero (FLOAT maps: within epsilon).

INT arithmetic is checked: a product of two INT values is ``CK_MUL``, a sum
of INT scalar terms ``CK_ADD``, and the map update adds with a check (see
:mod:`.crt`).  On overflow the trigger returns ``RT_OVERFLOW`` and the
runtime re-runs the batch on the Python backend, whose ints do not
overflow.  Products are folded left to right as Python evaluates them, so a
mixed product checks its INT prefix and then multiplies doubles.  There is
no subtraction: a delete's ``-1 *`` is a checked product too.

Values in C: INT and DATE (a day number, ``date.toordinal()``) and STRING
(an id from the runtime's intern table) are ``int64_t``; FLOAT is ``double``.
Keys are arrays of ``int64_t`` (a FLOAT key column holds the double's bits).

Anything this generator does not know is refused with a reason
(:class:`Unsupported`), never guessed: ``backend="auto"`` then runs the
Python backend and says why.

>>> from ...syntax import parse_program
>>> p = parse_program('''CREATE STREAM R(A INT, B INT);
... DECLARE MAP m[B: INT] : INT; DECLARE MAP n[A: INT, B: INT] : INT;
... ON +R(A, B) DO { m[C] += 2 * n[A, C]; n[A, B] += 1 }''')
>>> mod = generate(p)
>>> mod.maps, mod.strings, mod.used[("R", 1)]
(('m', 'n'), (), (0, 1))
>>> print(mod.triggers_c)
static int trig_0(rt_t *rt, int64_t n_rows, void **cols) {
    int rc;
    const int64_t *c0 = (const int64_t *)cols[0];
    const int64_t *c1 = (const int64_t *)cols[1];
    for (int64_t row = 0; row < n_rows; row++) {
        int64_t v_A = c0[row];
        int64_t v_B = c1[row];
        {
            int64_t s = INT64_C(2);
            if (s != 0) {
                int64_t K1[2];
                K1[0] = v_A;
                for (int32_t e1 = idx_head(&rt->maps[1], 0, K1); e1 >= 0; e1 = rt->maps[1].idx[0].next[e1]) {
                    int64_t v_C = rt->maps[1].keys[(int64_t)e1 * 2 + 1];
                    int64_t w1 = rt->maps[1].vals[e1].i;
                    int64_t d = CK_MUL(s, w1, 0);
                    int64_t KT[1] = {v_C};
                    if ((rc = map_add_i(rt, &rt->maps[0], KT, d)) != 0) return rc;
                }
            }
        }
        {
            int64_t KT[2] = {v_A, v_B};
            if ((rc = map_add_i(rt, &rt->maps[1], KT, INT64_C(1))) != 0) return rc;
        }
    }
    return 0;
}
"""

from __future__ import annotations

import datetime
import hashlib
from dataclasses import dataclass, field

from ...ast import (
    LIKE_OPS,
    Call,
    Cmp,
    Const,
    Expr,
    MapRef,
    Prod,
    Program,
    Statement,
    Trigger,
    Var,
    variables,
    walk,
)
from ...functions import result_type
from ..codegen import statement_groups
from ..maps import index_specs
from .crt import SOURCE

_COPS = {"=": "==", "<>": "!=", "<": "<", "<=": "<="}
DATE_PARTS = {"YEAR": 0, "QUARTER": 1, "MONTH": 2, "DAY": 3}  # crt's date_part(day, part)
MAX_KEYS = 16
MAX_INDEXES = 8


class Unsupported(Exception):
    """A construct the C generator does not support; the message names it."""


@dataclass(frozen=True)
class Module:
    """A generated C module and what the Python side needs to drive it."""

    source: str
    triggers_c: str
    maps: tuple[str, ...]                       # map i of the C runtime
    triggers: tuple[tuple[str, int], ...]       # trigger t of rt_trigger
    used: dict[tuple[str, int], tuple[int, ...]] = field(default_factory=dict)  # relation columns each reads
    strings: tuple[str, ...] = ()               # string constants, interned first (ids 0, 1, ...)
    string_order: bool = False                  # C compares strings: every interned string must be sent to it
    computed: dict = field(default_factory=dict)  # (relation, sign) -> ((column, Call), ...): columns the runtime
                                                  # computes per batch, passed after the relation's (SUBSTRING ids)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:24]


def ctype(m3_type: str) -> str:
    """The C type of an M3 value.

    >>> ctype("INT"), ctype("FLOAT"), ctype("DATE"), ctype("STRING")
    ('int64_t', 'double', 'int64_t', 'int64_t')
    """
    return "double" if m3_type == "FLOAT" else "int64_t"


def to_key(expr: str, m3_type: str) -> str:
    """A C value as a key column (int64): a FLOAT's bits.

    >>> to_key("v_A", "INT"), to_key("v_X", "FLOAT")
    ('v_A', 'f2k(v_X)')
    """
    return f"f2k({expr})" if m3_type == "FLOAT" else expr


def from_key(expr: str, m3_type: str) -> str:
    """A key column (int64) as its C value.

    >>> from_key("k", "DATE"), from_key("k", "FLOAT")
    ('k', 'k2f(k)')
    """
    return f"k2f({expr})" if m3_type == "FLOAT" else expr


def c_float(x: float) -> str:
    """A double literal that reads back as exactly ``x``.

    >>> c_float(0.5), c_float(1e-7), c_float(3.0)
    ('0.5', '1e-07', '3.0')
    """
    if x != x or x in (float("inf"), float("-inf")):
        raise Unsupported(f"non-finite constant {x!r}")
    return repr(float(x))


class _Gen:
    def __init__(self, program: Program, specs: dict[str, list[tuple[int, ...]]]):
        self.program, self.specs = program, specs
        self.map_no = {m.name: i for i, m in enumerate(program.maps)}
        self.decl = {m.name: m for m in program.maps}
        self.strings: list[str] = []
        self.string_order = False  # some condition orders strings: C needs the intern table's strings
        self.lines: list[str] = []
        self.counter = 0
        self.target = -1  # the map the statement being generated updates: named when its arithmetic overflows
        self.computed: dict[Call, str] = {}  # the trigger's computed columns: call -> its C variable
        self.computed_columns: dict[tuple[str, int], tuple] = {}  # per trigger: ((column, call), ...)

    def product(self, parts: list[tuple[str, str]]) -> tuple[str, str]:
        """Factors multiplied left to right (as Python does): INT by INT checked, else in doubles."""
        expr, t = numeric(*parts[0]), parts[0][1]
        for e, ty in parts[1:]:
            numeric(e, ty)
            if t == "INT" and ty == "INT":
                expr = f"CK_MUL({expr}, {e}, {self.target})"
            else:
                expr, t = f"({expr} * {e})", "FLOAT"
        return expr, t

    def total(self, parts: list[tuple[str, str]]) -> tuple[str, str]:
        """Terms added left to right: INT plus INT checked, else in doubles."""
        expr, t = parts[0]
        for e, ty in parts[1:]:
            if t == "INT" and ty == "INT":
                expr = f"CK_ADD({expr}, {e}, {self.target})"
            else:
                expr, t = f"({expr} + {e})", "FLOAT"
        return expr, t

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def mref(self, name: str) -> str:
        return f"&rt->maps[{self.map_no[name]}]"

    def value(self, e: Expr, types: dict[str, str]) -> tuple[str, str]:
        """A C expression for ``e`` and its M3 type."""
        if isinstance(e, Var):
            if e.name not in types:
                raise Unsupported(f"variable {e.name} is not bound where it is read")
            return f"v_{e.name}", types[e.name]
        if isinstance(e, Const):
            v = e.value
            if isinstance(v, bool):
                raise Unsupported("boolean constant")
            if isinstance(v, int):
                if not -(2**63) <= v < 2**63:
                    raise Unsupported(f"integer constant {v} does not fit 64 bits")
                return f"INT64_C({v})", "INT"
            if isinstance(v, float):
                return c_float(v), "FLOAT"
            if isinstance(v, datetime.date):
                return f"INT64_C({v.toordinal()})", "DATE"
            if isinstance(v, str):
                if v not in self.strings:
                    self.strings.append(v)
                return f"INT64_C({self.strings.index(v)})", "STRING"
            raise Unsupported(f"constant {v!r}")
        if isinstance(e, Prod):
            if not e.factors:
                return "INT64_C(1)", "INT"
            expr, t = self.product([self.value(f, types) for f in e.factors])
            return f"({expr})", t
        if isinstance(e, Call) and e.fn in DATE_PARTS:  # computed in C from the day number (crt's date_part)
            x, t = self.value(e.args[0], types)
            if t != "DATE":
                raise Unsupported(f"{e.fn} of a {t}")
            return f"date_part({x}, {DATE_PARTS[e.fn]})", "INT"
        if isinstance(e, Call) and e in self.computed:  # a string: interned by the runtime with the batch
            return self.computed[e], result_type(e.fn)
        raise Unsupported(f"expression {type(e).__name__} in a trigger")

    def cond(self, c: Cmp, types: dict[str, str]) -> str:
        if c.op in LIKE_OPS:
            return self.like(c, types)
        (left, lt), (right, rt) = self.value(c.left, types), self.value(c.right, types)
        if c.op not in _COPS:
            raise Unsupported(f"comparison {c.op}")
        if "STRING" in (lt, rt):
            if lt != rt:
                raise Unsupported(f"comparison {c.op} between a {lt} and a {rt}")
            if c.op in ("<", "<="):  # ids keep no order: compare the strings (the runtime sends them to C)
                self.string_order = True
                return f"(str_cmp(rt, {left}, {right}) {_COPS[c.op]} 0)"
        return f"({left} {_COPS[c.op]} {right})"

    def like(self, c: Cmp, types: dict[str, str]) -> str:
        """``X LIKE 'p'``: C matches the interned string's bytes against the pattern (``str_like``), so the
        runtime sends it the intern table's strings, as for ordering."""
        if not (isinstance(c.right, Const) and isinstance(c.right.value, str)):
            raise Unsupported(f"{c.op} against a non-constant pattern")
        left, lt = self.value(c.left, types)
        if lt != "STRING":
            raise Unsupported(f"{c.op} of a {lt}")
        self.string_order = True
        pattern = c.right.value.encode("utf-8", "surrogatepass")
        call = f'str_like(rt, {left}, "{"".join(f"{chr(92)}x{b:02x}" for b in pattern)}", {len(pattern)})'
        return f"({call})" if c.op == "LIKE" else f"(!{call})"


def numeric(expr: str, m3_type: str) -> str:
    """``expr`` as a factor of a product: only INT and FLOAT multiply.

    >>> numeric("v_A", "INT")
    'v_A'
    """
    if m3_type not in ("INT", "FLOAT"):
        raise Unsupported(f"a {m3_type} value used as a number")
    return expr


def product_type(types: list[str]) -> str:
    """FLOAT if any factor is, else INT.

    >>> product_type(["INT", "FLOAT"]), product_type(["INT"])
    ('FLOAT', 'INT')
    """
    return "FLOAT" if "FLOAT" in types else "INT"


def groups(statements: tuple[Statement, ...]) -> list[tuple[tuple, list[list]]]:
    """Statements as ((target, guards, refs), [scalar factor lists]), split and fused as the Python generator
    does (:func:`..codegen.statement_groups`); a scalar factor other than a variable or constant is refused."""
    out = statement_groups(statements)
    for _, scalar_lists in out:
        for scalars in scalar_lists:
            for e in scalars:
                if not isinstance(e, (Var, Const)):
                    raise Unsupported(f"expression {type(e).__name__} in a trigger statement")
    return out


def _key_item(gen: _Gen, a: Expr, want: str, types: dict[str, str], where: str) -> str:
    """One key column of a map reference: the value, typed as the map's key column."""
    expr, t = gen.value(a, types)
    if t != want:
        raise Unsupported(f"{where}: a {t} value as a {want} key column")
    return to_key(expr, want)


def trigger_c(gen: _Gen, t: Trigger, tno: int) -> tuple[int, ...]:
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
    for i in used:
        gen.emit(1, f"const {ctype(col_types[i])} *c{i} = (const {ctype(col_types[i])} *)cols[{i}];")
    gen.emit(1, "for (int64_t row = 0; row < n_rows; row++) {")
    calls = list(dict.fromkeys(n for s in t.statements for n in [*walk(s.target), *walk(s.expr)]
                               if isinstance(n, Call) and n.fn not in DATE_PARTS))
    gen.computed = {c: f"fval{j}" for j, c in enumerate(calls)}
    for j in range(len(calls)):
        gen.emit(1, f"const int64_t *fcol{j} = (const int64_t *)cols[{len(col_types) + j}];")
    for i in used:
        gen.emit(2, f"{ctype(col_types[i])} v_{t.vars[i]} = c{i}[row];")
    for j in range(len(calls)):
        gen.emit(2, f"int64_t fval{j} = fcol{j}[row];")
    for c in calls:
        if not (isinstance(c.args[0], Var) and c.args[0].name in t.vars):
            raise Unsupported(f"{c.fn} of something else than an event variable")
    gen.computed_columns[(t.relation, t.sign)] = tuple((t.vars.index(c.args[0].name), c) for c in calls)
    event_types = {v: col_types[i] for i, v in enumerate(t.vars)}
    for (target, all_guards, refs), scalar_lists in groups(t.statements):
        _statement(gen, t, dict(event_types), target, all_guards, refs, scalar_lists)
    gen.emit(1, "}")
    gen.emit(1, "return 0;")
    gen.emit(0, "}")
    return used


def _statement(gen: _Gen, t: Trigger, types: dict[str, str], target: MapRef, all_guards, refs, scalar_lists) -> None:
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
    parts = []
    for scalars in scalar_lists:
        vals = [gen.value(f, types) for f in scalars]
        parts.append(gen.product(vals) if vals else ("INT64_C(1)", "INT"))
    factors: list[tuple[str, str]] = []
    if parts != [("INT64_C(1)", "INT")]:
        if len(parts) > 1:
            parts = [(f"({e})", ty) for e, ty in parts]
        total, st = gen.total(parts)
        gen.emit(depth, f"{ctype(st)} s = {total};")
        gen.emit(depth, "if (s != 0) {")
        depth, opened = depth + 1, opened + 1
        factors.append(("s", st))
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
        stride = max(1, len(m.keys))
        pos = tuple(i for i, a in enumerate(r.args) if not (isinstance(a, Var) and a.name not in bound))
        if pos:
            ino = gen.specs[r.name].index(pos)
            gen.emit(depth, f"int64_t K{c}[{stride}];")
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
            col = from_key(f"rt->maps[{no}].keys[(int64_t)e{c} * {stride} + {i}]", kt)
            if a.name in bound_here:  # the same loop variable twice in one map: a diagonal
                checks.append(f"(v_{a.name} == {col})")
                continue
            bound_here.append(a.name)
            gen.emit(depth, f"{ctype(kt)} v_{a.name} = {col};")
            types[a.name] = kt
        vt = m.value_type
        gen.emit(depth, f"{ctype(vt)} w{c} = rt->maps[{no}].vals[e{c}].{'d' if vt == 'FLOAT' else 'i'};")
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
    add = "map_add_d" if tm.value_type == "FLOAT" else "map_add_i"
    cast = "(double)" if tm.value_type == "FLOAT" and dt != "FLOAT" and delta != "INT64_C(1)" else ""
    if tm.value_type == "FLOAT" and delta == "INT64_C(1)":
        delta = "1.0"
    gen.emit(depth, f"if ((rc = {add}(rt, {gen.mref(target.name)}, KT, {cast}{delta})) != 0) return rc;")
    for _ in range(opened):
        depth -= 1
        gen.emit(depth, "}")


def generate(program: Program) -> Module:
    """The whole C module for ``program``, or :class:`Unsupported` naming what it cannot do."""
    specs = index_specs(program)
    gen = _Gen(program, specs)
    for m in program.maps:
        if m.value_type not in ("INT", "FLOAT"):
            raise Unsupported(f"map {m.name} has value type {m.value_type}")
        if len(m.keys) > MAX_KEYS:
            raise Unsupported(f"map {m.name} has more than {MAX_KEYS} keys")
        if len(specs.get(m.name, ())) > MAX_INDEXES:
            raise Unsupported(f"map {m.name} needs more than {MAX_INDEXES} indexes")
        for k in m.keys:
            if k.type not in ("INT", "FLOAT", "STRING", "DATE"):
                raise Unsupported(f"map {m.name} has a key of type {k.type}")
    used = {}
    order = []
    for tno, t in enumerate(program.triggers):
        used[(t.relation, t.sign)] = trigger_c(gen, t, tno)
        order.append((t.relation, t.sign))
    triggers_c = "\n".join(gen.lines)
    setup = ["static void rt_setup(rt_t *rt, double eps) {", f"    rt->nmaps = {len(program.maps)};"]
    for i, m in enumerate(program.maps):
        setup.append(f"    map_init(&rt->maps[{i}], {len(m.keys)}, {int(m.value_type == 'FLOAT')}, eps);")
        if len(m.keys) == 1 and m.keys[0].type != "FLOAT":  # see crt: neighbouring keys in neighbouring slots
            setup.append(f"    rt->maps[{i}].prim.ident = 1;")
        for j, pos in enumerate(specs.get(m.name, [])):
            setup.append(f"    {{ static const int p[] = {{{', '.join(map(str, pos))}}}; "
                         f"map_add_index(&rt->maps[{i}], {len(pos)}, p); }}")
            if len(pos) == 1 and m.keys[pos[0]].type != "FLOAT":
                setup.append(f"    rt->maps[{i}].idx[{j}].ident = 1;")
    setup.append("}")
    run = ["static int run_trigger(rt_t *rt, int t, int64_t n, void **cols) {", "    switch (t) {"]
    run += [f"    case {i}: return trig_{i}(rt, n, cols);" for i in range(len(order))]
    run += ["    default: return -2;", "    }", "}"]
    source = "\n".join([f"#define NMAPS {max(1, len(program.maps))}", SOURCE, triggers_c, "\n".join(setup),
                        "\n".join(run), ""])
    return Module(source, triggers_c, tuple(m.name for m in program.maps), tuple(order), used, tuple(gen.strings),
                  gen.string_order, gen.computed_columns)
