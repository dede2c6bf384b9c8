"""Whether a classified plan needs members to read each other's entries, and why (docs/cumulus.md §3.3).

A plan whose every statement is LOCAL (:func:`all_local`) needs no member
to read another's entries: applying each event where its keys live gives
exactly the single-node maps (tests/m3/test_cumulus_plan_exact.py proves it),
in any order.  Any other plan runs in version order with pushes between
members (:mod:`.roles`).

Its own module because it answers a different question than
:mod:`.plan`'s classification: not *how* each statement runs but *whether
the box needs ordering at all*, in words a user deploying it can act on
(the planner's reason, ``boreas compile``).

>>> from ..compiler.pipeline import compile_sql
>>> from .plan import classify
>>> p = compile_sql("CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS total FROM R GROUP BY a")
>>> all_local(classify(p, {"Q1_total": 0}, box="g"))
(True, "box 'g': all 2 statements of 2 triggers are LOCAL; each event is applied where its keys live")
"""

from __future__ import annotations

from .plan import BCAST_GATHER, BCAST_PUSH, GATHER, LOCAL, LOOP, POINT_PUSH, REPART, Plan, StatementPlan, TriggerPlan


_WHY = {
    POINT_PUSH: "its owner would push the entry to the writer",
    GATHER: "every member would push its part of the slice to the writer",
    REPART: "its entries would be pushed to the owners of the loop variable",
    BCAST_PUSH: "its owner would push it to every writer",
    BCAST_GATHER: "every member would push its part to every writer",
}


def explain(plan: Plan, trigger: TriggerPlan, stmt: StatementPlan) -> str:
    """Why ``stmt`` is not LOCAL, naming its costliest reference and where it lives."""
    ref = next(r for r in stmt.refs if r.cls == stmt.cls)
    where = "kept whole on the home segment" if ref.column is None else f"partitioned on {plan.column_name(ref.ref.name)}"
    writer_is = ("every member (a loop over " + stmt.arg.name + ")" if stmt.kind == LOOP
                 else "every member (a replicated map)" if stmt.arg.kind == "all"
                 else "the home member" if stmt.arg.kind == "home" else f"the owner of {stmt.arg}")
    return (f"statement {stmt.index} of trigger {trigger.name} ({stmt.text}) reads map {ref.ref.name} {where} "
            f"at {ref.arg} from another member (its writer is {writer_is}; {ref.cls}: {_WHY[ref.cls]})")


def all_local(plan: Plan) -> tuple[bool, str]:
    """Whether every statement is LOCAL (members never read each other's entries), and why; names the first that is not."""
    n = sum(1 for _ in plan.statements())
    for t, s in plan.statements():
        if s.cls != LOCAL:
            return False, f"box {plan.box!r}: {explain(plan, t, s)}; members push such entries to each other, in version order"
    return True, (f"box {plan.box!r}: all {n} statements of {len(plan.triggers)} triggers are LOCAL; "
                  "each event is applied where its keys live")
