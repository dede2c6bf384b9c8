"""Benchmark: what a small commit costs the ZooKeeper store as the catalog grows (issue 37 item 5).

A commit is one multi-op of the changed elements and a log entry
(tests/test_zk_commit_writes.py checks that against ZooKeeper's own
record); this measures its cost in the client, CPU and wall, at several
catalog sizes.  The catalog is ``--sizes`` schema elements committed through
the store API (no check: only the store is measured), read by a second
store as a Head's is (so it keeps the element names and writes whole copies
when due), then ``--commits`` one-element commits through it, with a whole
copy due every ``--copy-every`` commits (the store's own threshold is 1,000
commits or 5,000 changes).  Printed per size: the median and the slowest
commit, CPU and wall.

To compare with another version of the store, run this file with that
version's package first on the path (docs/benchmarks.md says how it was done).

Usage: .venv/bin/python bench/zk_commit.py [--sizes 1000,100000] [--commits 40] [--copy-every 10]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

from boreas.catalog.store import Change, open_store
from boreas.catalog.store import zk_snapshot
from boreas.catalog.store.zkserver import LocalZooKeeper

BATCH = 10_000  # elements per building commit (under the test server's 16 MB requests)


def schema(n: int, field: str = "x") -> str:
    return (f'<schema name="S{n}"><field name="sensor" type="int"/><field name="time" type="long"/>'
            f'<field name="{field}" type="double"/><field name="tag" type="string" size="16"/></schema>')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--copy-every", type=int, default=10)
    args = parser.parse_args()
    zk_snapshot.EVERY_COMMITS = args.copy_every
    with LocalZooKeeper() as zk:
        for size in map(int, args.sizes.split(",")):
            url = f"zk://{zk.address}/commits-{uuid.uuid4().hex[:8]}"
            with open_store(url) as builder:
                version = builder.snapshot().version  # (so it writes whole copies as it commits, as a Head's does)
                for start in range(0, size, BATCH):
                    version = builder.commit(version, [Change("schema", f"S{n}", schema(n))
                                                       for n in range(start, min(size, start + BATCH))]).version
            run(url, size, args.commits)


def run(url: str, size: int, count: int) -> None:
    with open_store(url) as store:
        version = store.snapshot().version
        cpu, wall = [], []
        for k in range(count):
            c, w = time.process_time(), time.perf_counter()
            version = store.commit(version, [Change("schema", f"S{k}", schema(k, f"v{version}"))]).version
            cpu.append(time.process_time() - c)
            wall.append(time.perf_counter() - w)
    print(f"{size:>7,} elements: one-element commit median {statistics.median(cpu) * 1000:.1f} ms "
          f"CPU, {statistics.median(wall) * 1000:.1f} ms wall; slowest {max(cpu) * 1000:.0f} ms CPU, "
          f"{max(wall) * 1000:.0f} ms wall (load average {load()})", flush=True)


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


if __name__ == "__main__":
    main()
