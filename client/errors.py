"""The error of a read of an ``m3`` box, raised by :mod:`.query` and :mod:`.partitioned` alike.

It has a module of its own so that both can raise it without either
importing the other (:mod:`.query` uses :mod:`.partitioned`).
"""


class QueryFailed(RuntimeError):
    """The box or map is unknown (``status`` 404) or the keys are wrong (422); the message says which."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status
