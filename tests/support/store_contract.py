"""Helpers of the catalog store contract tests: changes, a watch callback that queues, a benchmark-sized catalog.

Shared by :mod:`test_store_contract` (what one client commits, reads and is
delivered, where nodes join membership) and :mod:`test_store_contract_failures` (other clients, races,
closed or unreachable stores, request limits).
"""

from __future__ import annotations

import queue

import pytest

from boreas.catalog.store import Change, Commit

WAIT = 20.0  # generous upper bound for a watch delivery; only hit on failure


def put(kind: str, key: str, text: str) -> Change:
    return Change(kind, key, text)


def delete(kind: str, key: str) -> Change:
    return Change(kind, key, None)


class Collector:
    """A watch callback that queues what it is given."""

    def __init__(self) -> None:
        self.q: queue.Queue[Commit] = queue.Queue()

    def __call__(self, commit: Commit) -> None:
        self.q.put(commit)

    def next(self) -> Commit:
        try:
            return self.q.get(timeout=WAIT)
        except queue.Empty:
            pytest.fail("watch delivered nothing")

    def versions(self, n: int) -> list[int]:
        return [self.next().version for _ in range(n)]


def benchmark_elements(n: int = 3000) -> dict[tuple[str, str], str]:
    """n box elements of ~300 bytes each: the size of the benchmark's catalog."""
    return {
        ("box", f"box-{i:05d}"): f"<box name='box-{i:05d}' type='filter'>"
        + f"<in stream='s{i % 97}'/><out stream='o{i}'/>".ljust(240, " ")
        + "</box>"
        for i in range(n)
    }


def seen_by_another(membership_url: str, endpoint: str) -> tuple[bool, bool]:
    """Join membership at ``membership_url`` as ``endpoint``; whether a second client (the Head's)
    lists it while joined, and whether it still lists it once the node closed (its session ended)."""
    from boreas.catalog.store.membership import ZooKeeperMembers

    head = ZooKeeperMembers(membership_url)
    try:
        node = ZooKeeperMembers(membership_url)
        try:
            node.join(endpoint, b"{}")
            while_joined = endpoint in head.members()
        finally:
            node.close()
        return while_joined, endpoint in head.members()
    finally:
        head.close()
