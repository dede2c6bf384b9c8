"""The Head's work costing the catalog's size gives the interpreter back to the event loop in pieces that do
not grow with the catalog (head/yielding.py, issue 37), and still makes the same bytes."""

from __future__ import annotations

import threading

import msgspec
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from boreas.catalog import Catalog, read_document
from boreas.catalog import index_codec
from boreas.catalog.index import CatalogIndex
from boreas.catalog.submission import plan_submission
from boreas.head.catalog_copy import CatalogCopies
from boreas.head.yielding import Foreground, Yielder
from support.bench import bench_importable
from test_catalog_reads import planned


@pytest.fixture
def bench_catalog(monkeypatch):
    yield from bench_importable(monkeypatch, ("catalog",))


def _catalog(boxes: int) -> Catalog:
    import catalog as bench  # bench/catalog.py's generator

    app, dep = bench.generate(boxes, 4)
    planned = plan_submission(Catalog(), [read_document(app, "app.xml"), read_document(dep, "dep.xml")])
    planned.catalog.version = 7
    return planned.catalog


class Gaps:
    """A checkpoint that counts its calls and the largest number of ``work`` units done between two calls."""

    def __init__(self) -> None:
        self.calls = self.since = self.widest = 0

    def __call__(self) -> None:
        self.calls += 1
        self.since = 0

    def work(self, units: int = 1) -> None:
        self.since += units
        self.widest = max(self.widest, self.since)


def test_the_index_is_encoded_with_a_checkpoint_per_entry_at_any_size(bench_catalog, monkeypatch) -> None:
    """At 40 and 400 boxes: the msgpack encoder's calls between checkpoints hold at most ENCODE_CHUNK
    entries, and there is a checkpoint per index entry; the bytes are those encoded without one."""
    encode = msgspec.msgpack.encode
    for boxes in (40, 400):
        index = CatalogIndex.build(_catalog(boxes))
        gaps = Gaps()
        monkeypatch.setattr(index_codec, "ENCODE_CHUNK", 16)
        monkeypatch.setattr(index_codec.msgspec.msgpack, "encode",
                            lambda obj: (gaps.work(len(obj) if isinstance(obj, list) else 1), encode(obj))[1])
        chunked = index_codec.encode_index(index, gaps)
        monkeypatch.undo()
        entries = len(index.refs) + len(index.states) + len(index.typings) + len(index.stream_schemas)
        assert entries > boxes and gaps.calls >= entries
        assert gaps.widest <= 16 + 1  # (+1: the last, whole call: the three sections' envelope)
        assert chunked == index_codec.encode_index(index)
        assert index_codec.decode_index(chunked, index.catalog, index.registry).typings == index.typings


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 40, 65535, 65536, 70001])
def test_a_list_encoded_in_chunks_is_msgpacks_encoding_of_it(n, monkeypatch) -> None:
    monkeypatch.setattr(index_codec, "ENCODE_CHUNK", 16 if n < 100 else 4096)
    items = [[i, "x" * (i % 5)] for i in range(n)]
    ticks = []
    assert index_codec._encode_list(items, lambda: ticks.append(1)) == msgspec.msgpack.encode(items)
    assert len(ticks) == -(-n // index_codec.ENCODE_CHUNK)


def test_a_copy_is_built_with_a_checkpoint_per_element_at_any_size(bench_catalog) -> None:
    """At 40 and 400 boxes: a checkpoint per element encoded (the encodings between two are one element's),
    and the same documents as a copy built with no checkpoint to speak of."""
    for boxes in (40, 400):
        catalog = _catalog(boxes)
        counted = Yielder(slice=float("inf"))  # counts its calls, never sleeps
        copies = CatalogCopies(lambda c=catalog: c, origin="head", yielder=counted)
        built = copies.serialize()
        assert copies.encoded >= boxes and counted.calls >= copies.encoded and counted.yields == 0
        assert built.document == CatalogCopies(lambda c=catalog: c, origin="head").serialize().document


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Waits(threading.Event):
    """The foreground's idle event, never set: records each wait's timeout, which passes on the clock."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock, self.timeouts = clock, []

    def wait(self, timeout: float | None = None) -> bool:
        self.timeouts.append(timeout)
        self.clock.now += timeout or 0.0
        return False


def test_the_yielder_sleeps_once_per_slice_and_waits_for_requests_up_to_its_patience() -> None:
    clock, slept = Clock(), []
    idle = Waits(clock)
    yielder = Yielder(idle, slice=0.002, pause=0.0002, patience=1.0, clock=clock, sleep=slept.append)
    yielder.start()
    for _ in range(10):  # ten checkpoints within one slice: none yields
        clock.now += 0.0001
        yielder()
    assert (yielder.calls, yielder.yields, slept) == (10, 0, [])
    clock.now += 0.002
    yielder()  # a slice passed: the GIL given up, and a request in flight waited for (all the patience)
    assert (yielder.yields, slept, idle.timeouts) == (1, [0.0002], [1.0])
    clock.now += 0.01
    yielder()  # the patience spent: it sleeps, and goes on beside the request
    assert (yielder.yields, idle.timeouts) == (2, [1.0])
    yielder.start()  # the next run waits again
    clock.now += 0.01
    yielder()
    assert idle.timeouts == [1.0, 1.0]


async def test_the_foreground_counts_requests_but_not_watches_long_polls_or_a_wait_for_the_work() -> None:
    foreground = Foreground()
    seen = []

    async def handler(request: web.Request) -> web.Response:
        seen.append((foreground.in_flight, foreground.idle.is_set()))
        with foreground.aside(request):
            seen.append((foreground.in_flight, foreground.idle.is_set()))
        return web.Response()

    await foreground.middleware(make_mocked_request("GET", "/nodes"), handler)
    await foreground.middleware(make_mocked_request("GET", "/submissions/3?after=1&wait=5"), handler)
    await foreground.middleware(make_mocked_request("GET", "/ui/feed", headers={"Upgrade": "websocket"}), handler)
    assert seen[:2] == [(1, False), (0, True)]
    assert seen[2:] == [(0, True), (0, True)] * 2  # (not counted, nor set aside)
    assert (foreground.in_flight, foreground.idle.is_set()) == (0, True)


async def test_a_build_a_reader_awaits_waits_for_no_other_request_the_copy_ahead_does() -> None:
    """``GET /catalog`` or a global component's copy awaiting the build: the build gives the GIL back but does
    not wait for an unrelated request's end (it would make the reader wait its patience); the copy built ahead,
    which nobody awaits, still waits for it."""
    catalog = planned(40)
    busy = threading.Event()  # a request in flight: never idle
    for wanted, waits in ((True, 0), (False, 1)):
        yielder = Yielder(busy, slice=0.0, pause=0.0, patience=0.05)
        copies = CatalogCopies(lambda c=catalog: c, origin="head", yielder=yielder)
        await copies.read(wanted=wanted)
        assert (yielder.waits > 0) == bool(waits) and yielder.yields > 0
        assert yielder.wanted == 0
