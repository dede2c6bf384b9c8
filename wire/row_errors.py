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


def with_article(kind: str) -> str:
    """A type's name with its indefinite article, for messages.

    >>> with_article("int"), with_article("double")
    ('an int', 'a double')
    """
    return f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}"
