"""A global component's full copy, assembled from the Head's parts, is the Head's catalog (regional/full_copy.py)."""

from __future__ import annotations

import pytest
from boreas.catalog import Catalog, read_document
from boreas.catalog.diagnostics import ValidationFailed
from boreas.catalog.model import Node
from boreas.catalog.submission import plan_submission
from boreas.catalog.updates import update_document
from boreas.head.catalog_copy import COPY_CHUNK, CatalogCopies
from boreas.regional.full_copy import CopyAssembly, read_head_update
from support.bench import bench_importable


@pytest.fixture
def bench_catalog(monkeypatch):
    yield from bench_importable(monkeypatch, ("catalog",))


def _head_catalog(boxes: int, nodes: int = 4) -> Catalog:
    import catalog as bench  # bench/catalog.py's generator

    app, dep = bench.generate(boxes, nodes)
    planned = plan_submission(Catalog(), [read_document(app, "app.xml"), read_document(dep, "dep.xml")])
    planned.catalog.version = 12
    return planned.catalog


def _assemble(documents: tuple[str, ...]) -> Catalog | None:
    assembly, result = CopyAssembly(), None
    for text in documents:
        result = assembly.take(read_head_update(text.encode()))
    return result


@pytest.mark.parametrize("boxes", [0, 30, pytest.param(COPY_CHUNK + 100, marks=pytest.mark.slow)])
def test_the_assembled_copy_is_the_heads_catalog(bench_catalog, boxes):
    head = _head_catalog(boxes) if boxes else Catalog(version=12)
    copy = CatalogCopies(lambda: head, origin="head").full_copy()
    assert (len(copy.documents) > 1) == (boxes > COPY_CHUNK)
    got = _assemble(copy.documents)
    assert got == head
    assert got.version == 12
    assert len(got.boxes) == boxes


def _part(index: int, parts: int, endpoint: str, copy: str = "v3") -> str:
    return update_document([Node(endpoint)], version=3, copy=copy, part=index, parts=parts)


def test_a_part_of_an_abandoned_copy_is_ignored_and_a_new_copy_starts_afresh():
    assembly = CopyAssembly()
    assert assembly.take(read_head_update(_part(1, 2, "a:1", copy="v2"))) is None
    assert assembly.take(read_head_update(_part(1, 2, "b:1"))) is None  # a newer copy: v2 abandoned
    assert assembly.take(read_head_update(_part(2, 2, "c:1", copy="v2"))) is None
    done = assembly.take(read_head_update(_part(2, 2, "d:1")))
    assert done is not None and sorted(done.nodes) == ["b:1", "d:1"]


def test_a_copy_without_its_first_part_gives_nothing():
    assert CopyAssembly().take(read_head_update(_part(2, 2, "a:1"))) is None


def test_a_broken_part_is_refused_with_its_line():
    text = _part(1, 1, "a:1").replace("<node", "\n<node").replace("/>", ">", 1)
    with pytest.raises(ValidationFailed) as failed:
        read_head_update(text)
    assert failed.value.diagnostics[0].line is not None
    assert "malformed XML" in failed.value.diagnostics[0].reason


def test_a_part_that_does_not_decode_is_refused_naming_the_box():
    box = ('<box name="f" type="filter" node=":15001"><in stream="a"/><out stream="b"/>'
           '<parameter name="expression.0" value="true"/><parameter name="expression.0" value="false"/></box>')
    text = f'<update version="3" copy="v3" part="1" parts="1">\n{box}\n</update>'
    with pytest.raises(ValidationFailed) as failed:
        read_head_update(text)
    problem = failed.value.diagnostics[0]
    assert problem.line == 2
    assert "box 'f' sets parameter 'expression.0' twice" in problem.reason


def test_node_endpoints_are_normalised_in_every_box():
    boxes = "".join(f'<box name="f{i}" type="filter" node=":15001"><in stream="s{i}"/><out stream="t{i}"/>'
                    f'<parameter name="expression.0" value="true"/></box>' for i in range(3))
    doc = read_head_update(f'<update version="3" copy="v3" part="1" parts="1">{boxes}</update>')
    assert [box.node for box in doc.items] == ["localhost:15001"] * 3
