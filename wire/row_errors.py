"""What is wrong with a row: shared by the row path (:mod:`.tuples`) and the column path (:mod:`.columns`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RowError:
    """Why one row of a batch was refused: which row (0-based), which field, why."""

    row: int
    field: str
    reason: str


class SchemaMismatch(ValueError):
    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
