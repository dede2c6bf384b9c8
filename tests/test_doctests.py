"""Run the doctest examples in the library's docstrings (they are documentation that must stay true)."""

import doctest
import importlib

import pytest

MODULES = [
    "boreas.catalog.diagnostics",
    "boreas.catalog.endpoints",
    "boreas.catalog.xmlsafe",
    "boreas.catalog.xmlcodec",
    "boreas.catalog.expressions",
    "boreas.catalog.elements",
    "boreas.catalog.documents",
    "boreas.catalog.export",
    "boreas.catalog.updates",
    "boreas.catalog.replicate",
    "boreas.catalog.slices",
    "boreas.wire.backoff",
    "boreas.wire.sequencing",
    "boreas.wire.addressing",
    "boreas.wire.auth",
    "boreas.head.membership",
    "boreas.node.local_catalog",
    "boreas.node.handover",
    "boreas.node.adopt",
    "boreas.node.box_state",
    "boreas.node.cumulus.part",
    "boreas.node.cumulus.leader",
    "boreas.node.cumulus.messages",
    "boreas.client.query",
    "boreas.client.publisher",
    "boreas.head.failover",
    "boreas.wire.sender",
    "boreas.wire.supervisor",
    "boreas.node.recovery.records",
    "boreas.cli.data",
    "boreas.node.recovery.log",
    "boreas.node.recovery.snapshots",
    "boreas.regional.catalog",
    "boreas.m3.errors",
    "boreas.m3.ast",
    "boreas.m3.syntax",
    "boreas.m3.printer",
    "boreas.m3.check",
    "boreas.m3.calculus",
    "boreas.m3.query",
    "boreas.m3.compiler.frontend",
    "boreas.m3.compiler.normalize",
    "boreas.m3.compiler.delta",
    "boreas.m3.compiler.simplify",
    "boreas.m3.compiler.materialize",
    "boreas.m3.compiler.triggers",
    "boreas.m3.compiler.pipeline",
    "boreas.m3.runtime.maps",
    "boreas.m3.runtime.codegen",
    "boreas.m3.runtime.initial",
    "boreas.m3.runtime.program",
    "boreas.m3.cumulus.hashing",
    "boreas.m3.cumulus.layout",
    "boreas.m3.cumulus.placement",
    "boreas.m3.cumulus.plan",
    "boreas.m3.cumulus.roles",
    "boreas.m3.cumulus.member",
    "boreas.m3.cumulus.stable",
    "boreas.m3.cumulus.relayout",
    "boreas.m3.cumulus.definitions",
    "boreas.m3.cumulus",
    "boreas.node.cumulus.precopy",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no doctest examples"
    assert result.failed == 0
