"""Benchmark: validate and commit a 1,000-box, 2,000-stream application over 20 nodes.

For each store it prints the time of each phase (read = hardened parse +
XSD + decode, plan = merge + whole-topology validation, commit = diff +
store commit, reload = snapshot + decode) and, as the peer measured in the
same run, the time the same store takes to write the same elements with no
parsing or validation at all.  The ratio says what the catalog's checking
costs over bare storage.  Targets (issue 2): under 1 s embedded, under 3 s
ZooKeeper, for validate + commit.

Usage: .venv/bin/python bench/catalog.py [--boxes 1000] [--nodes 20] [--no-zookeeper]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from boreas.catalog import Catalog, Change, apply_submission, catalog_from_snapshot, open_store, read_document
from boreas.catalog.elements import to_elements
from boreas.catalog.expressions import parse_expression
from boreas.catalog.submission import plan_submission


def generate(boxes: int, nodes: int) -> tuple[str, str]:
    """Chains of filters, one chain per node; each filter has a true and a false out stream."""
    return generate_parts(boxes, nodes, 1)[0]


def generate_parts(boxes: int, nodes: int, parts: int) -> list[tuple[str, str]]:
    """:func:`generate`'s catalog as ``parts`` submissions of about equal size, to be submitted in order.

    Part ``k`` holds boxes with consecutive numbers (each reads a stream of an earlier box, in this part or
    an earlier one) and places them; the first also declares the schema and the inputs, the last the
    outputs.  A catalog over the Head's request cap (16 MiB: about 70,000 boxes) is deployed this way.

    >>> [len(app.split("<box ")) - 1 for app, _ in generate_parts(10, 2, 3)]
    [3, 3, 4]
    """
    chains = nodes
    bounds = [boxes * k // parts for k in range(parts + 1)]
    result = []
    for k in range(parts):
        app = ['<?xml version="1.0"?>', "<borealis>"]
        if k == 0:
            app.append('<schema name="Reading"><field name="sensor" type="int"/><field name="time" type="long"/>'
                       '<field name="value" type="double"/><field name="tag" type="string" size="16"/></schema>')
            app += [f'<input stream="in{c}" schema="Reading"/>' for c in range(chains)]
        placement: dict[int, list[str]] = {c: [] for c in range(chains)}
        for i in range(bounds[k], bounds[k + 1]):
            c = i % chains
            upstream = f"in{c}" if i < chains else f"b{i - chains}_t"
            app.append(
                f'<box name="b{i}" type="filter"><in stream="{upstream}"/>'
                f'<out stream="b{i}_t"/><out stream="b{i}_f"/>'
                f'<parameter name="expression.0" value="value &gt; {i % 97}.5 and sensor &lt;&gt; {i}"/>'
                f'<parameter name="pass-on-false-port" value="1"/></box>'
            )
            placement[c].append(f"b{i}")
        if k == parts - 1:
            app += [f'<output stream="b{i}_t" schema="Reading"/>' for i in range(boxes - chains, boxes)]
        app.append("</borealis>")
        dep = ['<?xml version="1.0"?>', "<deploy>"]
        for c in range(chains):
            if placement[c]:
                dep.append(f'<node endpoint="node{c}:15000" query="{" ".join(placement[c])}"/>')
            if k == 0:
                dep.append(f'<publish stream="in{c}" node="node{c}:15000"/>')
        dep.append("</deploy>")
        result.append(("\n".join(app), "\n".join(dep)))
    return result


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def run(url: str, app: str, dep: str) -> dict[str, float]:
    parse_expression.cache_clear()
    (docs, t_read) = timed(lambda: [read_document(app, "bench.xml"), read_document(dep, "bench_deploy.xml")])
    with open_store(url) as store:
        (applied, t_apply) = timed(lambda: apply_submission(store, docs))
        (catalog, t_reload) = timed(lambda: catalog_from_snapshot(store.snapshot()))
        assert catalog == applied.after
    # Breakdown, measured again from cold: how much of apply is validation.
    parse_expression.cache_clear()
    (plan, t_plan) = timed(lambda: plan_submission(Catalog(), docs))
    elements = to_elements(plan.catalog)
    with open_store(url.replace("bench-main", "bench-peer")) as peer:
        changes = [Change(kind, key, text) for (kind, key), text in elements.items()]
        (_, t_peer) = timed(lambda: peer.commit(0, changes))
    return {"read": t_read, "plan": t_plan, "commit": max(t_apply - t_plan, 0.0), "reload": t_reload,
            "total": t_read + t_apply, "peer": t_peer, "elements": len(elements),
            "streams": len(plan.catalog.producers())}


def report(name: str, target: float, r: dict[str, float]) -> None:
    verdict = "meets" if r["total"] < target else "MISSES"
    print(f"{name:10s} validate+commit {r['total']:.3f} s ({verdict} target {target:.0f} s)  "
          f"[read {r['read']:.3f}, plan {r['plan']:.3f}, commit {r['commit']:.3f}; reload {r['reload']:.3f}]  "
          f"peer: bare commit of the same {r['elements']} elements {r['peer']:.3f} s "
          f"-> ratio {r['total'] / r['peer']:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boxes", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--no-zookeeper", action="store_true")
    args = parser.parse_args()
    app, dep = generate(args.boxes, args.nodes)
    print(f"application: {args.boxes} boxes over {args.nodes} nodes, {len(app) + len(dep):,} bytes of XML")
    with tempfile.TemporaryDirectory() as tmp:
        r = run(f"sqlite:///{tmp}/bench-main.db", app, dep)
        print(f"{r['streams']} streams")
        report("embedded", 1.0, r)
        if not args.no_zookeeper:
            from boreas.catalog.store.zkserver import LocalZooKeeper

            with LocalZooKeeper(Path(tmp) / "zk") as zk:
                chroot = uuid.uuid4().hex[:8]
                report("zookeeper", 3.0, run(f"zk://{zk.address}/{chroot}-bench-main", app, dep))


if __name__ == "__main__":
    main()
