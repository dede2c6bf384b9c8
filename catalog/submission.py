"""A submission: application and deployment documents validated and committed as one.

This is the one path every change to the global catalog takes (the CLI and
the Head): read the documents, merge them into the current catalog,
check the whole topology, and commit the difference atomically.  A
concurrent commit by someone else makes the store refuse ours
(``ConflictError``); we then bring our copy of the catalog forward from the
store's log, re-validate against it and try again (:class:`CommitRetry`), so
no update is lost, none is applied half-way, and only a submission that no
longer validates (a real conflict) is refused.

Usage::

    docs = [read_file("app.xml"), read_file("deploy.xml")]
    result = apply_submission(open_store("memory://"), docs)
    print(result.commit.version, len(result.commit.changes))
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from .boxtypes import BoxError, BoxTypeRegistry, builtin_registry
from .diagnostics import Diagnostic, ValidationFailed
from .app_diff import ApplicationChanges, application_changes, in_place_problems
from .document_model import Application, Deployment, Document, Update
from .index import CatalogIndex
from .elements import apply_commit, catalog_from_snapshot, diff
from .merge import merge_touched
from .model import Catalog, Schema
from .positions import default_layout, has_positions, resolve_by_default_layout
from .schemas_of import schemas_of
from .store.base import CatalogStore, Change, Commit, ConflictError, StoreError
from .validate import Checks, check_topology

log = logging.getLogger(__name__)


@dataclass
class Plan:
    """The catalog a submission would produce, had it no problems."""

    catalog: Catalog
    problems: list[Diagnostic]
    changes: ApplicationChanges | None = None  # (replacing) what it keeps, changes, adds and removes
    touched: dict[str, set[str]] | None = None  # Catalog dict -> keys the merge wrote (None: unknown)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class Applied:
    before: Catalog
    after: Catalog
    commit: Commit
    changes: ApplicationChanges | None = None


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
    catalog: Catalog, documents: Sequence[Document], registry: BoxTypeRegistry | None = None,
    index: CatalogIndex | None = None, checks: Checks | None = None, replacing: bool = False,
) -> Plan:
    """Merge and check without touching any store.

    ``replacing``: the documents are the new version of what they declare
    (:mod:`.app_diff`, docs/xml.md "The edit loop"); the plan then says what
    it keeps, changes, adds and removes, and refuses what cannot change in
    place.

    With ``index`` (the :class:`~.index.CatalogIndex` of ``catalog``; a Head
    keeps one) only what the submission adds, changes or connects to is
    checked, with the same result as checking the whole merged topology,
    which is done without one.  ``checks`` are plugged-in checks
    (:class:`~.validate.Checks`; an index carries its own).
    """
    apps, deps = split_documents(resolve_by_default_layout(documents))  # (what the Head did not resolve)
    registry = registry or (index.registry if index is not None else builtin_registry())
    indexed = index is not None and index.catalog is catalog
    merged, problems, touched = merge_touched(catalog, apps, deps, replacing, index if indexed else None)
    if index is not None and indexed:
        derived = index.derive(merged, touched)
        found, schemas = derived.problems, derived.stream_schemas
    else:
        # The whole merged topology is checked: the stored catalog was valid when
        # committed, so whatever is wrong now was caused by this submission.
        report = check_topology(merged, registry, checks)
        found, schemas = report.problems, report.stream_schemas
    problems += found
    changes = None
    if replacing:
        before_schemas = index.stream_schemas if index is not None and indexed else schemas_of(catalog, registry)
        problems += in_place_problems(catalog, merged, before_schemas, schemas, apps)
        changes = application_changes(catalog, merged, apps, before_schemas, schemas)
    if not problems:
        problems += plan_partitions(merged, schemas, registry)  # (planning changes nothing the index holds)
    # (planning edits partitions in place, after the merge noted its keys: they are compared whole)
    written = {kind: keys for kind, keys in touched.items() if kind != "partitions"}
    return Plan(merged, _dedupe(problems), changes, written)


def plan_partitions(catalog: Catalog, schemas: dict[str, Schema], registry: BoxTypeRegistry) -> list[Diagnostic]:
    """Plan, in place, every partition not planned yet (docs/cumulus.md §2.4); the problems found.

    The box type's ``plan_partition`` hook fills in the segments, each map's
    partition column, layout 1 and a fresh incarnation id.  Segments written
    out (catalog form) are kept.  A committed partition keeps its plan: maps
    are recorded, not recomputed, so a compiler upgrade never re-keys a box.
    """
    problems = []
    for name, part in sorted(catalog.partitions.items()):
        if part.planned and part.maps:
            continue
        box = catalog.boxes[name]  # validated: the box exists and its type plans partitions
        hook = registry.get(box.type).plan_partition  # type: ignore[union-attr]
        assert hook is not None
        try:
            planned = hook(box, [schemas[p.stream] for p in box.inputs], part)
        except BoxError as exc:
            problems.append(Diagnostic.at(part.origin, str(exc)))
            continue
        if part.segments:
            planned = replace(planned, segments=part.segments, layout=part.layout or 1)
        catalog.partitions[name] = replace(planned, id=part.id or planned.id, origin=part.origin)
    return problems


def _dedupe(problems: list[Diagnostic]) -> list[Diagnostic]:
    seen: set[Diagnostic] = set()
    out = []
    for p in problems:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


@dataclass(frozen=True)
class CommitRetry:
    """How a commit that lost the race for a version is retried.

    Losing is normal when several submissions arrive together: each was
    planned on the same version and only one can take the next.  The loser
    catches up and re-plans at once (the race it lost is over), then, should
    it keep losing, waits a random time below a doubling bound ("full
    jitter"), so writers that collided spread out instead of colliding again
    in step.  ``attempts`` bounds the whole: with ``cap`` it bounds the wait.
    """

    attempts: int = 30
    first: float = 0.005
    cap: float = 0.25

    def delay(self, lost: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after losing ``lost`` times in a row (0 after the first loss).

        >>> CommitRetry(first=0.01, cap=0.05).delay(1), CommitRetry().delay(40) <= 0.25
        (0.0, True)
        """
        if lost <= 1:
            return 0.0
        bound = min(self.cap, self.first * 2 ** min(lost - 2, 30))
        return (rng or random).uniform(0.0, bound)


#: Enough that a burst of a few dozen concurrent submissions all get through
#: (each round of a race commits one of them); at most about 6 s of waiting.
DEFAULT_RETRY = CommitRetry()


def read_catalog(store: CatalogStore) -> Catalog:
    """The whole catalog, read from the store (one snapshot)."""
    return catalog_from_snapshot(store.snapshot())


def commits_after(store: CatalogStore, version: int, reach: int = 0) -> list[Commit] | None:
    """The log's commits after ``version``, oldest first, or None when the log cannot give
    them as an unbroken run reaching at least version ``reach`` (an entry missing or unreadable)."""
    try:
        commits = store.log(version)
    except StoreError as exc:
        log.warning("catalog log after version %d unreadable: %s", version, exc)
        return None
    versions = [c.version for c in commits]
    if versions != list(range(version + 1, version + 1 + len(commits))) or max(versions, default=version) < reach:
        return None
    return commits


def catch_up(store: CatalogStore, catalog: Catalog, read_full: Callable[[], Catalog] | None = None,
             reach: int = 0) -> Catalog:
    """``catalog`` brought to the store's current version (at least ``reach``) by applying the log's commits.

    Reading the log after a version costs what changed since, not the size
    of the catalog; only when the log cannot fill the gap is the whole
    catalog read again (``read_full``, default :func:`read_catalog`).
    """
    commits = commits_after(store, catalog.version, reach)
    if commits is None:
        return (read_full or (lambda: read_catalog(store)))()
    for commit in commits:
        catalog = apply_commit(catalog, commit)
    return catalog


def optimistic_commit(
    store: CatalogStore,
    build: Callable[[Catalog], Sequence[Change] | None],
    retry: CommitRetry = DEFAULT_RETRY,
    base: Catalog | None = None,
    read_full: Callable[[], Catalog] | None = None,
) -> tuple[Catalog, Commit] | None:
    """Commit what ``build`` makes of the current catalog, re-planning after a lost race.

    ``build`` is called with the catalog to change and returns the changes
    to commit, or None for nothing to do; it may raise to refuse (a
    submission that no longer validates against the newer catalog is a real
    conflict, and is refused that way).  ``base`` is the caller's copy of the
    catalog (a Head's, maybe a few versions behind); without it the catalog
    is read in full.  The copy is brought forward from the log
    (:func:`catch_up`), never read whole again: after a
    :class:`ConflictError`, and before a refusal or a "nothing to do" is
    believed, if the store has moved past the copy (a stale copy must not
    refuse what the current catalog allows).  Returns the catalog it was
    built on and the commit, or None when ``build`` declined; raises the
    last ``ConflictError`` after ``retry.attempts`` lost races.
    """
    read_full = read_full or (lambda: read_catalog(store))
    before = base if base is not None else read_full()
    lost = 0
    for attempt in range(1, retry.attempts + 1):
        last = attempt == retry.attempts
        try:
            changes = build(before)
        except Exception:
            if last or store.version() == before.version:
                raise  # refused on the current catalog
            before = catch_up(store, before, read_full)
            continue
        if changes is None:
            if last or store.version() == before.version:
                return None
            before = catch_up(store, before, read_full)
            continue
        try:
            return before, store.commit(before.version, changes)
        except ConflictError as exc:
            lost += 1
            log.info("commit raced another commit (attempt %d/%d): %s", attempt, retry.attempts, exc)
            if last:
                raise
            time.sleep(retry.delay(lost))
            before = catch_up(store, before, read_full, reach=exc.actual)
    raise AssertionError("unreachable: the last attempt returns or raises")


def apply_submission(
    store: CatalogStore,
    documents: Sequence[Document],
    registry: BoxTypeRegistry | None = None,
    retry: CommitRetry = DEFAULT_RETRY,
    base: Catalog | None = None,
    read_full: Callable[[], Catalog] | None = None,
    index: CatalogIndex | None = None,
    replacing: bool = False,
) -> Applied:
    """Validate against the current catalog and commit; raises ``ValidationFailed``.

    ``base`` and ``read_full`` are as for :func:`optimistic_commit`: a Head
    passes the catalog it holds, so a submission costs no full read, and
    its ``index`` (of ``base``), so the check costs what the submission
    touches (:mod:`.index`).  ``replacing``: as for :func:`plan_submission`.
    """
    registry = registry or (index.registry if index is not None else builtin_registry())
    planned: list[Plan] = []
    indexes = [index] if index is not None else []
    if has_positions(documents):  # resolved once here, not again on each optimistic retry
        log.warning("node positions (#0, #1, ...) read as the default `boreas cluster up` layout, "
                    "#n = %s+n: nothing here knows the cluster's nodes (`boreas submit` has the Head "
                    "resolve them against its nodes)", default_layout(0))
        documents = resolve_by_default_layout(documents)

    def build(before: Catalog) -> list[Change]:
        if indexes and indexes[-1].catalog is not before:  # caught up after a lost race: so does the index
            indexes.append(indexes[-1].derive(before))
        plan = plan_submission(before, documents, registry, index=indexes[-1] if indexes else None,
                               replacing=replacing)
        if not plan.ok:
            raise ValidationFailed(plan.problems)
        planned.append(plan)
        return diff(before, plan.catalog, plan.touched)

    result = optimistic_commit(store, build, retry, base, read_full)
    assert result is not None
    before, commit = result
    after = planned[-1].catalog
    after.version = commit.version
    return Applied(before, after, commit, planned[-1].changes)
