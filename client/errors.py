"""The errors of the client API that more than one of its modules raise.

They have a module of their own so that the modules raising them need not
import each other: :class:`QueryFailed` is raised by :mod:`.query` and
:mod:`.partitioned` (and :mod:`.query` uses :mod:`.partitioned`);
:class:`OptimizerFailed` by :mod:`.optimizer`, :mod:`.optimizer_updates`
and :mod:`.optimizer_views`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class QueryFailed(RuntimeError):
    """The box or map is unknown (``status`` 404) or the keys are wrong (422); the message says why."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class OptimizerFailed(RuntimeError):
    """A change an optimizer asked for did not happen, or did not show in time; the message says why.

    ``status`` says what kind of failure it was, as an HTTP status, so that
    a caller serving HTTP (the web UI) answers with it and others can ignore
    it: 404 an unknown box, 409 a change that makes no sense (already
    there, not deployed, not a member), 422 a malformed request, 502 the
    node refused (``diagnostics``: its problems, as dicts), 503 it could not
    be reached, 504 the change was made but not seen everywhere in time.
    """

    def __init__(self, message: str, status: int = 409, diagnostics: Sequence[dict[str, Any]] = ()):
        super().__init__(message)
        self.status = status
        self.diagnostics = list(diagnostics)
