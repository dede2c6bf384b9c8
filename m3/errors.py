"""Exception classes shared by the M3 language, compiler and runtime.

Every user-facing problem names the construct at fault and, when it comes
from text, its position as ``line:col`` (both 1-based), so a message can be
shown as is.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Pos:
    """A 1-based line and column in some source text."""

    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.line}:{self.col}"


def pos_of_offset(text: str, offset: int) -> Pos:
    """The line:col of a 0-based character offset.

    >>> pos_of_offset("ab\\ncd", 4)
    Pos(line=2, col=2)
    """
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return Pos(line, col)


class M3Error(Exception):
    """Base class of every error raised by ``boreas.m3``."""

    def __init__(self, message: str, pos: Pos | None = None):
        self.message = message
        self.pos = pos
        super().__init__(f"{message} (at line {pos.line}, col {pos.col})" if pos else message)


class ParseError(M3Error):
    """M3 program text that does not follow the grammar."""


class CheckError(M3Error):
    """A program that parses but breaks a rule of (restricted) M3.

    ``errors`` lists every problem found as ``(message, pos)``; the exception
    text shows them all, one per line.
    """

    def __init__(self, errors: list[tuple[str, Pos | None]]):
        self.errors = list(errors)
        first_msg, first_pos = self.errors[0]
        super().__init__(first_msg, first_pos)
        lines = [f"{m} (at line {p.line}, col {p.col})" if p else m for m, p in self.errors]
        self.args = ("\n".join(lines),)


class CompileError(M3Error):
    """SQL that the compiler does not support, naming the construct and where it is."""


class RuntimeStateError(M3Error):
    """A state, event or read request that does not fit the runtime's program."""
