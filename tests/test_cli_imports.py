"""The light commands stay light: parsing them imports none of the heavy libraries.

Each command is parsed in a fresh interpreter (what ``boreas CMD ...`` does
before it runs), which then lists the heavy modules it has loaded.  A module
that imports sqlglot, xmlschema, aiohttp, pyarrow, pandas or lxml at its top,
on the path of one of these commands, fails this test: every such import
costs the user tenths of a second on every call (docs/architecture.md, "The
control plane's reads and imports").  No timing is asserted, only what is imported.
"""

from __future__ import annotations

import json
import subprocess
import sys

#: Imported only where used: never by building the parser or parsing a light command's arguments.
HEAVY = ("sqlglot", "xmlschema", "aiohttp", "pyarrow", "pandas", "lxml", "boreas.m3.compiler")

#: The commands people and optimizers run all day, with arguments that parse.
LIGHT = {
    "--help": [],  # (the top-level parser alone: what `boreas --help` builds)
    "move": ["move", "b1", "localhost:15001"],
    "connect": ["connect", "b1", "--box", "filter.xml"],
    "disconnect": ["disconnect", "b1_filter"],
    "nodes": ["nodes"],
    "submit": ["submit", "app.xml", "deploy.xml"],
    "watch": ["watch"],
    "snapshot": ["snapshot"],
    "drop": ["drop", "q1"],
    "publish": ["publish", "in1", "--file", "rows.csv"],
    "subscribe": ["subscribe", "out1"],
    "validate": ["validate", "app.xml"],
    "catalog": ["catalog", "show"],
}

PROBE = """
import json, sys
from boreas.cli.main import _command_of, build_parser
argv = json.loads(sys.argv[1])
command = _command_of(argv)
parser = build_parser(only=[command] if command else [])
if argv:
    parser.parse_args(argv)
print(json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)))
"""


def test_light_commands_import_no_heavy_module() -> None:
    loaded = probed(LIGHT, HEAVY)
    assert {name: mods for name, mods in loaded.items() if mods} == {}


def probed(commands: dict[str, list[str]], heavy: list[str]) -> dict[str, list[str]]:
    """For each command (its argv), which of ``heavy`` its parse loaded: one interpreter per command, all at
    once (each must start clean: one command's imports would hide another's)."""
    procs = {name: subprocess.Popen([sys.executable, "-c", PROBE, json.dumps(argv), json.dumps(heavy)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, argv in commands.items()}
    loaded = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"boreas {name}: the probe failed:\n{err}"
        loaded[name] = json.loads(out)
    return loaded


def test_the_probe_sees_a_heavy_import() -> None:
    """The check above would notice: a command whose module imports the M3 compiler shows up."""
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(["compile", "q.sql"]), json.dumps(HEAVY)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "sqlglot" in json.loads(proc.stdout)



def test_publish_and_subscribe_parse_without_asyncio_or_the_catalog_model() -> None:
    """`boreas publish --help`, `boreas subscribe --help` and `boreas --help` build their parsers without
    asyncio (with ssl) or the catalog model: those load when the command runs (cli/data.py and its helpers)."""
    light = {"--help": [], "publish": ["publish", "in1", "--file", "rows.csv"], "subscribe": ["subscribe", "out1"]}
    loaded = probed(light, ["asyncio", "ssl", "boreas.catalog.model"])
    assert {name: mods for name, mods in loaded.items() if mods} == {}

# -- `boreas move` run to the end: its thin path (client/box_move.py) --------------------------------------

#: What a `boreas move` of a box that is not partitioned loads besides :data:`HEAVY`'s: nothing to decode a catalog.
MOVE_HEAVY = (*HEAVY, "boreas.catalog.model", "boreas.catalog.documents", "boreas.client.optimizer", "asyncio",
              "http.client", "ssl")

RUN_PROBE = """
import atexit, json, runpy, sys
heavy = json.loads(sys.argv.pop(1))
atexit.register(lambda: print("IMPORTED " + json.dumps(sorted(m for m in heavy if m in sys.modules)), file=sys.stderr))
runpy.run_module("boreas.cli.main", run_name="__main__", alter_sys=True)
"""


class _FakeCluster:
    """A Head and a node in one standard-library HTTP server on a thread: ``GET /boxes/{name}``, ``GET /nodes``
    and the node's ``POST /update``, answering as they do (box ``b1`` on this server; ``part`` partitioned)."""

    def __init__(self) -> None:
        import http.server
        import threading

        fake = self
        self.node = ""  # where b1 runs: this server's endpoint until a move arrives
        self.updates: list[str] = []
        self.requests: list[str] = []
        self.lagging = 0  # how many more `GET /nodes` (or long-poll) answers say this node is not in sync yet
        self.long_poll = True  # `GET /boxes/b1?node=N&wait=S` answers with "placed" and "lagging" (else: an older Head)

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def answer(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                from urllib.parse import parse_qs, urlsplit

                path, query = urlsplit(self.path).path, parse_qs(urlsplit(self.path).query)
                fake.requests.append(f"GET {path}" + (" (long poll)" if query else ""))
                if path == "/boxes/b1":
                    entry = {"box": "b1", "type": "filter", "node": fake.node, "partition": None, "version": 3}
                    if "wait" in query and fake.long_poll:  # (the real Head waits; this one answers at once)
                        in_sync, fake.lagging = fake.lagging <= 0, fake.lagging - 1
                        entry |= {"placed": fake.node == query["node"][0],
                                  "lagging": [] if in_sync else [fake.endpoint]}
                    self.answer(200, entry)
                elif path == "/boxes/part":
                    self.answer(200, {"box": "part", "type": "m3", "node": None, "partition": {"layout": 1},
                                      "version": 3})
                elif path.startswith("/boxes/"):
                    self.answer(404, {"error": "no box 'b2' in the catalog (version 3) (did you mean 'b1'?)"})
                elif path == "/nodes":
                    in_sync, fake.lagging = fake.lagging <= 0, fake.lagging - 1
                    self.answer(200, {"version": 4, "nodes": [{"endpoint": fake.endpoint, "alive": True,
                                                               "in_sync": in_sync}]})
                else:
                    self.answer(404, {"error": "not here"})

            def do_POST(self) -> None:
                fake.requests.append(f"POST {self.path}")
                text = self.rfile.read(int(self.headers["Content-Length"])).decode()
                fake.updates.append(text)
                source, fake.node = fake.node, "localhost:15999"  # (the Head learns the move at once)
                self.answer(200, {"moved": [["b1", source]]})

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = self.node = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _boreas_move(fake: _FakeCluster, *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("BOREAS_")}
    env["BOREAS_HEAD"] = f"http://{fake.endpoint}"
    result = subprocess.run([sys.executable, "-c", RUN_PROBE, json.dumps(MOVE_HEAVY), "move", *args],
                            capture_output=True, text=True, env=env, timeout=120)
    rest, _, last = result.stderr.rstrip("\n").rpartition("\n")
    assert last.startswith("IMPORTED "), result.stderr
    result.stderr = rest
    return result, json.loads(last[len("IMPORTED "):])


def test_boreas_move_runs_without_decoding_a_catalog() -> None:
    """`boreas move` of a plain box, to the end against a fake Head and node: it says what it always said,
    sends the Optimizer's update XML, and loads neither lxml nor the catalog model nor the Optimizer, nor
    asyncio, http.client or ssl (its requests are blocking, over plain sockets: wire/blocking_peers.py)."""
    from boreas.client.optimizer_updates import move_document

    fake = _FakeCluster()
    try:
        source = fake.endpoint
        result, loaded = _boreas_move(fake, "b1", "localhost:15999")
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"moved box b1 from {source} to localhost:15999\n"
        assert loaded == []
        assert fake.updates == [move_document("b1", "localhost:15999")]
        assert fake.requests == ["GET /boxes/b1", "POST /update", "GET /boxes/b1 (long poll)"]

        result, _ = _boreas_move(fake, "b1", "localhost:15999")  # already there: nothing sent, exit 1
        assert result.returncode == 1 and result.stderr == "error: box 'b1' is already on localhost:15999"
        result, _ = _boreas_move(fake, "b2", "localhost:15999")  # unknown: the Head's words, exit 1
        assert result.returncode == 1
        assert result.stderr == "error: no box 'b2' in the catalog (version 3) (did you mean 'b1'?)"
        assert len(fake.updates) == 1
    finally:
        fake.close()


def test_the_thin_move_hands_partitioned_boxes_and_segments_to_the_optimizer() -> None:
    """A segment or a partitioned box is not moved by box_move (None, nothing sent): the Optimizer's full path
    moves it through its leader."""
    from boreas.client.box_move import move_box
    from boreas.wire.blocking_peers import BlockingPeers

    fake = _FakeCluster()
    try:
        with BlockingPeers(None) as peers:
            moved = [move_box(peers, f"http://{fake.endpoint}", name, "localhost:15999", 5.0)
                     for name in ("part", "part/2")]
        assert moved == [None, None]
        assert fake.updates == [] and fake.requests == ["GET /boxes/part"]
    finally:
        fake.close()


def test_move_text_is_the_optimizers_move_document() -> None:
    from boreas.client.box_move import move_text
    from boreas.client.optimizer_updates import move_document

    for box, target, origin in [("b1", "localhost:15002", "optimizer"), ("a&b<c>\"d'e", "[::1]:15000", "x y"),
                                ("tab\tnl\ncr\r", "h:1", "localhost:16000"), ("ünï", "h:2", "o")]:
        assert move_text(box, target, origin) == move_document(box, target, origin)


def test_the_thin_move_waits_on_the_heads_long_poll_until_every_node_is_in_sync() -> None:
    """After the update the move asks the Head once to wait (`GET /boxes/b1?node=T&wait=S`, head/box_wait.py), and
    again only while its answer says a node lags; a node that never gets in sync is named after the timeout (504)."""
    import pytest

    from boreas.client.box_move import move_box
    from boreas.client.errors import OptimizerFailed
    from boreas.wire.blocking_peers import BlockingPeers

    fake = _FakeCluster()
    head = f"http://{fake.endpoint}"

    def move(target: str, timeout: float) -> object:
        with BlockingPeers(None) as peers:
            return move_box(peers, head, "b1", target, timeout)

    try:
        fake.lagging = 2
        moved = move("localhost:15999", 30.0)
        assert moved.source == fake.endpoint and moved.reply == {"moved": [["b1", fake.endpoint]]}
        assert fake.requests == ["GET /boxes/b1", "POST /update"] + ["GET /boxes/b1 (long poll)"] * 3
        fake.node, fake.lagging = fake.endpoint, 10 ** 6
        with pytest.raises(OptimizerFailed) as failed:
            move("localhost:15999", 0.1)
        assert failed.value.status == 504
        assert str(failed.value) == (f"box 'b1' moved to localhost:15999, but after 0.1s the Head does not show it "
                                     f"everywhere ({fake.endpoint} not in sync)")
    finally:
        fake.close()


def test_with_a_head_that_does_not_wait_the_thin_move_polls_asking_only_the_nodes_again() -> None:
    """An older Head answers the long poll at once without "lagging": the move then polls `GET /boxes/b1` until the
    box shows on the target, then only `GET /nodes` until every live node is in sync."""
    import pytest

    from boreas.client.box_move import move_box
    from boreas.client.errors import OptimizerFailed
    from boreas.wire.blocking_peers import BlockingPeers

    fake = _FakeCluster()
    fake.long_poll = False
    head = f"http://{fake.endpoint}"

    def move(target: str, timeout: float) -> object:
        with BlockingPeers(None) as peers:
            return move_box(peers, head, "b1", target, timeout)

    try:
        fake.lagging = 2
        moved = move("localhost:15999", 30.0)
        assert moved.source == fake.endpoint
        assert fake.requests == ["GET /boxes/b1", "POST /update", "GET /boxes/b1 (long poll)", "GET /boxes/b1",
                                 "GET /nodes", "GET /nodes", "GET /nodes"]
        fake.node, fake.lagging = fake.endpoint, 10 ** 6
        with pytest.raises(OptimizerFailed) as failed:
            move("localhost:15999", 0.1)
        assert failed.value.status == 504 and f"({fake.endpoint} not in sync)" in str(failed.value)
    finally:
        fake.close()


def test_boreas_move_of_a_partitioned_box_goes_through_the_optimizer(monkeypatch, capsys) -> None:
    """`boreas move` hands what box_move does not move (a partitioned box) to the Optimizer's path."""
    from boreas.cli import optimize
    from boreas.cli.main import main
    from boreas.client.optimizer import Moved

    asked = []

    def optimizer_path(args, action):
        asked.append(args.box)
        return Moved(args.box, "localhost:15999", source="elsewhere:1", reply={})

    monkeypatch.setattr(optimize, "run_optimizer", optimizer_path)
    fake = _FakeCluster()
    try:
        assert main(["move", "part", "localhost:15999", "--head", f"http://{fake.endpoint}"]) == 0
    finally:
        fake.close()
    assert asked == ["part"] and fake.updates == []
    assert capsys.readouterr().out == "moved box part from elsewhere:1 to localhost:15999\n"
