"""An INT value beyond 64 bits: the one way a native batch fails that the Python backend then takes over.

Its own module so that :mod:`.backend` (which raises it) and the package
(which chooses backends and re-exports it) both import it from here, and
neither imports the other.
"""

from __future__ import annotations

from ...errors import RuntimeStateError

#: :attr:`Runtime.backend_reason` once an INT value outgrew 64 bits (the start of the WARNING logged then)
BEYOND_64_BITS = "INT value beyond 64 bits: continuing on the Python backend"


class IntOverflow(RuntimeStateError):
    """An INT value of a batch does not fit 64 bits; nothing of the batch stays in the C maps.

    ``where``: the map whose update (or the statement computing it) overflowed
    and the trigger that ran it (``"map Q1_t, trigger +R"``: the C side rolled
    the batch back), or an input column holding such a value (``"column b of
    R"``: nothing ran).  The runtime catches it and re-runs the batch on the
    Python backend.
    """

    def __init__(self, where: str):
        self.where = where
        super().__init__(f"INT value beyond 64 bits ({where}); the batch was not applied")
