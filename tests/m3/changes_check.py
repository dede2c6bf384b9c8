"""A check for ``Runtime.changes()``: the rows it reports, applied in order, rebuild the view after every batch.

Why a helper of its own: a view computed when read finds the rows a batch
changed through the journals of the maps it reads, so a change that reaches
a view only through a nested subquery's map (keyed by correlation columns,
not by the view's rows) must still be reported; the DuckDB harness compares
``view()`` only.
"""

from __future__ import annotations

from boreas.m3 import Runtime, compile_sql
from boreas.m3.nullable import GONE, hides
from hypothesis import HealthCheck, given, settings
from m3_harness import EXAMPLES, scaled, workloads


def changes_rebuild_view(sql: str, backend: str, strategy=None, examples: int = EXAMPLES) -> None:
    """Random batches (``strategy(relations)``, default the harness's workloads); after each, the replica built
    from ``changes()`` equals ``view()`` for every view."""
    program = compile_sql(sql)
    relations = Runtime(program, backend="python").relations
    make = strategy or (lambda rels: workloads(rels, max_batches=5, max_ops=10))

    @settings(max_examples=scaled(examples), deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(make(relations))
    def check(batches):
        rt = Runtime(program, backend=backend)
        # (an ALWAYS view's one row is there before any batch, and an all-zero change of it is its value)
        replica: dict = {v.name: dict(rt.view(v.name)) if v.always else {} for v in program.views}
        always = {v.name for v in program.views if v.always and v.where is None}
        # a view with hidden columns (a NULL value's count, its groups' COUNT(*)) says a row left by GONE, and
        # each of its rows is told, all zeros included (COUNT(b) over only NULLs: docs/m3.md "NULLs")
        marked = {v.name for v in program.views if hides([c.name for c in v.columns])}
        live: dict[str, list] = {r: [] for r in relations}
        for ops in batches:
            events = events_of(ops, live)
            rt.apply_batch(events)
            for name, rows in rt.changes().items():
                width = len(program.view(name).columns)
                zero = 0 if width == 1 else (0,) * width
                for key, value in rows:
                    if (value is GONE if name in marked else value == zero and name not in always):
                        replica[name].pop(key, None)
                    else:
                        replica[name][key] = value
            for v in program.views:  # elsewhere a row whose values are all 0 reads as removed (the changes()
                width = len(v.columns)  # convention: a view of a query reading no nullable column)
                zero = 0 if width == 1 else (0,) * width
                assert replica[v.name] == {k: x for k, x in rt.view(v.name).items()
                                           if x != zero or v.name in always or v.name in marked}, v.name

    check()


def events_of(ops: list, live: dict[str, list]) -> list[tuple]:
    """A workload batch's operations (:func:`m3_harness.workloads`) as signed events: an insert adds its row to
    ``live``, a delete takes one of the relation's live rows (by the drawn index), none if it has none."""
    events = []
    for op in ops:
        if op[0] == "ins":
            live[op[1]].append(op[2])
            events.append((op[1], 1, op[2]))
        elif live[op[1]]:
            events.append((op[1], -1, live[op[1]].pop(op[2] % len(live[op[1]]))))
    return events
