"""Several Heads on one ZooKeeper catalog, as real processes: one leads, the others redirect; kill -9 the
leader and another takes over, while a node and the CLI given every Head (``--head a,b``) carry on.

docs/architecture.md, "Leadership and fencing".
"""

from __future__ import annotations

import http.client
import json
import threading
import signal
import uuid
from pathlib import Path

import pytest
from support.cluster import EXAMPLES, STARTUP, TOKEN, Cluster, catalog_at, free_port, get_json, wait_until

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]


class Heads(Cluster):
    """A :class:`Cluster` with several Heads on one ``zk://`` catalog; ``self.head`` names them all."""

    def __init__(self, workdir: Path, store_url: str, count: int, failover_after: float = 0.0):
        super().__init__(workdir, store_url, failover_after=failover_after)
        self.urls = [self.head] + [f"http://localhost:{free_port()}" for _ in range(count - 1)]
        self.head = "http://" + ",".join(url.split("://")[1] for url in self.urls)
        self.env["BOREAS_HEAD"] = self.head  # nodes and commands get every Head

    def start_heads(self) -> None:
        """Every Head, started side by side (a start is mostly imports)."""
        self.start_one(*self.urls)

    def start_one(self, *urls: str) -> None:
        for url in urls:
            port = url.rsplit(":", 1)[1]
            self._spawn(f"head-{port}", "head", "--catalog", self.store_url, "--listen", f"localhost:{port}",
                        "--session-timeout", "2", "--failover-after", str(self.failover_after))
        for url in urls:
            wait_until(lambda u=url: self._up(f"{u}/status"), timeout=STARTUP, what=f"the Head at {url} to listen")

    def leader(self) -> str:
        """The URL of the Head that says it leads (waiting for one)."""
        def leading() -> str | None:
            for url in self.urls:
                if self._up(f"{url}/status") and get_json(f"{url}/status")["leadership"]["leading"]:
                    return url
            return None
        return wait_until(leading, timeout=30, what="a Head to lead")

    def kill(self, url: str) -> int:
        proc = self.procs.pop(f"head-{url.rsplit(':', 1)[1]}")
        proc.send_signal(signal.SIGKILL)
        return proc.wait(timeout=15)

    def nodes(self) -> dict[str, dict]:
        return {row["endpoint"]: row for row in get_json(f"{self.leader()}/nodes")["nodes"]}

    def head_catalog(self):
        return catalog_at(f"{self.leader()}/catalog")


def post(url: str, path: str, body: bytes) -> tuple[int, dict, dict]:
    """One POST, redirects not followed: status, headers, JSON body."""
    host = url.split("://")[1]
    connection = http.client.HTTPConnection(host, timeout=10)
    try:
        connection.request("POST", path, body=body, headers={"Authorization": f"Bearer {TOKEN}",
                                                             "Content-Type": "application/xml"})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), json.loads(response.read() or b"{}")
    finally:
        connection.close()


@pytest.fixture
def heads(tmp_path, zookeeper_server):
    made: list[Heads] = []

    def make(count: int = 2, failover_after: float = 0.0) -> Heads:
        cluster = Heads(tmp_path, f"zk://{zookeeper_server}/boreas-ha/{uuid.uuid4().hex[:12]}", count,
                        failover_after)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.close()


def test_a_follower_redirects_and_a_new_leader_takes_over_after_kill_9(heads):
    cluster = heads(2)
    cluster.start_heads()
    leader = cluster.leader()
    follower = next(url for url in cluster.urls if url != leader)
    node = cluster.start_node()  # --head a,b (from $BOREAS_HEAD): heartbeats reach the leader
    ports = dict.fromkeys((15000, 15001, 15002), node)

    # The follower answers a change with 307 and the leader's URL, and serves reads itself.
    status, headers, body = post(follower, "/update", b"<update/>")
    assert status == 307
    assert headers["Location"] == f"{leader}/update"
    assert body["leader"] == leader
    following = get_json(f"{follower}/status")["leadership"]
    assert (following["url"], following["leading"], following["leader"]) == (follower, False, leader)

    # A submission sent to the follower alone is redirected, committed by the leader, deployed.
    result = cluster.boreas("submit", "--head", follower, EXAMPLES / "sensor_chain.xml",
                            cluster.example("sensor_chain_deploy.xml", ports), "--timeout", "60")
    assert result.returncode == 0, result.stderr
    assert "deployed" in result.stdout
    assert "valid" in cluster.node_catalog(node).boxes
    wait_until(lambda: "valid" in catalog_at(f"{follower}/catalog").boxes, what="the follower to read the commit")

    region = cluster.start_region("east")  # a regional component given both Heads registers with the leader

    # kill -9 the leader: the follower leads, the node and the region carry on with it, and a submission
    # given both Heads reaches the new leader.
    assert cluster.kill(leader) == -signal.SIGKILL
    assert cluster.leader() == follower
    result = cluster.boreas("submit", EXAMPLES / "packet_aggregate.xml",
                            cluster.example("packet_aggregate_deploy.xml", {15000: node}), "--timeout", "60")
    assert result.returncode == 0, result.stderr
    wait_until(lambda: "mybox" in cluster.node_catalog(node).boxes, timeout=30,
               what="the new leader to deploy to the node")
    assert cluster.nodes()[node]["alive"]
    wait_until(lambda: cluster.nodes()[node]["in_sync"], timeout=30, what="the node in sync with the new leader")
    status = get_json(f"{follower}/status")["leadership"]
    assert status["leading"] and status["epoch"] == 2
    assert cluster.procs[f"region-{region}"].poll() is None
    assert any(r.endpoint == region for r in cluster.head_catalog().regions.values())

    # The killed Head comes back as a follower, redirecting to the new leader.
    cluster.start_one(leader)
    wait_until(lambda: get_json(f"{leader}/status")["leadership"]["leader"] == follower,
               what="the restarted Head to see the leader")
    assert post(leader, "/update", b"<update/>")[0] == 307


def test_a_second_head_on_an_embedded_catalog_is_refused(tmp_path):
    cluster = Cluster(tmp_path, "sqlite:///" + str(tmp_path / "catalog.db"))
    try:
        cluster.start_head()
        second = cluster.boreas("head", "--catalog", cluster.store_url, "--listen", f"localhost:{free_port()}")
    finally:
        cluster.close()
    assert second.returncode != 0
    assert "already has a Head" in second.stderr
    assert "zk://" in second.stderr


def test_an_old_leader_whose_election_znode_is_gone_cannot_commit(zookeeper_server):
    """Fencing: ZooKeeper removes the leader's election znode (its session expired while it was paused or
    cut off), the next Head leads; the old one still believes it leads, and its commit fails whole."""
    from boreas.catalog.store import Change, open_store
    from boreas.catalog.store.zk_leader import NotLeader
    from boreas.head.submissions import SubmissionLog, SubmissionRecord
    from kazoo.client import KazooClient

    url = f"zk://{zookeeper_server}/boreas-ha/{uuid.uuid4().hex[:12]}"
    first, second = open_store(url), open_store(url)
    leases = [first.head_lease("http://a:1", 2.0), second.head_lease("http://b:2", 2.0)]
    elected = [threading.Event(), threading.Event()]
    lost: list[str] = []
    try:
        leases[0].start(elected[0].set, lambda: lost.append("a"))
        assert elected[0].wait(10)
        leases[1].start(elected[1].set, lambda: lost.append("b"))
        wait_until(lambda: leases[1].leader() == "http://a:1", what="the follower to see the leader")
        assert first.commit(first.version(), [Change("schema", "A", "<schema name='A'/>")]).version == 1
        with pytest.raises(NotLeader):
            second.commit(1, [Change("schema", "B", "<schema name='B'/>")])

        admin = KazooClient(hosts=zookeeper_server)
        admin.start()
        admin.delete(first.fence.path)  # what ZooKeeper does when the session expires
        admin.stop()
        assert elected[1].wait(10)
        assert leases[0].leading  # it has not noticed (its session is fine): only the fence stops it
        fenced = SubmissionRecord(["c.xml"])
        with SubmissionLog(lambda: first).recording(fenced), pytest.raises(NotLeader):
            first.commit(1, [Change("schema", "C", "<schema name='C'/>")])
        assert second.get_meta("submission/2") is None  # the submission's record fails with its commit
        assert second.commit(1, [Change("schema", "B", "<schema name='B'/>")]).version == 2
        assert sorted(second.snapshot().of_kind("schema")) == ["A", "B"]
        assert leases[1].epoch > leases[0].epoch
    finally:
        for lease in leases:
            lease.close()
        first.close()
        second.close()


async def test_a_submissions_record_is_written_by_its_commit_and_read_by_another_head(zookeeper_server):
    """The record the next leader answers ``GET /submissions/{id}`` from is in the commit's own multi-op:
    there is no moment when the version is committed and the record missing; a commit refused (a lost
    race) writes none."""
    from boreas.catalog.store import Change, ConflictError, open_store
    from boreas.head.submissions import SubmissionLog, SubmissionRecord

    url = f"zk://{zookeeper_server}/boreas-ha/{uuid.uuid4().hex[:12]}"
    with open_store(url) as leader, open_store(url) as successor:
        submissions = SubmissionLog(lambda: leader)
        record = SubmissionRecord(["app.xml"])
        with submissions.recording(record):
            version = leader.commit(0, [Change("schema", "A", "<schema name='A'/>")]).version
        assert json.loads(leader.get_meta(f"submission/{version}"))["id"] == record.id(version)
        assert leader.commit(1, []).version == 2  # outside the block: no record

        late = SubmissionRecord(["late.xml"])
        with submissions.recording(late), pytest.raises(ConflictError):
            leader.commit(1, [Change("schema", "B", "<schema name='B'/>")])
        assert leader.get_meta("submission/2") is None

        found = await SubmissionLog(lambda: successor).find(record.id(version), ["localhost:15000"])
        assert found is not None and (found.version, found.sources) == (1, ["app.xml"])


APP = """<borealis>
  <schema name="P"> <field name="value" type="double"/> </schema>
  <input stream="In" schema="P"/> <output stream="Out" schema="P"/>
  <box name="keep" type="filter"> <in stream="In"/> <out stream="Out"/>
    <parameter name="expression.0" value="value &gt; 0"/> </box>
</borealis>"""


def test_a_node_that_died_with_the_leader_is_failed_over_by_the_next(heads, tmp_path):
    """The leader and the node running a box are killed together; the next leader, which never heard
    that node, counts it down from its election and has the live node adopt its box."""
    cluster = heads(2, failover_after=2.0)
    cluster.start_heads()
    leader = cluster.leader()
    live, doomed = (cluster.start_node(data_dir=tmp_path / f"data{n}", shared=True) for n in range(2))
    deploy = cluster.write("deploy.xml", f'<deploy> <publish stream="In" node="{doomed}"/> '
                                         f'<node endpoint="{doomed}" query="keep"/> </deploy>')
    result = cluster.boreas("submit", cluster.write("app.xml", APP), deploy, "--timeout", "60")
    assert result.returncode == 0, result.stderr

    cluster.kill(leader)
    proc = cluster.procs.pop(doomed)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=15)
    successor = cluster.leader()
    wait_until(lambda: get_json(f"{successor}/boxes/keep")["node"] == live, timeout=60,
               what="the next leader to fail the dead node over")
    assert "keep" in get_json(f"http://{live}/status")["boxes"]
    failover = get_json(f"{successor}/status")["failover"]["nodes"][doomed]
    assert (failover["state"], failover["to"]) == ("failed over", live)


def test_a_leader_paused_past_its_session_stops_when_it_resumes(heads):
    """SIGSTOP the leader: a submission given both Heads, the paused one first, is taken by the other once
    it leads (the client gives up on a Head that does not answer and that no Head names the leader, not
    its whole timeout); the old leader, resumed, finds its session expired and exits with status 3."""
    cluster = heads(2)
    cluster.start_heads()
    leader = cluster.leader()
    follower = next(url for url in cluster.urls if url != leader)
    paused = cluster.procs[f"head-{leader.rsplit(':', 1)[1]}"]
    paused.send_signal(signal.SIGSTOP)
    try:
        # The paused Head's kernel still accepts the connection; nothing answers on it.  --timeout 60 would
        # keep a client that only waited its timeout on it past the command's own 60 s.
        both = ",".join(url.split("://")[1] for url in (leader, follower))
        result = cluster.boreas("submit", "--head", both, EXAMPLES / "packet_aggregate.xml", "--timeout", "60")
        assert result.returncode == 0, result.stderr
        assert f"by the Head at {follower.split('://')[1]}" in result.stdout
        assert "trying the next Head" in result.stderr
        assert get_json(f"{follower}/status")["leadership"]["leading"]
        # The same with the standard library's HTTP (the commands that make a call or two): the paused Head
        # is given up, not waited on, and the other answers.
        listed = cluster.boreas("nodes", "--head", both, "--json")
        assert listed.returncode == 0, listed.stderr
        assert "trying the next Head" in listed.stderr and json.loads(listed.stdout)["nodes"] == []
    finally:
        paused.send_signal(signal.SIGCONT)
    assert paused.wait(timeout=30) == 3
    assert "lost the lead" in cluster.log(f"head-{leader.rsplit(':', 1)[1]}")
    assert catalog_at(f"{follower}/catalog").version == 1
