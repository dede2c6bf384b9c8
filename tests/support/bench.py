"""``bench/`` importable by its plain module names (``import m3``), for the tests that run benchmark code."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def bench_importable(monkeypatch, names: tuple[str, ...]) -> Iterator[None]:
    """A fixture body: ``bench/`` on ``sys.path`` and ``names`` imported fresh for one test, then the modules
    of those names that were loaded before put back (``m3`` is also the name of a test helper's package)."""
    saved = {name: sys.modules.pop(name) for name in names if name in sys.modules}
    monkeypatch.syspath_prepend(str(BENCH))
    yield
    for name in names:
        sys.modules.pop(name, None)
    sys.modules.update(saved)
