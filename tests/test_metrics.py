"""Prometheus metrics (issue 16 item 2): every component's /metrics parses, follows the naming rules,
moves when tuples flow, and shows the same numbers as /status.

Everything runs in this test's event loop (support.inprocess): a Head, two nodes, a regional and
a global component, each with its own registry.
"""

from __future__ import annotations

import asyncio

from boreas.catalog.document_model import Move
from boreas.catalog.updates import update_document
from boreas.client.publisher import Publisher
from boreas.regional.component import RegionalComponent
from boreas.regional.global_component import GlobalComponent
from boreas.wire.client import PeerClient
from boreas.wire.metrics import Families, View, new_registry
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from support.cluster import TOKEN
from support.inprocess import in_process

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(url: str) -> tuple[list, Samples]:
    """The families of ``url``/metrics, and every sample by (name, sorted labels)."""
    async with PeerClient(None) as peers:
        status, body = await peers.request("GET", f"{url}/metrics")
    assert status == 200, body
    families = list(text_string_to_metric_families(body.decode()))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}
    return families, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def check_naming(families: list) -> None:
    """Prometheus naming: the boreas_ prefix, _total counters, units in names, no unbounded labels."""
    assert families
    for family in families:
        assert family.name.startswith("boreas_"), family.name
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples), family.name
        for sample in family.samples:
            assert not {"producer", "row", "key", "value"} & set(sample.labels), sample


async def status(url: str) -> dict:
    async with PeerClient(None) as peers:
        return await peers.call("GET", f"{url}/status")


async def test_every_component_exports_its_own_metrics_and_counters_move_when_tuples_flow():
    async with in_process(nodes=2) as cluster:
        region = RegionalComponent(cluster.url, TOKEN, name="r")
        watcher = GlobalComponent(cluster.url, TOKEN)
        await region.start("localhost", 0)
        await watcher.start("localhost", 0)
        try:
            await cluster.deploy(region="r")
            entry, second = cluster.node_url(0), cluster.node_url(1)
            _, before = await scrape(entry)
            _, before_second = await scrape(second)

            async with Publisher(cluster.url, "Reading", TOKEN, batch_size=10) as publisher:
                await publisher.send([(i % 3, 20.0 + i) for i in range(25)] + [(1, -100.0), (2, "hot")])
            assert publisher.accepted == 26 and len(publisher.refused) == 1

            async def settled() -> Samples:
                for _ in range(100):
                    _, now = await scrape(second)
                    if value(now, "boreas_stream_tuples_in_total", stream="Valid") >= 25:
                        return now
                    await asyncio.sleep(0.05)
                raise AssertionError("node 1 never took the 25 valid tuples")

            after_second = await settled()
            families, after = await scrape(entry)
            check_naming(families)

            # The entry node: tuples in per stream, refused rows, the filter's batches out, the link on.
            grew = lambda name, **labels: value(after, name, **labels) - value(before, name, **labels)  # noqa: E731
            assert grew("boreas_stream_tuples_in_total", stream="Reading") == 26
            assert grew("boreas_stream_batches_in_total", stream="Reading") == 3
            assert grew("boreas_stream_refused_tuples_total", stream="Reading") == 1
            assert grew("boreas_dataflow_tuples_in_total") == 26
            assert grew("boreas_dataflow_refused_tuples_total") == 1
            # the filter's three outputs leave as one to three batches (adaptive batching joins what it produced
            # while input waited: docs/dataplane.md), each counted once out and once on the link
            out_batches = grew("boreas_box_batches_out_total", box="valid", stream="Valid")
            assert 1 <= out_batches <= 3
            assert grew("boreas_stream_tuples_routed_total", stream="Reading") == 26
            assert grew("boreas_stream_tuples_routed_total", stream="Valid") == 25  # the filter's output
            assert grew("boreas_box_batches_processed_total", box="valid") == 3
            assert grew("boreas_box_process_seconds_total", box="valid") > 0
            assert value(after, "boreas_dataflow_input_queue_batches") == 0
            assert grew("boreas_dataflow_tuples_out_total") == 25
            peer = cluster.nodes[1].endpoint
            assert grew("boreas_link_batches_sent_total", peer=peer) == out_batches
            assert value(after, "boreas_link_connected", peer=peer) == 1
            assert value(after, "boreas_link_connects_total", peer=peer) >= 1

            # The second node: the map and the m3 box, its batches and map entries.
            assert value(after_second, "boreas_dataflow_tuples_in_total") - \
                value(before_second, "boreas_dataflow_tuples_in_total") == 25
            assert value(after_second, "boreas_box_batches_out_total", box="to_fahrenheit", stream="Converted") >= 1
            assert value(after_second, "boreas_m3_batches_total", box="totals") >= 1
            assert value(after_second, "boreas_box_batches_processed_total", box="totals") >= 1  # its latency's count
            entries = {labels: v for (name, labels), v in after_second.items() if name == "boreas_m3_map_entries"}
            assert entries and max(entries.values()) == 3  # three sensors
            assert value(after_second, "boreas_box_state_entries", box="totals") == sum(entries.values())
            assert not [labels for (name, labels) in after.items()  # a filter keeps no state
                        if name == "boreas_box_state_entries" and dict(labels)["box"] == "valid"]
            assert all(dict(labels)["box"] == "totals" for labels in entries)

            # /status and /metrics are views of the same numbers.
            node_status = await status(entry)
            assert node_status["data"]["flow"]["rows_in"] == value(after, "boreas_dataflow_tuples_in_total")
            assert node_status["data"]["in"]["rows"] == value(after, "boreas_receiver_tuples_total")
            assert node_status["counters"]["updates_applied"] == value(after, "boreas_node_updates_applied_total")
            assert node_status["version"] == value(after, "boreas_catalog_version")

            # Each component's registry holds its own series only.
            info = [(s.labels["component"], s.labels["endpoint"]) for f in families for s in f.samples
                    if s.name == "boreas_component_info"]
            assert info == [("node", cluster.nodes[0].endpoint)]

            # The Head, the regional and the global component parse too, with their own figures.
            families, head = await scrape(cluster.url)
            check_naming(families)
            head_status = await status(cluster.url)
            assert value(head, "boreas_catalog_version") == head_status["version"] >= 1
            assert value(head, "boreas_head_node_in_sync", node=cluster.nodes[0].endpoint) == 1
            assert value(head, "boreas_head_node_alive", node=cluster.nodes[1].endpoint) == 1
            assert value(head, "boreas_head_submission_duration_seconds_count", outcome="committed") == 1
            # The same counter: /status came after the scrape and before the next one (nodes' heartbeats may
            # come in between, so the bounds, not an equality).
            _, head_again = await scrape(cluster.url)
            assert (value(head, "boreas_http_requests_total") + 1 <= head_status["http"]["requests"]
                    <= value(head_again, "boreas_http_requests_total") - 1)

            families, regional = await scrape(f"http://{region.endpoint}")
            check_naming(families)
            assert value(regional, "boreas_region_members") == 2
            assert value(regional, "boreas_region_reflections_total", kind="copy") >= 2
            families, watched = await scrape(f"http://{watcher.endpoint}")
            check_naming(families)
            assert value(watched, "boreas_global_ready") == 1
            assert value(watched, "boreas_catalog_version") == watcher.catalog.version >= 1
        finally:
            await watcher.close()
            await region.close()


async def test_http_requests_are_timed_by_route_pattern_never_by_the_path_typed():
    async with in_process(nodes=1) as cluster:
        async with PeerClient(TOKEN) as peers:
            await peers.request("GET", f"{cluster.node_url(0)}/query/no_such_box")
            await peers.request("GET", f"{cluster.node_url(0)}/query/another_box/maps")
            await peers.request("GET", f"{cluster.node_url(0)}/not/a/route/12345")
            await peers.request("GET", f"{cluster.node_url(0)}/status")
        _, samples = await scrape(cluster.node_url(0))
    count = "boreas_http_request_duration_seconds_count"
    assert value(samples, count, method="GET", route="/query/{box}", status="404") == 1
    assert value(samples, count, method="GET", route="/query/{box}/maps", status="404") == 1
    assert value(samples, count, method="GET", route="unmatched", status="404") == 1
    assert value(samples, count, method="GET", route="/status", status="200") == 1
    routes = {dict(labels)["route"] for name, labels in samples if name == count}
    assert not any("no_such_box" in r or "12345" in r for r in routes)


async def test_a_move_counts_on_both_nodes_and_is_timed_where_it_was_asked_and_learned():
    async with in_process(nodes=2) as cluster:
        await cluster.deploy()
        source, target = cluster.nodes
        async with PeerClient(TOKEN) as peers:
            await peers.post_update(source.endpoint, update_document([Move(target.endpoint, box="valid")]),
                                    timeout=30.0)
        for _ in range(100):
            if cluster.head.catalog.boxes["valid"].node == target.endpoint:
                break
            await asyncio.sleep(0.05)
        _, at_target = await scrape(cluster.node_url(1))
        assert value(at_target, "boreas_box_move_pause_seconds_count") == 0  # its pause ends with its next batch
        async with Publisher(cluster.url, "Reading", TOKEN) as publisher:
            await publisher.send([(1, 20.0)])
        for _ in range(100):
            _, at_target = await scrape(cluster.node_url(1))
            if value(at_target, "boreas_box_move_pause_seconds_count") == 1:
                break
            await asyncio.sleep(0.05)
        _, at_source = await scrape(cluster.node_url(0))
        _, head = await scrape(cluster.url)
    assert value(at_source, "boreas_node_box_moves_total", direction="out") == 1
    assert value(at_target, "boreas_node_box_moves_total", direction="in") == 1
    assert value(at_source, "boreas_node_topology_change_duration_seconds_count", kind="move", outcome="done") == 1
    assert value(head, "boreas_head_learn_duration_seconds_count", kind="move") == 1
    assert value(at_target, "boreas_box_move_pause_seconds_count") == 1
    assert value(at_target, "boreas_box_move_pause_seconds_sum") > 0
    assert value(at_target, "boreas_box_batches_out_total", box="valid", stream="Valid") == 1


async def test_a_durable_node_exports_its_recovery_and_snapshot_figures(tmp_path):
    async with in_process() as cluster:
        await cluster.start_node(data_dir=tmp_path / "n0")
        await cluster.start_node()
        await cluster.deploy()
        async with PeerClient(TOKEN) as peers:
            taken = await peers.call("POST", f"{cluster.url}/snapshots")
        assert taken["complete"], taken
        # the node cuts its log when it hears the snapshot is complete (after the Head's answer): read both
        # figures after that, or the scrape sees the log before the cut and /status after it
        for _ in range(200):
            if (await status(cluster.node_url(0)))["recovery"]["completed_snapshot"] == taken["id"]:
                break
            await asyncio.sleep(0.05)
        families, durable = await scrape(cluster.node_url(0))
        check_naming(families)
        _, plain = await scrape(cluster.node_url(1))
        _, head = await scrape(cluster.url)
        recovery = (await status(cluster.node_url(0)))["recovery"]
    assert value(durable, "boreas_node_durable") == 1 and value(plain, "boreas_node_durable") == 0
    assert value(durable, "boreas_recovery_state", state="ready") == 1
    assert value(durable, "boreas_recovery_state", state="recovering") == 0
    assert value(durable, "boreas_snapshot_pause_seconds_count") == 1
    assert value(durable, "boreas_snapshots_written_total") == recovery["snapshots"] == 1
    assert value(durable, "boreas_snapshot_last_id") == recovery["last_snapshot"] == taken["id"]
    assert value(durable, "boreas_input_log_size_bytes") == recovery["log"]["size_bytes"]
    assert value(head, "boreas_snapshot_completed_id") == taken["id"]
    assert value(head, "boreas_snapshot_last_attempt_complete") == 1


async def test_an_invalid_submission_is_timed_as_invalid():
    async with in_process() as cluster:
        async with PeerClient(TOKEN) as peers:
            from boreas.client.head_api import submit_documents
            from boreas.wire.client import PeerRefused

            try:
                await submit_documents(peers, cluster.url, [("bad.xml", b"<borealis><box name='x'/></borealis>")])
            except PeerRefused as exc:
                assert exc.status == 422
            else:
                raise AssertionError("an invalid submission was taken")
        _, head = await scrape(cluster.url)
    assert value(head, "boreas_head_submission_duration_seconds_count", outcome="invalid") == 1
    assert value(head, "boreas_head_submission_duration_seconds_count", outcome="committed") == 0


def test_a_broken_view_loses_only_its_own_samples(caplog):
    registry = new_registry()
    registry.register(View(lambda f: f.counter("boreas_fine_total", "Fine.", 2)))

    def broken(f: Families) -> None:
        f.gauge("boreas_half", "Half.", 1)
        raise KeyError("gone")

    registry.register(View(broken))
    text = generate_latest(registry).decode()
    assert "boreas_fine_total 2.0" in text and "boreas_half" not in text
    assert "metrics view failed" in caplog.text


def test_the_doctests_of_the_metrics_module():
    import doctest

    import boreas.wire.metrics

    result = doctest.testmod(boreas.wire.metrics)
    assert result.attempted and not result.failed
