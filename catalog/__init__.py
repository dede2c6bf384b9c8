"""The Boreas catalog: the topology model, its XML languages, validation and stores.

Depends on no other Boreas package (``boreas.schemas`` is data).  Typical use::

    from boreas.catalog import open_store, read_file, apply_submission
    store = open_store("sqlite:///catalog.db")
    apply_submission(store, [read_file("app.xml"), read_file("deploy.xml")])
"""

from .boxtypes import BoxType, BoxTypeRegistry, builtin_registry
from .diagnostics import Diagnostic, Origin, ValidationFailed
from .documents import Application, Deployment, Update, read_document, read_file
from .elements import catalog_from_snapshot, diff
from .model import Box, Catalog, Field, FieldType, Schema
from .store import CatalogStore, Change, Commit, ConflictError, StoreError, open_store
from .submission import Applied, Plan, apply_submission, plan_submission
from .validate import check_topology, stream_schemas

__all__ = [
    "Application", "Applied", "Box", "BoxType", "BoxTypeRegistry", "Catalog", "CatalogStore",
    "Change", "Commit", "ConflictError", "Deployment", "Diagnostic", "Field", "FieldType",
    "Origin", "Plan", "Schema", "StoreError", "Update", "ValidationFailed", "apply_submission",
    "builtin_registry", "catalog_from_snapshot", "check_topology", "diff", "open_store",
    "plan_submission", "read_document", "read_file", "stream_schemas",
]
