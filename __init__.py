"""Boreas: a catalog-driven control plane and data plane for distributed stream processing.

The repository's top-level folders are the subpackages of ``boreas``:
``boreas.catalog`` (the catalog and its stores), ``boreas.head``,
``boreas.node``, ``boreas.regional``, ``boreas.wire`` (the protocols),
``boreas.client`` (the Python API: :class:`~boreas.client.Publisher`,
:class:`~boreas.client.Subscriber`, :class:`~boreas.client.QueryClient`),
``boreas.m3`` (incrementally maintained SQL views), ``boreas.spark`` and
``boreas.cli`` (the ``boreas`` command).

``boreas.__version__`` is the installed distribution's version (looked up
when first asked for, so importing a subpackage stays cheap).
"""

from __future__ import annotations

from typing import Any

__all__ = ["__version__"]

__version__: str


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("boreas")
        except PackageNotFoundError:  # running from a source tree that was never installed
            found = "0+unknown"
        globals()["__version__"] = found
        return found
    raise AttributeError(f"module 'boreas' has no attribute {name!r}")
