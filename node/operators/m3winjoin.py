"""A window join's rows, emitted when its windows close: the closed leaf rows grouped per window, the stages
above evaluated over each (m3/winstages.py), the query's rows emitted in window order.

Why its own module: the windowed box (:mod:`.m3windows`) closes windows the same way for every view; only
what it does with the closed rows differs.  A plain windowed view emits them; a window join's views are its
leaves, whose closed rows are the input of the stages above (docs/m3.md, "Window joins").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from boreas.catalog.model import FieldType, Schema
from boreas.m3.winstages import StagePlan

from .m3memo import present


class StageEmit:
    """Turns the closed windows' leaf rows into the query's out rows (out port 0); owns the runtimes it
    evaluates the stages with (nothing in them outlives one window)."""

    def __init__(self, stages: StagePlan, schema: Schema):
        self.stages, self.schema = stages, schema
        self.runtimes = stages.runtimes()

    def rows(self, closed: dict[str, Sequence[tuple[int, tuple, object]]]) -> list[tuple]:
        """``closed``: per leaf view its closed rows as ``(window end, key, value)``; the out rows, per window
        in order of its end."""
        per_window: dict[int, dict[str, list]] = defaultdict(lambda: defaultdict(list))
        for view, rows in closed.items():
            for end, key, value in rows:
                per_window[end][view].append((key, value))
        top = self.stages.top
        width = len(top.output_keys)
        casts = [float if f.type == FieldType.DOUBLE else int for f in self.schema.fields[width:]]
        out: list[tuple] = []
        for end in sorted(per_window):
            for key, value in self.stages.evaluate(per_window[end], self.runtimes).items():
                if not present(value):
                    continue
                values = value if isinstance(value, tuple) else (value,)
                out.append(tuple(key[i] for i in top.output_keys) + tuple(c(v) for c, v in zip(casts, values)))
        return out
