"""Whether this machine runs the native (C) M3 backend: a C compiler and cffi (``make test`` installs gcc).

``make test`` must pass with and without a compiler (issue 17): the tests of
the native backend itself are skipped without one, with the reason; the
fallback tests run everywhere.
"""

from __future__ import annotations

import functools


@functools.cache
def native_reason() -> str | None:
    """None where the native backend runs here; else why it does not (the runtime's own reason)."""
    from boreas.m3 import Runtime

    runtime = Runtime("CREATE STREAM R(a INT); SELECT SUM(a) AS s FROM R", backend="auto")
    return None if runtime.backend == "native" else runtime.backend_reason


def skip_without_native() -> None:
    """Skip the calling test where the native backend cannot run (no compiler, no cffi), saying why."""
    import pytest

    reason = native_reason()
    if reason is not None:
        pytest.skip(f"the native M3 backend does not run here: {reason}")


def native(sql_or_program, **kwargs):
    """A runtime on the native backend, checked to be on it (tests/m3/test_native*.py)."""
    from boreas.m3 import Runtime

    rt = Runtime(sql_or_program, backend="native", **kwargs)
    assert rt.backend == "native" and rt.backend_reason is None
    return rt


def norm(state: dict) -> dict:
    """A state with each map's entries in one order (the format does not fix their order)."""
    return {**state, "maps": {m: sorted(rows, key=repr) for m, rows in state["maps"].items()}}
