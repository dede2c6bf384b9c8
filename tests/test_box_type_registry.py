"""One explicit box-type registry (issue 15 item 22): built in one place, passed to the Head,
validation and nodes; importing a module registers nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

EMBEDDED_HEAD = """
import asyncio
from boreas.catalog import read_document
from boreas.head.service import HeadService

async def main():
    head = HeadService("memory://", token=None, snapshot_interval=0)
    await head.start("127.0.0.1", 0)
    try:
        doc = read_document(open({path!r}).read(), "tpch_q3.xml")
        submission = await head.submit([doc])
        await head.caught_up(submission.version)
        print("committed", submission.version, sorted(head.catalog.boxes))
    finally:
        await head.close()

asyncio.run(main())
"""


def test_a_head_embedded_in_a_program_accepts_m3_boxes_without_the_cli():
    """A fresh interpreter that never imports boreas.cli or boreas.node: the Head still knows m3."""
    code = EMBEDDED_HEAD.format(path=str(ROOT / "examples" / "xml" / "tpch_q3.xml"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "committed 1 ['q3']" in done.stdout


def test_importing_modules_registers_nothing_and_the_registry_is_a_value():
    import boreas.cli.main  # noqa: F401  (once imported for its side effect)
    import boreas.node.operators  # noqa: F401
    from boreas.catalog.boxtypes import builtin_registry
    from boreas.m3.boxtype import M3_BOX_TYPE, box_types

    assert builtin_registry().get("m3") is None  # the catalog's own types only, whatever was imported
    full = box_types()
    assert full.get("m3") is M3_BOX_TYPE and full is not box_types()
    assert set(full.names()) == set(builtin_registry().names()) | {"m3"}


def test_the_head_and_the_nodes_are_given_their_registry():
    from boreas.catalog.boxtypes import builtin_registry
    from boreas.head.service import HeadService
    from boreas.node.dataflow import Dataflow
    from boreas.node.service import NodeService

    plain = builtin_registry()
    assert HeadService("memory://", None, box_types=plain).box_types is plain
    assert Dataflow("localhost:1", None, "s", box_types=plain).box_types is plain
    assert NodeService("localhost:1", None, None).dataflow.box_types.get("m3") is not None
