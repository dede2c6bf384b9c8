"""End of input, in process: an aggregate emits its open windows when its stream ends, and only then."""

from __future__ import annotations

from support.operators import T, make, rows_of

SLIDING = {"aggregate-function.0": "count()", "window-size-by": "VALUES", "window-size": "10", "advance": "5",
           "order-by": "FIELD", "order-on-field": "time", "group-by": "value", "drop-empty-outputs": "1"}


def test_end_of_input_emits_every_open_window_per_group_in_start_order_and_later_tuples_open_new_ones():
    op = make("aggregate", SLIDING, T)
    assert op.process(0, [(1.0, 0), (1.0, 7), (2.0, 3)], now=0.0) == []  # windows stay open without more input
    assert sorted(rows_of(op.end_of_input(1.0))) == [(1.0, 0, 2), (1.0, 5, 1), (2.0, 3, 1)]
    assert op.end_of_input(2.0) == []  # nothing open: nothing again
    assert rows_of(op.process(0, [(1.0, 2)], now=3.0)) == [] and op.counters()["late_tuples"] == 1
    op.process(0, [(1.0, 30)], now=4.0)
    assert rows_of(op.end_of_input(5.0)) == [(1.0, 25, 1), (1.0, 30, 1)]  # 30 is in both windows


def test_tuple_windows_emit_what_they_hold_at_the_end():
    op = make("aggregate", {"aggregate-function.0": "count()", "window-size-by": "TUPLES", "window-size": "3"}, T)
    assert op.process(0, [(1.0, 1), (1.0, 2)], now=0.0) == []
    assert rows_of(op.end_of_input(1.0)) == [(2,)]


# -- the end goes on: a box whose inputs all ended ends its out streams (node/router.py, node/stream_ends.py) --

NEXT, CLIENT = "localhost:15001", "localhost:17000"
COUNT = {"aggregate-function.0": "count()", "aggregate-function-output-name.0": "n", "window-size-by": "VALUES",
         "window-size": "10", "order-by": "FIELD", "order-on-field": "time", "independent-window-alignment": "1"}


def chain():
    """Where Packet enters: an aggregate (Packet -> Counts) then a filter (Counts -> Kept) on this node; Kept goes to
    another node and Counts to a client."""
    from collections import Counter

    from boreas.catalog.model import Box, Catalog, Field, FieldType, InPort, Node, Schema, Subscription
    from boreas.node.box_state import BoxStates
    from boreas.node.flow_clock import FlowClock
    from boreas.node.outputs import Outputs
    from boreas.node.router import Router

    counts = Schema("C", (Field("time", FieldType.INT), Field("n", FieldType.INT)))
    states = BoxStates()
    states.follow({"agg": Box("agg", "aggregate", (InPort("Packet"),), ("Counts",), tuple(COUNT.items())),
                   "keep": Box("keep", "filter", (InPort("Counts"),), ("Kept",), (("expression.0", "n > 0"),))},
                  {"Packet": T, "Counts": counts, "Kept": counts})
    out = Outputs("localhost:15000", None, "n0", Counter())
    out.follow(Catalog(nodes={NEXT: Node(NEXT)}, subscriptions={
        "Kept|n": Subscription("Kept", NEXT), "Counts|c": Subscription("Counts", CLIENT)}))
    router = Router("localhost:15000", "n0", states, out, FlowClock(), Counter())
    router.rewire({})
    return states, out, router


def sent(out, endpoint: str) -> list[tuple[int, list, bool]]:
    import msgspec
    from boreas.wire.frames import decode

    return [(b.seq, msgspec.msgpack.decode(bytes(b.rows)), b.final)
            for b in (decode(bytes(data)) for e, data, *_ in out.unacknowledged() if e == endpoint)]


async def test_a_box_whose_inputs_all_ended_ends_its_out_streams_after_what_it_emitted_here_and_downstream():
    states, out, router = chain()
    await router.enter("Packet", [(1.0, 1), (1.0, 12)], "a", 0, "")
    await router.enter("Packet", [(1.0, 15)], "b", 0, "")
    await router.enter("Packet", [], "a", 1, "", final=True)
    assert sent(out, CLIENT) == [(0, [[0, 1]], False)]  # b has not ended: [10, 20) stays open
    await router.enter("Packet", [], "b", 1, "", final=True)
    # the aggregate emits [10, 20) and ends Counts; the filter, its only input ended, ends Kept
    assert sent(out, CLIENT) == [(0, [[0, 1]], False), (1, [[10, 2]], False), (2, [], True)]
    assert sent(out, NEXT) == [(0, [[0, 1]], False), (1, [[10, 2]], False), (2, [], True)]
    assert states.ends.ended == {"Packet", "Counts", "Kept"}
    await router.enter("Packet", [], "b", 1, "", final=True)  # a replayed mark: nothing ends twice
    assert len(sent(out, NEXT)) == 3


async def test_what_ended_is_in_the_snapshot_and_travels_with_a_moved_box():
    from boreas.node.box_state import BoxHandover

    states, out, router = chain()
    await router.enter("Packet", [(1.0, 1)], "a", 0, "")
    await router.enter("Packet", [], "a", 1, "", final=True)
    restarted, again, router_again = chain()
    restarted.restore(states.capture())
    assert restarted.ends == states.ends
    await router_again.enter("Packet", [], "a", 1, "", final=True)  # replayed after the snapshot: ended already
    assert sent(again, NEXT) == []
    handover = BoxHandover.decode(states.take("keep", positions=[]).encode())
    assert handover.ends == {"producers": {"Counts": [states.box_ids["agg"]]},
                             "ended": ["Counts"], "boxes": ["keep"]}
    target, _, _ = chain()
    target.put(handover, 0.0)
    assert "keep" in target.ends.boxes and "Counts" in target.ends.ended


def redeclare(states, router, declared: dict, *names: str) -> None:
    """Follow a catalog with only ``names`` of the ``declared`` boxes (the others deleted), as an update does."""
    from boreas.catalog.model import Field, FieldType, Schema

    counts = Schema("C", (Field("time", FieldType.INT), Field("n", FieldType.INT)))
    states.follow({name: declared[name] for name in names}, {"Packet": T, "Counts": counts, "Kept": counts})
    router.rewire({})


async def test_a_box_added_again_after_its_deletion_has_ended_nothing_and_holds_no_final_mark():
    """What a deleted box had ended, and a final mark of it that waited (a windowed member owing rows: held), go
    with it: a box added again under its name, given a batch, emits rows and no final mark after them."""
    states, out, router = chain()
    declared = dict(states.boxes)
    await router.enter("Packet", [(1.0, 1)], "a", 0, "")
    await router.enter("Packet", [], "a", 1, "", final=True)  # agg and keep end their out streams
    states.ends.hold("agg")  # and, as a windowed member would, agg had its final mark wait
    redeclare(states, router, declared, "keep")  # agg deleted
    redeclare(states, router, declared, "agg", "keep")  # and added again
    assert "agg" not in states.capture()["ends"]["boxes"] and "Counts" not in states.ends.ended
    before = len(sent(out, CLIENT))
    await router.enter("Packet", [(1.0, 3), (1.0, 14)], "c", 0, "")  # closes [0, 10) of the new agg
    assert sent(out, CLIENT)[before:] == [(0, [[0, 1]], False)]  # its rows, and no final mark after them


class Spy:
    """A box's operator as the router sees it, recording what it is told of its inputs' ends."""

    def __init__(self, inner, told: list):
        self.inner, self.told = inner, told

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def end_of_input(self, now: float, port: int | None = None):
        self.told.append(("input", port))
        return self.inner.end_of_input(now) if port is None else self.inner.end_of_input(now, port)

    def producer_ended(self, port: int, producer: str, now: float):
        self.told.append(("producer", port, producer))
        return self.inner.producer_ended(port, producer, now)


def spied(states, router, box: str) -> list:
    told: list = []
    states.operators[box] = Spy(states.operators[box], told)
    router.rewire({})
    return told


async def test_a_box_with_two_in_streams_is_told_which_one_ended():
    """A union of Packet and Other: Packet's end tells it port 0's input ended, and only Other's ends its out
    stream (before the fix, it was told "every input ended" at Packet's end: a partitioned box then ended the
    producers of both streams)."""
    from collections import Counter

    from boreas.catalog.model import Box, Catalog, InPort, Node, Subscription
    from boreas.node.box_state import BoxStates
    from boreas.node.flow_clock import FlowClock
    from boreas.node.outputs import Outputs
    from boreas.node.router import Router

    states = BoxStates()
    states.follow({"u": Box("u", "union", (InPort("Packet"), InPort("Other")), ("U",), ())},
                  {"Packet": T, "Other": T, "U": T})
    out = Outputs("localhost:15000", None, "n0", Counter())
    out.follow(Catalog(nodes={NEXT: Node(NEXT)}, subscriptions={"U|n": Subscription("U", NEXT)}))
    router = Router("localhost:15000", "n0", states, out, FlowClock(), Counter())
    router.rewire({})
    told = spied(states, router, "u")
    await router.enter("Packet", [(1.0, 1)], "a", 0, "")
    await router.enter("Other", [(1.0, 2)], "b", 0, "")
    await router.enter("Packet", [], "a", 1, "", final=True)
    assert ("input", 0) in told and ("input", 1) not in told and ("input", None) not in told
    assert not any(final for *_, final in sent(out, NEXT))
    await router.enter("Other", [], "b", 1, "", final=True)
    assert ("input", 1) in told and sent(out, NEXT)[-1][2]


async def test_an_upstream_box_ending_on_the_node_ends_its_producer_at_each_local_consumer():
    """agg ends Counts on this node: keep, which reads it here, is told agg's producer ended (as from a final
    mark that came in) before the input ended (before the fix, only the input's end: a partitioned box's
    coordinator that had handed that producer to another never forwarded its end, and the box never ended)."""
    states, out, router = chain()
    told = spied(states, router, "keep")
    await router.enter("Packet", [(1.0, 1)], "a", 0, "")
    await router.enter("Packet", [], "a", 1, "", final=True)
    assert [t[0] for t in told] == ["producer", "input", "input"]
    assert told[0][1] == 0 and told[1] == ("input", 0)
    assert told[2] == ("input", None)  # (its only input ended: all of them, which it was told already)
    assert told[0][2] == states.box_ids["agg"]  # (the producer its final mark downstream names)


async def test_a_window_join_whose_first_stream_ended_keeps_its_windows_open_for_the_other():
    """An m3 window join of P and A through the router: P's final mark ends P, A's rows keep coming into the
    window P's rows are in, and the window closes when A's watermark passes it, with A's later rows (before
    the fix, P's end closed every window: the window went out without them and they were counted late)."""
    from collections import Counter

    from boreas.catalog.model import Box, Catalog, Field, FieldType, InPort, Node, Schema, Subscription
    from boreas.m3.boxtype import infer_m3
    from boreas.node.box_state import BoxStates
    from boreas.node.flow_clock import FlowClock
    from boreas.node.outputs import Outputs
    from boreas.node.router import Router

    p = Schema("PTuple", (Field("k", FieldType.INT), Field("ts", FieldType.INT)))
    a = Schema("ATuple", (Field("k", FieldType.INT), Field("v", FieldType.INT), Field("ts", FieldType.INT)))
    sql = ("CREATE STREAM P(k INT, ts INT);\nCREATE STREAM A(k INT, v INT, ts INT);\n"
           "SELECT X.k, X.n, Y.top FROM (SELECT k, COUNT(*) AS n, window_start AS s, window_end AS e FROM "
           "TABLE(TUMBLE(TABLE P, DESCRIPTOR(ts), 10)) GROUP BY k, window_start, window_end) X JOIN "
           "(SELECT k, MAX(v) AS top, window_start AS s, window_end AS e FROM TABLE(TUMBLE(TABLE A, "
           "DESCRIPTOR(ts), 10)) GROUP BY k, window_start, window_end) Y ON X.k = Y.k AND X.s = Y.s AND X.e = Y.e")
    box = Box("w", "m3", (InPort("P"), InPort("A")), ("Out",), (("sql", sql), ("backend", "python")))
    states = BoxStates()
    states.follow({"w": box}, {"P": p, "A": a, "Out": infer_m3(box, [p, a])[0]})
    out = Outputs("localhost:15000", None, "n0", Counter())
    out.follow(Catalog(nodes={NEXT: Node(NEXT)}, subscriptions={"Out|n": Subscription("Out", NEXT)}))
    router = Router("localhost:15000", "n0", states, out, FlowClock(), Counter())
    router.rewire({})
    await router.enter("P", [(1, 1), (1, 2)], "p", 0, "")
    await router.enter("A", [(1, 3, 1)], "a", 0, "")
    await router.enter("P", [], "p", 1, "", final=True)
    assert [rows for _, rows, _ in sent(out, NEXT) if rows] == []  # A's watermark (1) holds window [0, 10)
    await router.enter("A", [(1, 5, 4)], "a", 1, "")
    await router.enter("A", [(2, 1, 15)], "a", 2, "")
    assert [tuple(r[:3]) for _, rows, _ in sent(out, NEXT) for r in rows] == [(1, 2, 5)]
    assert states.operators["w"].counters()["late_tuples"] == 0
    await router.enter("A", [], "a", 3, "", final=True)
    assert sent(out, NEXT)[-1][2]  # both ended: the box's out stream ends


async def test_a_box_rebuilt_after_one_in_stream_ended_emits_what_it_holds_before_its_final_mark():
    """An sunion of In0 and In1: In1 ends, then an update rebuilds the box (a parameter changed), so its new
    operator was never told In1 ended; In0's end ends the box, which must first emit the rows it holds
    (before the fix the final mark went out alone and the rows stayed in the operator for good)."""
    from collections import Counter

    from boreas.catalog.boxtypes import builtin_registry
    from boreas.catalog.model import Box, Catalog, InPort, Node, Subscription
    from boreas.node.box_state import BoxStates
    from boreas.node.flow_clock import FlowClock
    from boreas.node.outputs import Outputs
    from boreas.node.router import Router
    from boreas.wire.columns import read_ipc, unwrap
    from boreas.wire.frames import decode

    def box(delay: int) -> Box:
        params = (("interval", "10"), ("tentative-field", "tentative"), ("order-on-field", "time"),
                  ("max-delay.0", str(delay)), ("max-delay.1", str(delay)))
        return Box("u", "sunion", (InPort("In0"), InPort("In1")), ("Control", "Union"), params)

    def follow(states, delay: int) -> None:
        b = box(delay)
        control, union = builtin_registry().infer(b, [T, T])
        states.follow({"u": b}, {"In0": T, "In1": T, "Control": control, "Union": union})

    states = BoxStates()
    follow(states, 500)
    out = Outputs("localhost:15000", None, "n0", Counter())
    out.follow(Catalog(nodes={NEXT: Node(NEXT)}, subscriptions={"Union|n": Subscription("Union", NEXT)}))
    router = Router("localhost:15000", "n0", states, out, FlowClock(), Counter())
    router.rewire({})
    await router.enter("In1", [(1.0, 5)], "b", 0, "")
    await router.enter("In1", [], "b", 1, "", final=True)
    follow(states, 600)  # rebuilt: a new operator, the box's name (and what ended) kept
    router.rewire({})
    await router.enter("In0", [(1.0, 1), (2.0, 12)], "a", 0, "")
    await router.enter("In0", [], "a", 1, "", final=True)
    batches = [decode(bytes(data)) for e, data, *_ in out.unacknowledged() if e == NEXT]
    assert batches[-1].final and not any(b.final for b in batches[:-1])  # the box's final mark, last
    stable = [row["time"] for b in batches[:-1] for row in read_ipc(unwrap(bytes(b.rows))).to_pylist()
              if not row["tentative"]]  # (sunion's rows travel as Arrow)
    assert sorted(stable) == [1, 12]
