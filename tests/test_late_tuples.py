"""Late tuples: an aggregate that drops tuples whose window already closed counts them and says so in
the log, once per interval with the count since its last line (node/operators/late.py)."""

from __future__ import annotations

import logging

from boreas.node.operators import late
from support.operators import T, make, rows_of

WINDOWS = {"aggregate-function.0": "count()", "window-size-by": "VALUES", "window-size": "10",
           "order-by": "FIELD", "order-on-field": "time"}


def test_late_tuples_are_counted_and_logged_once_per_interval(caplog):
    op = make("aggregate", WINDOWS, T)
    caplog.set_level(logging.WARNING, logger=late.__name__)
    # [1, 11) closes on 21 (slack 0); 3, 4 and 5 arrive after it closed: late
    assert rows_of(op.process(0, [(0.0, 1), (0.0, 21), (0.0, 3), (0.0, 4)], now=100.0)) == [(1, 1)]
    op.process(0, [(0.0, 5)], now=101.0)  # within the interval: counted, not logged again
    assert op.counters()["late_tuples"] == 3
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "dropped 2 late tuples" in lines[0] and repr(op.box.name) in lines[0]
    op.process(0, [(0.0, 6), (0.0, 7)], now=100.0 + late.INTERVAL)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "dropped 3 late tuples" in lines[1]  # 5, 6 and 7: since the last line
    assert op.counters()["late_tuples"] == 5


def test_in_order_input_logs_nothing_and_restored_counts_are_not_logged_again(caplog):
    op = make("aggregate", WINDOWS, T)
    caplog.set_level(logging.WARNING, logger=late.__name__)
    op.process(0, [(0.0, 1), (0.0, 21), (0.0, 3)], now=0.0)
    assert len(caplog.records) == 1
    moved = make("aggregate", WINDOWS, T)
    moved.restore(op.state(), now=50.0)
    moved.process(0, [(0.0, 25), (0.0, 31)], now=100.0)  # in order: no new late tuple
    assert len(caplog.records) == 1 and moved.counters()["late_tuples"] == 1
