"""Shared fixtures: a real ZooKeeper server and one catalog store per implementation.

The ZooKeeper server is started once per session from the Debian ``zookeeper``
package (``/usr/share/java/zookeeper.jar``; its manifest's Class-Path names
the dependency jars), on a free loopback port with a throw-away data dir.
It is deliberately not skipped when missing: the ZooKeeper store would then
go untested without anyone noticing.
"""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from boreas.catalog.store import CatalogStore

sys.path.insert(0, str(Path(__file__).parent))  # tests/support: helpers shared by test modules

from support import fast_budget  # noqa: E402 (the path above first)

#: The test server purges its own transaction logs and snapshots (keeping the newest 3, checked
#: at start and hourly), as a production server must be told to; see docs/architecture.md.
ZOOKEEPER_PURGE = {"autopurge.snapRetainCount": "3", "autopurge.purgeInterval": "1"}


#: Test paths (under tests/) that run wholly in the pytest process: no Head or node processes, no ZooKeeper,
#: no Head, node or link servers and no test that waits on a timer or a failure detector.  Listed by name, so a
#: new module joins the "processes" group until someone checks it and adds it here.
IN_PROCESS = (
    "test_fast_budget.py",                   # the test-fast list read back by a pytest --collect-only subprocess
    "test_yielding.py",                      # the Head's background work's checkpoints, counted in process
    "test_handover_cost.py",                 # a box moved between two in-process dataflows, its work counted
    "test_connect_cost.py",                  # a connect's check on an in-process dataflow, its inferences counted
    "test_deploy_cost.py",                   # a deployment's part checked against an index, its typings counted
    "test_evolve.py",                        # catalog/evolve.py against dataclasses.replace, in process
    "test_blocking_peers.py",                # blocking calls against OneShotPeers' on a threaded HTTP server
    "test_box_wait.py",                      # the Head's long poll for a move, on a stand-in Head
    "test_m3_lookup.py",                     # lookup joins compiled and run in process (m3/compiler/lookup.py)
    "test_sunion_operators.py", "test_sjoin_operators.py",  # Borealis's fault-tolerance boxes fed by hand
    "test_publish_file_batches.py",          # boreas publish's file reader and read-ahead, in process
    "test_cumulus_entry_columns.py",         # Push and Chunk entries as Arrow columns, in process
    "test_cumulus_native_export.py",         # ... exported from the native backend's C maps in bulk, in process
    "test_cumulus_native_install.py",        # ... installed into the native backend's C maps in bulk, in process
    "test_framed_payload.py",                # a batch framed for the wire in one write, checked in process
    "test_row_batches.py",                   # a row publisher's batches made Arrow, against the node's row check
    "test_time_columns.py",                  # date and time columns as microseconds, and a Parquet file's, in process
    "test_publish_dataframes.py",            # DataFrames and tables through in-process Head and nodes
    "test_m3columns.py",                     # an m3 box's Arrow to C columns and a frame's payload, in process
    "test_m3rows.py",                        # a stateless m3 view on columns against its row path, by hand
    "test_publisher_rows_arrow.py",          # row publishers through in-process Head and nodes: refusals, resumes
    "test_fault_boxes_node.py", "test_fault_boxes_catalog.py",  # ... in a dataflow driven by hand, at submission
    "test_aurorajoin_operator.py",           # Borealis's older join fed by hand
    "test_aurorajoin_columns.py",            # ... on columns against its row path, fed by hand
    "test_shedding_columns.py",              # delay, random_drop, window_drop on columns against their rows, by hand
    "test_shedding_node.py",                 # ... and in a dataflow driven by hand
    "m3/",                                   # the M3 compiler and runtimes against DuckDB
    "test_array_fields.py",                  # array fields through the operators, by hand
    "test_box_text.py",                      # a box written as text against lxml
    "test_catalog_store.py",                 # a node's local catalog on disk: catalog.xml and its change log
    "test_change_cost.py",                   # layered dicts, cycle search, diffs by keys, derivations: in process
    "test_reflect_cost.py",                  # a node's reflection to its regions driven by hand (no region: no text)
    "test_nullable_fields.py",               # nullable fields through XML, the wire and the operators, by hand
    "test_batching.py",                      # a dataflow driven by hand, its input log on disk
    "test_cumulus_sim.py", "test_cumulus_failover_sim.py", "test_cumulus_holding.py", "test_cumulus_handover_sim.py",
    "test_cumulus_coordinator_route.py",  # the coordinator list in the catalog, the route and a rebuilt member
    "test_cumulus_slot_columns.py", "test_cumulus_columns.py",
    "test_cumulus_precopy.py", "test_cumulus_replicated_sim.py",  # Cumulus members simulated in one process
    "test_cumulus_keyless.py",               # a partitioned keyless view's members simulated in one process
    "test_cumulus_windows.py",               # partitioned TUMBLE/HOP members in one process (their own links)
    "test_cumulus_sessions.py",              # partitioned SESSION members in one process (their own links)
    "test_cumulus_winjoin.py",               # a partitioned window join in one process (their own links)
    "test_cumulus_winjoin_computed.py",      # its leaves computed when read, members in one process
    "test_cumulus_topn.py",                  # partitioned top-N members in one process (their own links)
    "test_partition_replicated_catalog.py",  # (support/cumulus_sim.py); the replicate= catalog on memory://
    "test_cumulus_windows_marks.py",         # partitioned windows' watermark over coordinators, in process
    "test_cumulus_ends.py",                  # partitioned boxes' out streams end after their last row, in process
    "test_replicate.py", "test_replicate_slices.py", "test_replicate_examples.py",
    "test_full_copy.py",                     # a full copy assembled from the Head's parts, in process
    "test_copy_stream.py", "test_copy_feed.py",                   # a full copy streamed and decoded as it arrives, feeds on localhost
    "test_gcpause.py",                       # a bulk update pauses the collector, freezes nothing
    "test_addresses.py",                     # --listen/--advertise rules (its cluster test joins the group)
    "test_node_positions.py",                # deployment positions resolved against a node order
    "test_zk_copies.py",  # (the session's ZooKeeper server only: PROCESS_FIXTURES puts it in the group)
    "test_zk_commit_writes.py",  # (the session's ZooKeeper server only, as test_zk_copies.py)
    "test_zk_copy_races.py",  # (the session's ZooKeeper server and an in-process proxy only, as test_zk_copies.py)
    "test_head_restart_stores.py",  # Heads in process on sqlite and on the session's ZooKeeper (same group)
    "test_properties.py", "test_properties_broken_input.py", "test_fastpath.py", "test_doctests.py",
    "test_filter_shapes.py",                 # filters sharing code per expression shape, against compile_expression
    "test_copy_ahead.py",                    # a catalog copy built ahead in a worker thread, read on the loop
    "test_layering.py",                      # the import graph of the packages (ast only)
    "test_private_access.py", "test_tasks_owned.py",  # no private reached into, every task owned (ast only)
    "test_optimizer.py",                     # the optimizer API's checks (its cluster tests join the group)
    # catalog reading, validation, XML and XSD, update XML, regions, on memory:// or SQLite catalogs
    "test_borealis_forms.py", "test_borealis_arrays.py", "test_validation.py", "test_regional_catalog.py",
    "test_updates.py",
    "test_xsd.py", "test_xsd_engines.py", "test_hardening_xml.py", "test_hardening_store_urls.py",
    # test_hardening.py's only server is its own in-thread canary that must receive no request
    "test_hardening.py",
    "test_hardening_csv.py",                 # the CLI's CSV reading; publishing to a port nothing listens on
    "test_operators.py", "test_compiled_expressions.py", "test_operator_moves.py",  # operators fed by hand
    "test_operator_order.py", "test_m3_stream_names.py",
    "test_outputs_snapshot.py", "test_recovery_storage.py", "test_recovery_layouts.py", "test_packaging.py",
    "test_m3_box.py",                        # the m3 operator fed by hand (its Spark test: below)
    "test_m3_null_changelog.py",             # an m3 box's changelog of NULL values, fed by hand, against DuckDB
    "test_m3_windows.py",                    # event-time windows in an m3 box fed by hand, against a reference
    "test_m3_sessions.py",                   # SESSION windows in an m3 box fed by hand, against a reference
    "test_m3_topn.py",                       # ROW_NUMBER() top-N in an m3 box fed by hand, against DuckDB
    "test_m3_topn_append.py",                # the append-only top-N ranked in columns, against RankedRows
    "test_m3_session_batch.py",              # a SESSION batch held a run per key, against rows one at a time
    "test_m3_session_held.py",               # SESSION runs held as slices of their batches, against tuples
    "test_m3_sessions_nexmark.py",           # Nexmark's q11 in an m3 box fed by hand, against DuckDB
    "test_m3_winjoin.py",                    # window and interval joins in an m3 box fed by hand, against a reference
    "test_m3_winjoin_leaf_columns.py",       # a window join's raw leaf without its unread columns, fed by hand
    "test_nexmark_winjoin.py",               # Nexmark's q8, q7, q5 in an m3 box fed by hand, against DuckDB
    "test_m3_casesplit.py",                  # a CASE of two columns as a UNION ALL (Nexmark q21), against DuckDB
    "test_m3_regexp_null.py",                # REGEXP_EXTRACT(...) IS [NOT] NULL (Flink's no match), against DuckDB
    "test_m3_string_minmax.py",              # MIN/MAX of STRING expressions, runtime and box, against DuckDB
    "test_nexmark_flinkcheck.py",            # the bench's check against Flink's rows, and its memory mode
    "test_columns.py",                       # Arrow batches checked, and an m3 box fed columns, in process
    "test_join_columns.py",                  # the join on columns against its row path, fed by hand
    "test_drop.py",                          # <delete stream> and what boreas drop sends (its cluster test: slow)
    "test_replace_application.py",           # submit --replace planned in process (its cluster tests: slow)
    "test_replace_prune.py",                 # submit --replace removing what the file leaves out, in process
    "test_columnar_operators.py",            # filter, map and union fed Arrow columns by hand
    "test_columnar_exprs.py",                # ... their expressions over nullable fields, math, flagged rows
    "test_columnar_text.py",                 # ... min/max/coalesce of ints and doubles, doubles as text, LIKE of a column
    "test_aggregate_columns.py",             # the aggregate fed Arrow columns by hand, against its row path
    "test_aggregate_columns_edges.py",       # the aggregate on columns where numpy and Python part, against rows
    "test_aggregate_tuples.py",              # windows by TUPLES on columns, against the row path
    "test_aggregate_columns_nulls.py",       # the aggregate on columns over nullable fields, against rows
    "test_changelog.py",                     # weighted batches through operators by hand; refusals at submission
    "test_changelog_applied.py",             # aggregate and m3 applying weights by hand, against DuckDB
    "test_revision_operators.py", "test_revision_catalog.py",  # revision boxes fed by hand; their validation
    "test_revision_node.py",                 # revision boxes in a Dataflow fed by hand, a snapshot restored
    "test_table_columns.py",                 # select and joinstatic on columns against their rows, by hand
    "test_table_operators.py", "test_table_catalog.py",  # table boxes fed by hand; their validation
    "test_table_node.py",                    # table boxes in a Dataflow: shared rows, a snapshot, a move
    "test_changelog_node.py",                # a node refuses a publisher's weights; a moved box keeps them, in process
    "test_m3_box_cluster.py",                # split from test_m3_box.py; its cluster tests join the group (below)
    "test_late_tuples.py", "test_stream_ends.py", "test_member_ends.py",  # aggregates fed late tuples, ended by hand (its cluster test: test_end_of_input.py)
    "test_docs_xml.py",                      # docs/xml.md against the XSDs and the reader
    "test_sql_text.py",                      # an m3 box's SQL as text or a file: reader, CLI validate, in-process Head
    "test_examples_endpoints.py",            # the examples name no dead endpoint (its cluster test joins the group)
    "test_named_subscription_catalog.py",    # <subscribe name=> replacing by name, in process
    "test_incremental_validation.py",        # catalog/index.py against the whole check, on random edits
    "test_index_checkpoint.py",              # a saved, decoded index against the whole check; a Head started twice
    "test_saved_boxes.py",                   # a start's boxes from the saved blob against their XML, on a sqlite file
    "test_expression_shapes.py",             # expressions parsed by shape against sqlglot, in process
    "test_incremental_slices.py",            # catalog/slice_index.py against slicing everything, on random edits
    "test_ui_index.py",                      # head/ui/index.py followed commit by commit against one built afresh
    "test_touched_updates.py",               # a commit's feed items and UI changes from its keys against comparing all
    "test_node_change_cost.py",              # a node's update applied by its keys against following every box
    "test_nexmark_memory.py",                # a windowed m3 box fed many windows by hand: its state and intern table
    "test_nexmark_gen.py", "test_nexmark.py",  # the Nexmark bench's generator and queries (m3 boxes fed by hand)
    "test_quiet_pacer.py",                   # background work waiting for quiet and nodes in sync, in process
    "test_adopt_commit.py",                  # a Head's own commit adopted from its plan against decoded, in process
    "test_learn_assumed.py",                 # NodeSync's held patched by a learnt change (its cluster test: fixture)
    "test_learn_move_report.py",             # NodeSync's held patched by a move's report, fake nodes
    "test_head_resync.py",                   # the resync rule on an in-process Head and node (its cluster test: slow)
    "test_input_declared_output.py",         # an <input> of a box's stream as its schema's declaration, in process
)

#: Test paths whose tests run short ``boreas`` command processes on files only (validate, catalog apply/show/export on
#: SQLite files in tmp_path, compile, --help, a Head URL nothing listens on): no server, no port, no timer, so they
#: need not wait for the group and run beside it like :data:`IN_PROCESS`'s (test_cli.py's ZooKeeper test joins the
#: group: PROCESS_FIXTURES).  The CLI on a real cluster is test_cli_ux_commands.py, in the group.
CLI_ON_FILES = ("test_cli.py", "test_cli_ux.py", "test_cli_imports.py")

#: A test using one of these fixtures, or marked ``zookeeper``, joins the group even in an IN_PROCESS module:
#: real Head and node processes, the session's ZooKeeper server or SparkSession (one per worker otherwise).
PROCESS_FIXTURES = ("cluster_factory", "zookeeper_server", "zookeeper_server_default_limits", "spark")


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the marks into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test outside :data:`IN_PROCESS` and :data:`CLI_ON_FILES`, and every test using :data:`PROCESS_FIXTURES` or marked
    ``zookeeper``, joins the xdist group "processes".

    ``make test`` runs ``pytest -n 2 --dist loadgroup``: the group goes whole to one worker, so tests that
    start real Head and node processes (or ZooKeeper, in-process Head and node services, or links with
    timeouts) and wait on them run one at a time (two clusters at once on 2 cores would race each other's
    failure detectors and timeouts); the in-process tests go one by one to whichever worker is free, the
    group's worker too once the group is done.  Without xdist the mark does nothing.

    The tests :mod:`support.fast_budget` lists for their time are marked ``slow``: ``make test-fast`` leaves
    them out, ``make test`` runs them.
    """
    root = Path(__file__).parent
    too_slow = fast_budget.left_out()
    for item in items:
        if too_slow and fast_budget.key_of_nodeid(item.nodeid) in too_slow:
            item.add_marker(pytest.mark.slow)  # (test-fast's time budget: tests/support/fast_budget.py)
        if (not item.path.relative_to(root).as_posix().startswith(IN_PROCESS + CLI_ON_FILES)
                or item.get_closest_marker("zookeeper") is not None
                or any(name in PROCESS_FIXTURES for name in getattr(item, "fixturenames", ()))):
            item.add_marker(pytest.mark.xdist_group("processes"))


@contextmanager
def running_zookeeper(maxbuffer: int | None) -> Iterator[str]:
    """Run a standalone ZooKeeper on 127.0.0.1; fail (never skip) when it cannot run."""
    from boreas.catalog.store.zkserver import LocalZooKeeper, ZooKeeperUnavailable

    server = LocalZooKeeper(maxbuffer=maxbuffer, settings=ZOOKEEPER_PURGE)
    try:
        server.start()
    except ZooKeeperUnavailable as exc:
        server.close()
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server.address
    finally:
        server.close()


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[str]:
    """A real ZooKeeper accepting 16 MB requests; yields ``"127.0.0.1:PORT"``."""
    with running_zookeeper(16 * 1024 * 1024) as server:
        yield server


@pytest.fixture(scope="session")
def zookeeper_server_default_limits() -> Iterator[str]:
    """A real ZooKeeper with its default ~1 MB request limit (jute.maxbuffer)."""
    with running_zookeeper(None) as server:
        yield server


#: Every store-contract test on each store; on ZooKeeper in make test only (make test-fast keeps the tests
#: written for ZooKeeper itself: its transactions, request limit, log pruning, the CLI on zk://).
STORE_KINDS = ["memory", "sqlite", pytest.param("zookeeper", marks=[pytest.mark.zookeeper, pytest.mark.slow])]


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def store_url(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The URL of a fresh, empty catalog of the parametrized kind."""
    if store_kind == "memory":
        return "memory://"
    if store_kind == "sqlite":
        return "sqlite:///" + str(tmp_path / "c.db")
    server = request.getfixturevalue("zookeeper_server")
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name)[:60]
    return f"zk://{server}/boreas-test/{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def store(store_url: str) -> Iterator[CatalogStore]:
    """A fresh, empty store of every kind (memory, sqlite, zookeeper)."""
    from boreas.catalog.store import open_store  # here, so a broken store breaks only its tests

    s = open_store(store_url)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def shared_store_url(store_kind: str, store_url: str) -> str:
    """The ``store`` fixture's URL, for a second store object or another process
    to open the SAME catalog; skips for memory://, which is private to one object."""
    if store_kind == "memory":
        pytest.skip("a memory:// catalog is private to one store object")
    return store_url


@pytest.fixture
def cluster_factory(tmp_path: Path, request: pytest.FixtureRequest):
    """Make :class:`support.cluster.Cluster` objects (real processes); all are stopped at the end.

    ``make("sqlite")`` uses an embedded catalog file, ``make("zookeeper")`` the
    session's ZooKeeper server with a fresh chroot.
    """
    from support.cluster import Cluster

    made: list[Cluster] = []

    def make(store: str = "sqlite", pending_timeout: float = 30.0, snapshot_interval: float = 0.0,
             failover_after: float = 0.0) -> Cluster:
        workdir = tmp_path / f"cluster{len(made)}"
        workdir.mkdir()
        if store == "sqlite":
            url = "sqlite:///" + str(workdir / "catalog.db")
        else:
            server = request.getfixturevalue("zookeeper_server")
            url = f"zk://{server}/boreas-cluster/{uuid.uuid4().hex[:12]}"
        cluster = Cluster(workdir, url, pending_timeout, snapshot_interval, failover_after)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.close()


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole run: 2 threads, a failed task retried up to 3 times.

    ``local[2,4]`` rather than ``local[2]`` because plain local mode never
    retries a task, and the Spark tests force retries.  The workers run this
    interpreter (``PYSPARK_PYTHON``), which has Boreas installed.
    """
    import os

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2,4]").appName("boreas-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
