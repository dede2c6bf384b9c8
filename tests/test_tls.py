"""TLS on every link, with real processes: a Head and two nodes with mutual TLS carry a publish to a subscriber
exactly (from the command line and from the Python client); a client with another cluster's CA, one without a
certificate, and one speaking plain HTTP each fail at once and say why; ``boreas cluster up --tls`` runs a
cluster its printed settings reach."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from boreas.catalog.documents import read_document
from boreas.catalog.model import Catalog
from boreas.catalog.replicate import apply_update
from boreas.cli.cluster_certs import ClusterCertificates, make_certificates
from boreas.client import Publisher, QueryClient, QueryFailed, Subscriber, TlsConfig, configure_tls
from support.cli_run import boreas_imports
from support.cluster import TOKEN, free_port, wait_until
from support.streams import collect

BOREALIS = Path(__file__).resolve().parent / "data" / "borealis"


def boreas(*argv: str, env: dict[str, str], timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "boreas.cli.main", *argv], env=env, capture_output=True,
                          text=True, timeout=timeout)


def spawn(workdir: Path, name: str, *argv: str, env: dict[str, str]) -> subprocess.Popen:
    with open(workdir / f"{name.replace(':', '_')}.log", "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "boreas.cli.main", *argv], env=env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def https_json(url: str, ca: Path, cert: Path, key: Path) -> object:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.load_cert_chain(str(cert), str(key))
    with urllib.request.urlopen(url, context=ctx, timeout=5) as resp:
        return json.loads(resp.read())


def alive_nodes(head: str, certs) -> set[str]:
    try:
        status = https_json(f"{head}/nodes", certs.ca, certs.cert, certs.key)
    except OSError:
        return set()
    return {row["endpoint"] for row in status["nodes"] if row.get("alive")}


def subscriptions(head: str, certs) -> list[str]:
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    ctx.load_cert_chain(str(certs.cert), str(certs.key))
    with urllib.request.urlopen(f"{head}/catalog", context=ctx, timeout=5) as resp:
        doc = read_document(resp.read(), f"{head}/catalog")
    return [s.endpoint for s in apply_update(Catalog(), doc.items, doc.version or 0).subscriptions.values()]


@pytest.fixture
def processes():
    started: list[subprocess.Popen] = []
    yield started
    stop(started)


@dataclass
class TlsCluster:
    head: str
    port: int
    nodes: list[str]
    certs: ClusterCertificates
    other: ClusterCertificates  # another cluster's CA and certificate
    env: dict[str, str]  # what a client of this cluster runs with
    plain: dict[str, str]  # the environment without any BOREAS_ setting
    workdir: Path


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    """A Head and two nodes, every link TLS with client certificates required; the box chain box1 -> box2 across
    the two nodes (the Borealis deploy test)."""
    workdir = tmp_path_factory.mktemp("tls")
    certs = make_certificates(workdir / "tls", "localhost")
    other = make_certificates(workdir / "other", "localhost")
    plain = {k: v for k, v in os.environ.items() if not k.startswith("BOREAS_")}
    port = free_port()
    head = f"https://localhost:{port}"
    env = {**plain, "BOREAS_TOKEN": TOKEN, "BOREAS_HEAD": head, "BOREAS_TLS_CA": str(certs.ca),
           "BOREAS_TLS_CERT": str(certs.cert), "BOREAS_TLS_KEY": str(certs.key), "BOREAS_TLS_CLIENT_AUTH": "1"}
    started = [spawn(workdir, "head", "head", "--catalog", f"sqlite:///{workdir / 'catalog.db'}",
                     "--listen", f"localhost:{port}", env=env)]
    nodes = [f"localhost:{free_port()}" for _ in range(2)]
    node_env = {**plain, "BOREAS_TOKEN": TOKEN}  # the nodes take TLS from flags, not the environment
    try:
        for node in nodes:
            started.append(spawn(workdir, node, "node", "--endpoint", node, "--head", head,
                                 "--tls-ca", str(certs.ca), "--tls-cert", str(certs.cert), "--tls-key",
                                 str(certs.key), "--tls-client-auth", env=node_env))
        wait_until(lambda: alive_nodes(head, certs) >= set(nodes), timeout=60,
                   what="both nodes registered over TLS")
        files = []
        for name, node in (("deploy_Deploy.xml", nodes[0]), ("deploy_DeployDeploy.xml", nodes[0]),
                           ("deploy_Add.xml", nodes[1]), ("deploy_AddDeploy.xml", nodes[1])):
            path = workdir / name
            path.write_text((BOREALIS / name).read_text().replace('":15000"', f'"{node}"'))
            files.append(str(path))
        for pair in (files[:2], files[2:]):
            result = boreas("submit", *pair, env=env)
            assert result.returncode == 0, result.stderr
        yield TlsCluster(head, port, nodes, certs, other, env, plain, workdir)
    finally:
        stop(started)


def stop(started: list[subprocess.Popen]) -> None:
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in started:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def is_test_subscriber(endpoint: str) -> bool:
    return not endpoint.endswith((":25000", ":25100"))  # not the deploy files' client endpoints


@pytest.mark.slow
def test_publish_and_subscribe_from_the_command_line_through_a_tls_cluster(tls_cluster, tmp_path, processes):
    c = tls_cluster
    rows = [(n / 4, n) for n in range(2000)]
    csv = tmp_path / "packets.csv"
    csv.write_text("value,time\n" + "".join(f"{v},{t}\n" for v, t in rows))
    sub = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "subscribe", "Add", "--count", str(len(rows))],
                           env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    processes.append(sub)
    wait_until(lambda: any(map(is_test_subscriber, subscriptions(c.head, c.certs))), timeout=30,
               what="the subscription")
    result = boreas("publish", "Packet", "--file", str(csv), env=c.env)
    assert result.returncode == 0, result.stderr
    out, err = sub.communicate(timeout=60)
    assert sub.returncode == 0, err
    assert [(r["value"], r["time"]) for r in map(json.loads, out.splitlines())] == rows


@pytest.mark.slow
async def test_the_python_client_publishes_and_subscribes_with_tls(tls_cluster):
    c = tls_cluster
    configure_tls(TlsConfig(ca=str(c.certs.ca), cert=str(c.certs.cert), key=str(c.certs.key)))
    try:
        rows = [(float(n), n) for n in range(3000)]
        async with Subscriber(c.head, "Add", TOKEN) as subscriber:
            async with Publisher(c.head, "Packet", TOKEN, batch_size=250) as publisher:
                await publisher.send(rows)
            got = await collect(subscriber, len(rows))
        assert got == rows
        async with QueryClient(c.head, TOKEN) as client:
            with pytest.raises(QueryFailed, match="nope"):
                await client.query("nope")
    finally:
        configure_tls(TlsConfig())  # the rest of this test process runs without TLS


@pytest.mark.slow
def test_light_commands_work_over_tls_without_loading_aiohttp_or_xmlschema(tls_cluster):
    """``boreas move``, ``connect``, ``disconnect``, ``nodes`` and ``submit`` make their few calls with the
    standard library's HTTP client: over TLS with client certificates, with the token, and without importing
    the heavy libraries (a valid box file or application is checked by libxml2 alone: xmlschema only explains
    a refused one)."""
    c = tls_cluster
    for target in (c.nodes[1], c.nodes[0]):  # there and back: the other tests find box1 where it was
        result, heavy = boreas_imports("move", "box1", target, env=c.env)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"moved box box1 from {c.nodes[1 - c.nodes.index(target)]} to {target}"
        assert heavy == []
    result, heavy = boreas_imports("nodes", env=c.env)
    assert result.returncode == 0, result.stderr
    assert [line.split()[:2] for line in result.stdout.splitlines()[2:]] == [[n, "up"] for n in sorted(c.nodes)]
    assert heavy == []
    box = c.workdir / "light_filter.xml"
    box.write_text('<box name="light" type="filter"><in stream="Packet"/><out stream="light"/>'
                   '<parameter name="expression.0" value="time &gt;= 0"/></box>')
    result, heavy = boreas_imports("connect", "box1", "--box", box, env=c.env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"inserted box light on {c.nodes[0]} before box1 port 0"), result.stdout
    assert heavy == []
    result, heavy = boreas_imports("disconnect", "light", env=c.env)
    assert result.returncode == 0, result.stderr
    assert "its sink reads Packet again" in result.stdout
    assert heavy == []
    app = c.workdir / "light_app.xml"
    app.write_text('<borealis><input stream="LightIn" schema="LightTuple"/><schema name="LightTuple">'
                   '<field name="time" type="int"/></schema><box name="light_box" type="filter">'
                   '<in stream="LightIn"/><out stream="LightOut"/><parameter name="expression.0" value="time &gt; 1"/>'
                   '</box></borealis>')
    deploy = c.workdir / "light_deploy.xml"
    deploy.write_text(f'<deploy><node endpoint="{c.nodes[1]}" query="light_box"/></deploy>')
    result, heavy = boreas_imports("submit", app, deploy, env=c.env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "deployed: 1 node acknowledged", result.stdout
    assert heavy == []
    result, heavy = boreas_imports("submit", box, env=c.env)  # refused by the Head: its reasons, one per line
    assert result.returncode == 2 and str(box) in result.stdout + result.stderr, result.stdout + result.stderr
    result, _ = boreas_imports("move", "box1", c.nodes[1], env={**c.env, "BOREAS_TOKEN": "wrong"})
    assert result.returncode == 1 and "wrong cluster token" in result.stderr, result.stderr


@pytest.mark.slow
def test_clients_that_cannot_speak_tls_with_the_cluster_fail_at_once_saying_why(tls_cluster):
    c = tls_cluster
    # Another cluster's CA: refused at once, naming the certificate.
    result = boreas("nodes", "--tls-ca", str(c.other.ca), "--tls-cert", str(c.other.cert), "--tls-key",
                    str(c.other.key), env={**c.plain, "BOREAS_HEAD": c.head}, timeout=30)
    assert result.returncode == 1 and "certificate is not trusted" in result.stderr, result.stderr
    # The right CA but no client certificate, where one is required.
    result = boreas("nodes", "--tls-ca", str(c.certs.ca), env={**c.plain, "BOREAS_HEAD": c.head}, timeout=30)
    assert result.returncode == 1 and "client certificate" in result.stderr, result.stderr
    # Plain HTTP to the TLS Head: says that it may serve TLS.
    result = boreas("nodes", "--head", f"http://localhost:{c.port}", env=c.plain, timeout=30)
    assert result.returncode == 1 and "if it serves TLS, use https://" in result.stderr, result.stderr
    # With TLS on, an http:// Head is refused before anything (the token) is sent.
    result = boreas("nodes", "--head", f"http://localhost:{c.port}", env=c.env, timeout=30)
    assert result.returncode == 1 and "TLS is" in result.stderr and "use https://" in result.stderr, result.stderr
    # A certificate file that is not there: exit 2, naming it.
    result = boreas("nodes", "--tls-ca", str(c.workdir / "missing.pem"), env={**c.plain, "BOREAS_HEAD": c.head})
    assert result.returncode == 2 and "missing.pem: no such file" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_cluster_up_tls_makes_certificates_that_its_clients_use(tmp_path, processes):
    plain = {k: v for k, v in os.environ.items() if not k.startswith("BOREAS_")}
    port = free_port()
    base = free_port()
    up = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "cluster", "up", "--tls", "--nodes", "1",
                           "--catalog", "memory://", "--data-dir", str(tmp_path / "data"), "--head-port", str(port),
                           "--base-port", str(base)],
                          env=plain, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    processes.append(up)
    assert up.stdout is not None
    export = None
    for line in up.stdout:
        if line.startswith("export "):
            export = line
            break
    assert export is not None, "cluster up printed no export line"
    settings = dict(item.split("=", 1) for item in export.split()[1:])
    assert settings["BOREAS_HEAD"] == f"https://localhost:{port}"
    assert Path(settings["BOREAS_TLS_CA"]) == tmp_path / "data" / "tls" / "ca.pem"
    result = boreas("nodes", "--json", env={**plain, **settings}, timeout=30)
    assert result.returncode == 0, result.stderr
    assert [n["endpoint"] for n in json.loads(result.stdout)["nodes"]] == [f"localhost:{base}"]
    result = boreas("nodes", env={**plain, "BOREAS_HEAD": f"http://localhost:{port}"}, timeout=30)
    assert result.returncode == 1 and "if it serves TLS" in result.stderr, result.stderr


@pytest.mark.slow
def test_a_head_with_a_token_on_all_addresses_without_tls_warns_that_tokens_reach_it_in_clear(tmp_path, processes):
    plain = {k: v for k, v in os.environ.items() if not k.startswith("BOREAS_")}
    port = free_port()
    head = spawn(tmp_path, "head", "head", "--catalog", "memory://", "--listen", f"0.0.0.0:{port}",
                 env={**plain, "BOREAS_TOKEN": TOKEN})
    processes.append(head)
    log = tmp_path / "head.log"
    wait_until(lambda: "listening on" in log.read_text(), timeout=30, what="the Head to listen")
    assert "without TLS: the cluster token reaches it in clear" in log.read_text()


def test_a_zookeeper_url_with_an_unknown_option_is_refused_naming_it():
    """The zk:// URL's query sets kazoo's TLS and SASL (catalog/store/znodes.py); a misspelt key is not ignored."""
    from boreas.catalog.store import StoreError, open_store

    with pytest.raises(StoreError, match="unknown query key 'cafile'.*known: tls, ca, cert"):
        open_store("zk://127.0.0.1:1/boreas?cafile=/etc/zk/ca.pem")
