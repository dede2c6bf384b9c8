"""The ``boreas`` command's first-hour experience while it works: ``publish``, ``query`` and ``watch``.

What a user sees (issue 15): ``publish --progress`` and Ctrl-C (exit 130,
saying how far it got), a misspelt map named with the maps there are,
``boreas watch`` lines that say what changed, and on a real cluster
refusals, watch, ``--json`` and query in plain words (exit 1 for a failed
operation).  The parser, input files and output are in test_cli_ux.py.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from boreas.catalog.document_model import Delete, Modify, Move, Unsubscribe
from boreas.catalog.model import Box, Catalog, GlobalComponent, InPort, Node, Region, Subscription
from boreas.cli import catalog_text, m3, progress
from boreas.cli.main import main
from boreas.client.query import QueryFailed
from support.cli_run import NOWHERE, boreas, closed_stdout, one_error_line


# -- publish: progress, Ctrl-C ------------------------------------------------------------


class FakePublisher:
    """Stands in for the network (rows count as taken when sent)."""

    def __init__(self, head, stream, token, batch_size=1000, producer=None):
        from boreas.catalog.model import Field, FieldType, Schema

        self.schema = Schema("T", (Field("sensor", FieldType.INT), Field("celsius", FieldType.DOUBLE)))
        self.fields, self.producer = ["sensor", "celsius"], producer
        self.accepted, self.refused, self.refused_count, self.duplicates = 0, [], 0, 0

    async def locate(self):  # (the schema, asked of the Head before the batches are sized: given here)
        pass

    async def start(self):
        pass

    async def send(self, rows):
        self.accepted += len(rows)  # a list of rows, or a pyarrow batch

    async def close(self, final=False):  # (final: boreas publish --final)
        self.final = final

    async def abort(self):  # (a publish that fails before sending closes its links)
        pass


def test_publish_progress_only_when_asked_or_on_a_terminal(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("boreas.client.publisher.Publisher", FakePublisher)  # (cmd_publish imports it when it runs)
    csv = tmp_path / "r.csv"
    csv.write_text("sensor,celsius\n" + "".join(f"{n},{n}.5\n" for n in range(40)))
    assert main(["publish", "Reading", "--file", str(csv), "--head", NOWHERE]) == 0
    out, err = capsys.readouterr()
    assert out == "published 40 rows to Reading\n" and err == ""  # stderr is not a terminal here
    assert main(["publish", "Reading", "--file", str(csv), "--head", NOWHERE, "--progress"]) == 0
    out, err = capsys.readouterr()
    assert out == "published 40 rows to Reading\n"
    assert err.startswith("publishing to Reading: 40/40 rows (100%), ") and err.endswith(" rows/s\n"), err
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text("".join(json.dumps({"sensor": n, "celsius": 1.0}) + "\n" for n in range(7)))
    assert main(["publish", "Reading", "--file", str(jsonl), "--head", NOWHERE, "--progress"]) == 0
    assert capsys.readouterr().err.startswith("publishing to Reading: 7/7 rows (100%)")


def test_the_progress_line():
    line = progress.Progress("Reading", 100_000, tty=False).line(12_000, 4.0)
    assert line == "publishing to Reading: 12,000/100,000 rows (12%), 3,000 rows/s, ETA 29 s"


class _FakeHead(http.server.BaseHTTPRequestHandler):
    """Says the stream enters at a node that is not there: a publish then waits for it."""

    asked = threading.Event()
    entry = "localhost:1"

    def do_GET(self):  # noqa: N802 (http.server's name)
        body = json.dumps({"stream": "Reading", "input": True, "entries": [self.entry], "producer": None,
                           "schema": {"name": "T", "fields": [["sensor", "int", None]]}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        _FakeHead.asked.set()

    def log_message(self, *args):
        pass


def test_ctrl_c_during_publish_says_how_far_it_got_and_exits_130(tmp_path):
    server = http.server.ThreadingHTTPServer(("localhost", 0), _FakeHead)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _FakeHead.asked.clear()
    csv = tmp_path / "r.csv"
    csv.write_text("sensor\n" + "".join(f"{n}\n" for n in range(200)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOREAS_")}
    proc = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "publish", "Reading", "--file", str(csv),
                             "--batch-size", "1", "--head", f"http://localhost:{server.server_port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            # as in a terminal: a shell that runs this suite in the background ignores SIGINT,
                            # and a child inherits that (Python then never turns Ctrl-C into an interrupt)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert _FakeHead.asked.wait(30), "publish never asked the Head"
        time.sleep(1.0)  # it is now waiting for the node to take the batches
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        server.shutdown()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and out == ""
    assert err.strip().splitlines()[-1] == (
        f"interrupted: Reading took 0 rows of {csv} so far; run the same command again to publish the rest "
        "(what was taken is skipped)")


# -- query: a misspelt map ---------------------------------------------------------------


class FakeQueryClient:
    """The q3 box's maps as a node describes them; a read names its map and keys."""

    reads: list = []

    def __init__(self, head, token=None):
        pass

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        pass

    async def maps(self, box):
        if box == "by_region":  # a view keyed by a string: any word could be its key
            return {"box": box, "default": "Totals", "streams": {"Totals": "by_region"},
                    "views": {"by_region": {"keys": [["region", "VARCHAR"]], "values": ["total"]}},
                    "maps": {"by_region_total": {}, "by_region_count": {}}}
        int_key = [["l_orderkey", "INT"], ["o_orderdate", "DATE"], ["o_shippriority", "INT"]]
        return {"box": box, "default": "Revenue", "streams": {"Revenue": "Q1"},
                "views": {"Q1": {"keys": int_key, "values": ["revenue"]}},
                "maps": {"Q1_revenue": {}, "m1": {}, "m2": {}}}

    async def query(self, box, map_name, keys, agg, stable):
        FakeQueryClient.reads.append((map_name, keys))
        if box == "q3" and keys and keys[0] is not None and not str(keys[0]).isdigit():
            raise QueryFailed(f"key 0 (l_orderkey INT): {keys[0]!r} is not an INT", 422)

        from boreas.client.query import QueryResult

        keys = (("l_orderkey", "INT"), ("o_orderdate", "DATE"), ("o_shippriority", "INT"))
        return QueryResult(box, "localhost:15000", map_name or "Revenue", 1, agg, keys, [((7, "1995-03-01", 0), 1.5)])


def test_query_names_a_misspelt_map_and_lists_the_maps(monkeypatch, capsys):
    monkeypatch.setattr(m3, "QueryClient", FakeQueryClient)
    FakeQueryClient.reads = []
    assert main(["query", "q3", "Revnue", "--head", NOWHERE]) == 1
    assert capsys.readouterr().err == ("error: box 'q3' has no map, view or out stream 'Revnue' (did you mean "
                                       "'Revenue'?); out streams: Revenue; views: Q1; maps: Q1_revenue, m1, m2\n")
    assert FakeQueryClient.reads == []  # refused before reading
    assert main(["query", "q3", "Revenue", "7", "--head", NOWHERE]) == 0
    assert main(["query", "q3", "7", "_", "--head", NOWHERE]) == 0
    assert FakeQueryClient.reads == [("Revenue", ["7"]), (None, ["7", None])]


def test_query_says_a_first_word_that_is_no_map_is_not_one_when_the_keys_are_strings(monkeypatch, capsys):
    monkeypatch.setattr(m3, "QueryClient", FakeQueryClient)
    FakeQueryClient.reads = []
    listing = "out streams: Totals; views: by_region; maps: by_region_total, by_region_count"
    # two words for a view with one key column: the first named a map, and the box has none of that name
    assert main(["query", "by_region", "nosuchmap", "west", "--head", NOWHERE]) == 1
    assert capsys.readouterr().err == f"error: box 'by_region' has no map, view or out stream 'nosuchmap'; {listing}\n"
    # a misspelt name is not read as a region
    assert main(["query", "by_region", "by_regon", "--head", NOWHERE]) == 1
    assert capsys.readouterr().err == ("error: box 'by_region' has no map, view or out stream 'by_regon' (did you "
                                       f"mean 'by_region'?); {listing}\n")
    assert FakeQueryClient.reads == []  # refused before reading
    assert main(["query", "by_region", "west", "--head", NOWHERE]) == 0  # a region
    assert main(["query", "by_region", "by_region_total", "west", "--head", NOWHERE]) == 0
    assert FakeQueryClient.reads == [(None, ["west"]), ("by_region_total", ["west"])]


def test_query_prints_a_table_naming_the_key_and_value_columns_and_json_lines_with_json():
    import datetime as dt

    from boreas.client.query import QueryResult

    described = {"default": "Revenue", "streams": {"Revenue": "Q1"}, "maps": {"Q1_revenue": {}},
                 "views": {"Q1": {"keys": [["l_orderkey", "INT"], ["o_orderdate", "DATE"],
                                           ["o_shippriority", "INT"]], "values": ["revenue"]}}}
    keys = (("l_orderkey", "INT"), ("o_orderdate", "DATE"), ("o_shippriority", "INT"))
    rows = [((7, dt.date(1995, 3, 1), 0), 1.5), ((1234, dt.date(1995, 3, 2), 0), 20000.25)]
    read = QueryResult("q3", "localhost:15001", "Revenue", 3, "slice", keys, rows)
    assert m3.table_lines(read, described) == [
        "l_orderkey  o_orderdate  o_shippriority   revenue",
        "         7  1995-03-01                0       1.5",
        "      1234  1995-03-02                0  20000.25"]
    assert m3.json_lines(read) == [{"key": [7, dt.date(1995, 3, 1), 0], "value": 1.5},
                                   {"key": [1234, dt.date(1995, 3, 2), 0], "value": 20000.25}]  # as before
    total = QueryResult("q3", "localhost:15001", "Revenue", 3, "sum", keys, [((None, None, None), 20001.75)],
                        epoch=4, age=0.25)
    assert m3.table_lines(total, described) == [
        "stable epoch 4, ended 0.250 s ago",
        "l_orderkey  o_orderdate  o_shippriority  sum(revenue)",
        "         _            _               _      20001.75"]
    nothing = QueryResult("q3", "localhost:15001", "Q1_revenue", 3, "slice", keys, [])
    assert m3.table_lines(nothing, described) == ["l_orderkey  o_orderdate  o_shippriority  Q1_revenue",
                                                  "(no rows)"]


# -- a taken port ---------------------------------------------------------------------------


def test_a_taken_port_is_one_line_and_exit_1_for_every_server():
    import socket

    with socket.socket() as taken:
        taken.bind(("localhost", 0))
        taken.listen()
        address = f"localhost:{taken.getsockname()[1]}"
        for args in [("head", "--listen", address, "--catalog", "memory://"), ("node", "--endpoint", address),
                     ("region", "--endpoint", address, "--head", NOWHERE)]:
            result = boreas(*args, "--token", "t")
            assert result.returncode == 1, (args, result.stderr)
            assert one_error_line(result) == (f"error: cannot listen on {address}: the port is in use (another "
                                              "process listens on it: stop it or pick another port)"), args


# -- watch: what changed ---------------------------------------------------------------


def _box(node: str | None, **params: str) -> Box:
    return Box("valid", "filter", (InPort("Reading"),), ("Valid",), tuple(params.items()), node=node)


def test_watch_lines_say_what_changed_in_the_same_words_both_ways():
    before = Catalog(boxes={"valid": _box("localhost:15000", **{"expression.0": "celsius > 0"})},
                     subscriptions={"Average|localhost:25000": Subscription("Average", "localhost:25000")},
                     regions={"localhost:30000|localhost:15000": Region("localhost:30000", "localhost:15000",
                                                                        "localhost:30000")},
                     globals={"localhost:40000": GlobalComponent("localhost:40000")},
                     nodes={"localhost:15000": Node("localhost:15000")})
    say = lambda item: catalog_text.describe_change(item, before)  # noqa: E731
    # a box moved or modified is a change (~), not a box added (+)
    assert say(_box("localhost:15001", **{"expression.0": "celsius > 0"})) == \
        "~ box valid (filter): moved from localhost:15000 to localhost:15001"
    assert say(_box("localhost:15000", **{"expression.0": "celsius > 5"})) == \
        "~ box valid (filter): expression.0='celsius > 5' (was 'celsius > 0')"
    assert say(Modify((("expression.0", "celsius > 9"),), box="valid")) == \
        "~ box valid (filter): expression.0='celsius > 9' (was 'celsius > 0')"
    assert say(Move("localhost:15002", box="valid")) == "~ box valid: moved from localhost:15000 to localhost:15002"
    # a region that registers its component: no "includes None"
    assert say(Region("west", "", "localhost:30001", "west")) == "+ region west: regional component at localhost:30001"
    assert say(Region("localhost:30002", "", "localhost:30002")) == \
        "+ region localhost:30002: regional component registered"
    assert say(Region("localhost:30000", "localhost:15001", "localhost:30000")) == \
        "+ region localhost:30000 includes localhost:15001"
    assert say(Delete(region="localhost:30000|localhost:15000")) == "- region localhost:30000 includes localhost:15000"
    # the same word whether it comes or goes
    assert say(Subscription("Average", "localhost:25001")) == "+ subscribe Average -> localhost:25001"
    assert say(Unsubscribe("Average", "localhost:25000")) == "- subscribe Average -> localhost:25000"
    assert say(GlobalComponent("localhost:40001")) == "+ global localhost:40001"
    assert say(Delete(global_="localhost:40000")) == "- global localhost:40000"
    assert say(Node("localhost:15009")) == "+ node localhost:15009"
    assert say(Delete(node="localhost:15000")) == "- node localhost:15000"
    assert say(Delete(box="valid")) == "- box valid (filter) on localhost:15000"


# -- a real cluster ------------------------------------------------------------------------


@pytest.mark.slow
def test_on_a_cluster_refusals_watch_json_and_query_speak_plainly(cluster_factory):
    from support.cluster import EXAMPLES as CLUSTER_EXAMPLES
    from support.cluster import wait_until

    cluster = cluster_factory()
    nodes, ports = cluster.three_nodes()

    # nodes that run nothing yet say so, not "not in catalog"
    listed = cluster.boreas("nodes")
    assert listed.returncode == 0, listed.stderr
    rows = [line for line in listed.stdout.splitlines() if line.startswith(tuple(nodes))]
    assert len(rows) == 3 and all(row.endswith("no boxes") for row in rows), listed.stdout
    assert "not in catalog" not in listed.stdout

    # watch's first screen: the catalog is empty, but three nodes are up
    once = cluster.boreas("watch", "--once")
    assert once.returncode == 0, once.stderr
    assert f"nodes up: 3 ({', '.join(sorted(nodes))})" in once.stdout and "0 nodes in the deployment" in once.stdout
    code, err = closed_stdout("watch", "--once", env=cluster.env)  # | head: it used to hang
    assert code == 0 and "Traceback" not in err

    watch = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "watch"], env=cluster.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        # the watch's first screen (its full copy) before any change: a watch that
        # registers after the move sees the moved box in its copy, not the move
        while not any(line.startswith("== catalog version") for line in lines):
            line = watch.stdout.readline()
            assert line, watch.stderr.read()
            lines.append(line.rstrip("\n"))
        cluster.submit(CLUSTER_EXAMPLES / "sensor_chain.xml", cluster.example("sensor_chain_deploy.xml", ports))
        moved = cluster.boreas("move", "valid", nodes[2])
        assert moved.returncode == 0, moved.stderr
        region = cluster.start_region("west")
        while not any("+ region west" in line for line in lines):
            line = watch.stdout.readline()
            assert line, watch.stderr.read()
            lines.append(line.rstrip("\n"))
    finally:
        watch.send_signal(signal.SIGINT)
        watch.communicate(timeout=30)
    assert f"  ~ box valid (filter): moved from {nodes[0]} to {nodes[2]}" in lines
    assert f"  + region west: regional component at {region}" in lines
    assert f"region west listening on {region}" in cluster.log(f"region-{region}")  # it used to say nothing
    assert not any("None" in line for line in lines)
    assert f"  + box valid (filter) on {nodes[2]}" not in lines  # a move is not an addition

    # --json
    result = cluster.boreas("nodes", "--json")
    assert result.returncode == 0, result.stderr
    assert sorted(row["endpoint"] for row in json.loads(result.stdout)["nodes"] if row["alive"]) == sorted(nodes)
    result = cluster.boreas("catalog", "show", "--head", cluster.head, "--json")
    shown = json.loads(result.stdout)
    assert shown["boxes"]["valid"]["node"] == nodes[2] and sorted(shown["nodes_up"]) == sorted(nodes)

    # a wrong or missing token: one line at once, not a 30 s wait and a TimeoutError traceback
    csv = cluster.write("r.csv", "sensor,time,celsius\n1,1,20.5\n")
    for env, reason in [({"BOREAS_TOKEN": "another-clusters-token"}, "wrong cluster token (another cluster's?)"),
                        ({"BOREAS_TOKEN": ""}, "no cluster token was sent")]:
        result = cluster.boreas("publish", "Reading", "--file", csv, env=env, timeout=20)
        assert result.returncode == 1
        assert one_error_line(result) == (f"error: {nodes[0]} refused the data connection (401): {reason}; "
                                          "pass this cluster's token with --token or $BOREAS_TOKEN")
        result = cluster.boreas("subscribe", "Average", env=env, timeout=20)
        assert result.returncode == 1 and "(401)" in one_error_line(result)

    # subscribe | head: ends when the reader has gone
    sub = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "subscribe", "Average"], env=cluster.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        sub.stdout.close()
        wait_until(lambda: any(s.stream == "Average" and s.endpoint != "localhost:25000"
                               for s in cluster.head_catalog().subscriptions.values()), what="the subscription")
        rows = "".join(f"1,{t},{t % 30}.5\n" for t in range(0, 200))
        assert cluster.boreas("publish", "Reading", "--file",
                              cluster.write("more.csv", "sensor,time,celsius\n" + rows)).returncode == 0
        assert sub.wait(timeout=30) == 0
        assert "Traceback" not in sub.stderr.read()
    finally:
        if sub.poll() is None:
            sub.kill()

    # a stream or box that is not there: the closest names
    result = cluster.boreas("publish", "Readng", "--file", csv)
    assert result.returncode == 1
    assert one_error_line(result).endswith("(did you mean 'Reading'?)")
    result = cluster.boreas("subscribe", "Averag")
    assert result.returncode == 1
    assert one_error_line(result).endswith("(did you mean 'Average'?)")
    result = cluster.boreas("query", "vald")
    assert result.returncode == 1
    assert one_error_line(result).endswith("(did you mean 'valid'?)")

    # a misspelt map name, end to end
    cluster.submit(CLUSTER_EXAMPLES / "tpch_q3.xml", cluster.example("tpch_q3_deploy.xml", ports))
    result = cluster.boreas("query", "q3", "Revnue")
    assert result.returncode == 1
    line = one_error_line(result)
    assert line.startswith("error: box 'q3' has no map, view or out stream 'Revnue' (did you mean 'Revenue'?); "
                           "out streams: Revenue; views: Q1; maps: Q1_revenue"), line
    # the keys named by their columns
    result = cluster.boreas("query", "q3")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["l_orderkey", "o_orderdate", "o_shippriority", "revenue", "(no", "rows)"]
