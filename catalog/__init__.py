"""The Boreas catalog: the topology model, its XML languages, validation and stores.

Depends on no other Boreas package (``boreas.schemas`` is data).  Typical use::

    from boreas.catalog import open_store, read_file, apply_submission
    store = open_store("sqlite:///catalog.db")
    apply_submission(store, [read_file("app.xml"), read_file("deploy.xml")])

The names below are imported from their modules when first used (PEP 562),
not when the package is: ``boreas.catalog.endpoints`` or ``.model`` alone must
not pay for sqlglot (validation) and xmlschema (reading documents), about
0.5 s, which every light CLI command would otherwise wait for.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

#: Each exported name -> the module of this package that defines it.
_EXPORTS = {
    "BoxType": "boxtypes", "BoxTypeRegistry": "boxtypes", "builtin_registry": "boxtypes",
    "Diagnostic": "diagnostics", "Origin": "diagnostics", "ValidationFailed": "diagnostics",
    "Application": "documents", "Deployment": "documents", "Update": "documents",
    "read_document": "documents", "read_file": "documents",
    "catalog_from_snapshot": "elements", "diff": "elements",
    "Box": "model", "Catalog": "model", "Field": "model", "FieldType": "model", "Schema": "model",
    "CatalogStore": "store", "Change": "store", "Commit": "store", "ConflictError": "store",
    "StoreError": "store", "open_store": "store",
    "Applied": "submission", "Plan": "submission", "apply_submission": "submission",
    "plan_submission": "submission",
    "check_topology": "validate", "stream_schemas": "validate",
}

__all__ = sorted(_EXPORTS, key=str.casefold)

if TYPE_CHECKING:  # what type checkers and editors see; at run time __getattr__ below imports on use
    from .boxtypes import BoxType, BoxTypeRegistry, builtin_registry
    from .diagnostics import Diagnostic, Origin, ValidationFailed
    from .documents import Application, Deployment, Update, read_document, read_file
    from .elements import catalog_from_snapshot, diff
    from .model import Box, Catalog, Field, FieldType, Schema
    from .store import CatalogStore, Change, Commit, ConflictError, StoreError, open_store
    from .submission import Applied, Plan, apply_submission, plan_submission
    from .validate import check_topology, stream_schemas


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value
