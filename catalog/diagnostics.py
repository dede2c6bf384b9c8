"""Located, one-line problems with user input, and the exception that carries them.

Every check in Boreas reports into a list of :class:`Diagnostic` rather than
stopping at the first problem: a user fixing a topology wants every mistake
at once, each with the file, line and element path it is about.

>>> d = Diagnostic("app.xml", 12, "/borealis/box[2]", "unknown box type 'fliter'")
>>> str(d)
"app.xml:12: /borealis/box[2]: unknown box type 'fliter'"
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a catalog element was declared: file, line and element path."""

    file: str
    line: int | None = None
    path: str = ""

    def __str__(self) -> str:
        line = f":{self.line}" if self.line is not None else ""
        return f"{self.file}{line}"


#: Origin of elements that come from the stored global catalog, not a file.
CATALOG = Origin("<catalog>")


def origin_field() -> Origin:
    """A model element's ``origin`` field: :data:`CATALOG` by default, and not part of the element's
    value (not compared, not in its repr), so the same element read from two files is equal."""
    return field(default=CATALOG, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem: where it is, and why it is a problem, in one line."""

    file: str
    line: int | None
    path: str
    reason: str

    @classmethod
    def at(cls, origin: Origin, reason: str) -> Diagnostic:
        return cls(origin.file, origin.line, origin.path, reason)

    def __str__(self) -> str:
        line = f":{self.line}" if self.line is not None else ""
        path = f" {self.path}:" if self.path else ""
        return f"{self.file}{line}:{path} {self.reason}"

    def as_dict(self) -> dict[str, object]:
        return {"file": self.file, "line": self.line, "path": self.path, "reason": self.reason}


class ValidationFailed(Exception):
    """Input was rejected; ``diagnostics`` says every reason.  Nothing was changed."""

    def __init__(self, diagnostics: Iterable[Diagnostic]):
        self.diagnostics = list(diagnostics)
        super().__init__(self._summary())

    def _summary(self) -> str:
        n = len(self.diagnostics)
        head = f"{n} problem{'s' if n != 1 else ''}"
        return head + ":\n" + "\n".join(f"  {d}" for d in self.diagnostics)
