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
