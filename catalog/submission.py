"""A submission: application and deployment documents validated and committed as one.

This is the one path every change to the global catalog takes (the CLI, and
later the Head): read the documents, merge them into the current catalog,
check the whole topology, and commit the difference atomically.  A
concurrent commit by someone else makes the store refuse ours
(``ConflictError``); we then re-read, re-validate against the new catalog
and try again, so no update is lost and none is applied half-way.

Usage::

    docs = [read_file("app.xml"), read_file("deploy.xml")]
    result = apply_submission(open_store("memory://"), docs)
    print(result.commit.version, len(result.commit.changes))
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .boxtypes import BoxTypeRegistry, builtin_registry
from .diagnostics import Diagnostic, ValidationFailed
from .documents import Application, Deployment, Document, Update
from .elements import catalog_from_snapshot, diff
from .merge import merge
from .model import Catalog
from .store.base import CatalogStore, Change, Commit, ConflictError
from .validate import check_topology

log = logging.getLogger(__name__)


@dataclass
class Plan:
    """The catalog a submission would produce, had it no problems."""

    catalog: Catalog
    problems: list[Diagnostic]

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class Applied:
    before: Catalog
    after: Catalog
    commit: Commit


def split_documents(documents: Sequence[Document]) -> tuple[list[Application], list[Deployment]]:
    apps = [d for d in documents if isinstance(d, Application)]
    deps = [d for d in documents if isinstance(d, Deployment)]
    updates = [d for d in documents if isinstance(d, Update)]
    if updates:
        raise ValidationFailed(
            Diagnostic(u.source, 1, "/update", "update XML is exchanged between Boreas components; "
                                               "submit application (<borealis>) and deployment "
                                               "(<deploy>) XML instead")
            for u in updates
        )
    return apps, deps


def plan_submission(
    catalog: Catalog, documents: Sequence[Document], registry: BoxTypeRegistry | None = None
) -> Plan:
    """Merge and check without touching any store."""
    apps, deps = split_documents(documents)
    merged, problems = merge(catalog, apps, deps)
    report = check_topology(merged, registry or builtin_registry())
    # The whole merged topology is checked: the stored catalog was valid when
    # committed, so whatever is wrong now was caused by this submission.
    problems += report.problems
    return Plan(merged, _dedupe(problems))


def _dedupe(problems: list[Diagnostic]) -> list[Diagnostic]:
    seen: set[Diagnostic] = set()
    out = []
    for p in problems:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def optimistic_commit(
    store: CatalogStore,
    build: Callable[[Catalog], Sequence[Change] | None],
    attempts: int = 10,
) -> tuple[Catalog, Commit] | None:
    """Commit what ``build`` makes of the current catalog, re-reading on a race.

    ``build`` is called with the catalog as stored and returns the changes to
    commit, or None for nothing to do; it may raise to refuse.  Returns the
    catalog it was built on and the commit, or None when ``build`` declined.
    """
    for attempt in range(1, attempts + 1):
        snapshot = store.snapshot()
        before = catalog_from_snapshot(snapshot)
        changes = build(before)
        if changes is None:
            return None
        try:
            return before, store.commit(snapshot.version, changes)
        except ConflictError as exc:
            log.info("commit raced another commit (attempt %d/%d): %s", attempt, attempts, exc)
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


def apply_submission(
    store: CatalogStore,
    documents: Sequence[Document],
    registry: BoxTypeRegistry | None = None,
    attempts: int = 10,
) -> Applied:
    """Validate against the current catalog and commit; raises ``ValidationFailed``."""
    registry = registry or builtin_registry()
    planned: list[Catalog] = []

    def build(before: Catalog) -> list[Change]:
        plan = plan_submission(before, documents, registry)
        if not plan.ok:
            raise ValidationFailed(plan.problems)
        planned.append(plan.catalog)
        return diff(before, plan.catalog)

    result = optimistic_commit(store, build, attempts)
    assert result is not None
    before, commit = result
    after = planned[-1]
    after.version = commit.version
    return Applied(before, after, commit)
