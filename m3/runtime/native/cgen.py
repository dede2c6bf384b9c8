"""C code generation for a checked M3 program: the whole module, its maps' shapes and its index specs.

The module is the fixed runtime (:mod:`.crt`), one C function per trigger
(:mod:`.ctrigger`, over the values and conditions of :mod:`.cexpr`), and
what ties them to the program: ``rt_setup`` declares every map with its
arity, value type and secondary indexes (:func:`..maps.index_specs`, the
same as the Python backend's), and ``run_trigger`` dispatches a trigger
number to its function.  Why here: the limits a program must fit (key
counts, index counts, value and key types) and the :class:`Module` the
Python side drives (which columns each trigger reads, which strings are
interned first, which columns the runtime computes per batch) are about the
module as a whole, not about one trigger.

Anything the generator does not know is refused with a reason
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
    updq_t q; q.n = 0;
    const int64_t *c0 = (const int64_t *)cols[0];
    const int64_t *c1 = (const int64_t *)cols[1];
    for (int64_t row = 0; row < n_rows; row++) {
        int64_t v_A = c0[row];
        int64_t v_B = c1[row];
        if (row + 8 < n_rows) {
            int64_t v_A = c0[row + 8];
            int64_t v_B = c1[row + 8];
            if (1) { int64_t P[2] = {0}; P[0] = v_A; pf_slot(&rt->maps[1].idx[0], P); }
            if (1) { int64_t P[2] = {0}; P[0] = v_A; P[1] = v_B; pf_slot(&rt->maps[1].prim, P); }
        }
        if (row + 4 < n_rows) {
            int64_t v_A = c0[row + 4];
            int64_t v_B = c1[row + 4];
            if (1) { int64_t P[2] = {0}; P[0] = v_A; pf_entry(&rt->maps[1], &rt->maps[1].idx[0], P); }
            if (1) { int64_t P[2] = {0}; P[0] = v_A; P[1] = v_B; pf_entry(&rt->maps[1], &rt->maps[1].prim, P); }
        }
        {
            int64_t s = INT64_C(2);
            if (s != 0) {
                int64_t K1[2];
                K1[0] = v_A;
                for (int32_t e1 = idx_head(&rt->maps[1], 0, K1); e1 >= 0; e1 = rt->maps[1].idx[0].next[e1]) {
                    int64_t v_C = rt->maps[1].ents[(int64_t)e1 * 3 + 1];
                    int64_t w1 = ((const val_t *)rt->maps[1].ents)[(int64_t)e1 * 3 + 2].i;
                    int64_t d = CK_MUL(s, w1, 0);
                    int64_t KT[1] = {v_C};
                    if ((rc = upd_i(rt, &q, &rt->maps[0], KT, d)) != 0) return rc;
                }
            }
        }
        {
            int64_t KT[2] = {v_A, v_B};
            if ((rc = map_add_i(rt, &rt->maps[1], KT, INT64_C(1))) != 0) return rc;
        }
    }
    if ((rc = upd_flush(rt, &q)) != 0) return rc;
    return 0;
}
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...ast import Program
from ..keybind import bind_keys
from ..maps import index_specs
from .cexpr import Gen, Unsupported
from .crt import SOURCE
from .ctrigger import trigger_c

MAX_KEYS = 16
MAX_INDEXES = 8

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


def generate(program: Program) -> Module:
    """The whole C module for ``program``, or :class:`Unsupported` naming what it cannot do."""
    specs = index_specs(program)
    gen = Gen(program, specs)
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
        used[(t.relation, t.sign)] = trigger_c(gen, bind_keys(program, t), tno)  # read as index_specs reads it
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
