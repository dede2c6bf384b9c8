"""A durable node's local catalog on disk (node/recovery/catalog_store.py): a change appends what it wrote,
a restart replays it over the compacted catalog.xml; torn tails, a compaction cut short, adoption's read."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from boreas.catalog.document_model import Delete, Modify, Move, Update
from boreas.catalog.model import Box, Catalog, InPort, Input, Node, Schema
from boreas.catalog.replicate import catalog_items
from boreas.catalog.updates import update_document
from boreas.node.adopt import AdoptionRefused, open_failed
from boreas.node.local_catalog import LocalCatalog
from boreas.node.recovery.catalog_store import CATALOG, LOG, CatalogStore
from boreas.node.recovery.durability import Durability

NODES = ("localhost:15001", "localhost:15002")


def text(catalog: Catalog | None) -> str:
    """A catalog as one document (equal catalogs, equal texts), its version included."""
    catalog = catalog or Catalog()
    return update_document(catalog_items(catalog), version=catalog.version)


def box(name: str, node: str, threshold: int = 1) -> Box:
    return Box(name, "filter", (InPort("S"),), (f"O_{name}",), (("expression.0", f"x > {threshold}"),), node=node)


def random_changes(rng: random.Random, count: int) -> list[list]:
    """``count`` update item lists a node could be sent: declarations, modifies, moves, deletes."""
    held: set[str] = set()
    changes: list[list] = [[Schema("T", ()), Input("S", "T"), *(Node(n) for n in NODES)]]
    for i in range(count):
        choice = rng.random()
        if not held or choice < 0.4:
            name = f"b{i}"
            held.add(name)
            changes.append([box(name, rng.choice(NODES), i)])
        elif choice < 0.6:
            changes.append([Modify((("expression.0", f"x > {i}"),), box=rng.choice(sorted(held)))])
        elif choice < 0.8:
            changes.append([Move(rng.choice(NODES), box=rng.choice(sorted(held)))])
        else:
            name = rng.choice(sorted(held))
            held.discard(name)
            changes.append([Delete(box=name)])
    return changes


def applied(local: LocalCatalog, items: list, rng: random.Random) -> Catalog:
    """Apply one change as a node does (a version that sometimes stays, as a node's own changes keep it)."""
    version = local.version + (rng.random() < 0.7)
    return local.apply(Update("test", version, "test", items=items))


@pytest.mark.parametrize("seed", range(6))
def test_restart_after_random_changes_gives_the_live_catalog(tmp_path, seed):
    """After every change (some saved one at a time, some in groups), a store opened afresh on the directory
    loads exactly the live catalog; small bounds make compactions happen among the appends."""
    rng = random.Random(seed)
    local = LocalCatalog("localhost:15001")
    local.keep_changes()
    store = CatalogStore(tmp_path, fsync=False, compact_records=7, compact_min_bytes=2_000)
    store.load()
    pending = 0
    for items in random_changes(rng, 60):
        applied(local, items, rng)
        pending += 1
        if pending >= rng.choice((1, 1, 3)):
            store.append(local.take_changes(), local.catalog)
            pending = 0
            assert text(CatalogStore(tmp_path, writable=False).load()) == text(local.catalog)
    store.append(local.take_changes(), local.catalog)
    assert store.compactions > 0
    reopened = CatalogStore(tmp_path)
    assert text(reopened.load()) == text(local.catalog)
    applied(local, [box("late", NODES[0])], rng)  # a reopened store goes on appending where it was
    reopened.append(local.take_changes(), local.catalog)
    assert text(CatalogStore(tmp_path).load()) == text(local.catalog)


def test_a_one_box_change_appends_what_it_wrote_not_the_catalog(tmp_path):
    """At 500 boxes, a one-box change leaves catalog.xml as it was and appends one small record."""
    local = LocalCatalog("localhost:15001")
    local.keep_changes()
    local.apply(Update("test", 1, "test", items=[Schema("T", ()), Input("S", "T"), Node(NODES[0]),
                                                  *(box(f"b{i}", NODES[0]) for i in range(500))]))
    store = CatalogStore(tmp_path)
    store.load()
    local.take_changes()
    store.compact(local.catalog)  # as a node's log compacts once it is larger than catalog.xml
    before = (tmp_path / CATALOG).stat()
    size = (tmp_path / LOG).stat().st_size
    local.apply(Update("test", 2, "test", items=[Modify((("expression.0", "x > 7"),), box="b250")]))
    store.append(local.take_changes(), local.catalog)
    after = (tmp_path / CATALOG).stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    grown = (tmp_path / LOG).stat().st_size - size
    assert 0 < grown < 600 < before.st_size // 50
    assert text(CatalogStore(tmp_path).load()) == text(local.catalog)


def _two_states(tmp_path: Path) -> tuple[CatalogStore, LocalCatalog, str]:
    """A store holding two changes; returns it, the live catalog, and the text after the first change."""
    local = LocalCatalog("localhost:15001")
    local.keep_changes()
    store = CatalogStore(tmp_path, fsync=False)
    store.load()
    local.apply(Update("test", 1, "test", items=[Schema("T", ()), Input("S", "T"), Node(NODES[0]),
                                                  box("a", NODES[0])]))
    store.append(local.take_changes(), local.catalog)
    first = text(local.catalog)
    local.apply(Update("test", 2, "test", items=[box("b", NODES[0])]))
    store.append(local.take_changes(), local.catalog)
    return store, local, first


@pytest.mark.parametrize("cut", [1, 5, 9, 30])
def test_torn_last_record_is_ignored_and_cut_before_the_next(tmp_path, cut, caplog):
    """A kill -9 in an append leaves part of the last record: the catalog before it loads, the tail is cut
    off, and the next change is readable after it (not lost behind the garbage)."""
    _, local, first = _two_states(tmp_path)
    path = tmp_path / LOG
    path.write_bytes(path.read_bytes()[:-cut])
    reader = CatalogStore(tmp_path, writable=False)
    assert text(reader.load()) == first
    assert "unreadable" in caplog.text
    store = CatalogStore(tmp_path, fsync=False)
    assert text(store.load()) == first
    again = LocalCatalog("localhost:15001")
    again.keep_changes()
    again.restore(store.load())
    again.apply(Update("test", 3, "test", items=[box("c", NODES[0])]))
    store.append(again.take_changes(), again.catalog)
    loaded = CatalogStore(tmp_path).load()
    assert text(loaded) == text(again.catalog) and set(loaded.boxes) == {"a", "c"}


def test_corrupt_record_ends_the_changes(tmp_path):
    """A flipped byte in the last record (a CRC mismatch): the changes end before it, none half-applied."""
    _, _, first = _two_states(tmp_path)
    path = tmp_path / LOG
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    assert text(CatalogStore(tmp_path).load()) == first


def test_compaction_killed_between_its_two_writes(tmp_path):
    """catalog.xml replaced but the log not yet: the old log no longer follows it and is ignored (its changes
    are in the new catalog.xml; applying them again would fail or double them)."""
    store, local, _ = _two_states(tmp_path)
    old_log = (tmp_path / LOG).read_bytes()
    local.apply(Update("test", 3, "test", items=[Delete(box="a")]))
    store.compact(local.catalog)
    local.take_changes()  # (in the compaction)
    (tmp_path / LOG).write_bytes(old_log)  # as if killed before the log was replaced
    reopened = CatalogStore(tmp_path, fsync=False)
    assert text(reopened.load()) == text(local.catalog)
    local.apply(Update("test", 4, "test", items=[box("d", NODES[0])]))
    reopened.append(local.take_changes(), local.catalog)
    assert text(CatalogStore(tmp_path).load()) == text(local.catalog)


def test_a_compaction_of_the_same_catalog_killed_between_its_writes_brings_nothing_back(tmp_path):
    """The node's own changes net out (a node added, then deleted, the version kept): the compaction writes
    the catalog the last one wrote; killed before the log is replaced, the old log must not follow it."""
    store = CatalogStore(tmp_path, fsync=False, compact_records=1)
    local = LocalCatalog("localhost:15001")
    local.keep_changes()
    store.load()
    local.apply(Update("test", 0, "test", items=[Node("n:1")]))
    store.append(local.take_changes(), local.catalog)
    old_log = (tmp_path / LOG).read_bytes()
    local.apply(Update("test", 0, "test", items=[Delete(node="n:1")]))
    store.append(local.take_changes(), local.catalog)  # past compact_records: catalog.xml written whole
    (tmp_path / LOG).write_bytes(old_log)  # as if killed before the log was replaced
    assert text(CatalogStore(tmp_path).load()) == text(local.catalog)


def test_a_failed_write_is_made_good_by_the_next_save(tmp_path, monkeypatch):
    """A disk full while appending: the change is in no record and part of one may be in the file; the next
    save (even one with no change of its own, as the Head's resent update is) writes the catalog whole."""
    store, local, _ = _two_states(tmp_path)
    local.apply(Update("test", 3, "test", items=[box("d", NODES[0])]))
    real_open = Path.open

    def full(self, mode="r", *args, **kwargs):
        if self.name == LOG and "a" in mode:
            f = real_open(self, mode, *args, **kwargs)
            f.write(b"\x00\x01torn")  # part of a record reached the file
            f.close()
            raise OSError(28, "No space left on device")
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", full)
    with pytest.raises(OSError):
        store.append(local.take_changes(), local.catalog)
    monkeypatch.setattr(Path, "open", real_open)
    store.append(local.take_changes(), local.catalog)  # the resent update: nothing new to log
    assert text(CatalogStore(tmp_path).load()) == text(local.catalog)
    local.apply(Update("test", 4, "test", items=[Modify((("expression.0", "x > 9"),), box="d")]))
    store.append(local.take_changes(), local.catalog)
    assert text(CatalogStore(tmp_path).load()) == text(local.catalog)


def test_a_catalog_xml_of_before_the_log_loads_with_a_new_log(tmp_path):
    """A data directory from before the log (catalog.xml only) loads, and appends go on from it."""
    catalog = Catalog(version=5, nodes={NODES[0]: Node(NODES[0])})
    (tmp_path / CATALOG).write_text(text(catalog))
    store = CatalogStore(tmp_path, fsync=False)
    assert text(store.load()) == text(catalog)
    local = LocalCatalog(NODES[0])
    local.keep_changes()
    local.restore(catalog)
    local.apply(Update("test", 6, "test", items=[Node(NODES[1])]))
    store.append(local.take_changes(), local.catalog)
    assert set(CatalogStore(tmp_path).load().nodes) == set(NODES)


def test_read_only_store_changes_nothing(tmp_path):
    """A reader of another node's directory (adoption) neither cuts a torn tail nor starts a log."""
    _two_states(tmp_path)
    path = tmp_path / LOG
    torn = path.read_bytes()[:-4]
    path.write_bytes(torn)
    CatalogStore(tmp_path, writable=False).load()
    assert path.read_bytes() == torn
    empty = tmp_path / "empty"
    empty.mkdir()
    assert CatalogStore(empty, writable=False).load() is None
    assert list(empty.iterdir()) == []


def test_local_catalog_keeps_changes_only_when_asked():
    """A node without --data-dir keeps no changes (nothing to save); one with it gets each change's items."""
    plain = LocalCatalog(NODES[0])
    plain.apply(Update("test", 1, "test", items=[Node(NODES[0])]))
    assert plain.changes is None and plain.take_changes() == []
    kept = LocalCatalog(NODES[0])
    kept.keep_changes()
    kept.apply(Update("test", 1, "test", items=[Node(NODES[0]), box("a", NODES[0])]))
    kept.apply(Update("test", 1, "test", items=[Move(NODES[1], box="a")]))
    changes = kept.take_changes()
    assert [version for _, version in changes] == [1, 1]
    assert changes[1][0] == [box("a", NODES[1])]  # the move as the box it wrote
    assert kept.take_changes() == []


async def test_durability_saves_and_adoption_reads_the_log(tmp_path):
    """Durability's save (a node's catalog_changed) and the adopter's read of a failed node's directory
    (node/adopt.py, docs/cumulus.md §6.3) both see the changes in the log, not only catalog.xml."""
    durable = Durability(tmp_path, fsync=False)
    await durable.open()
    try:
        assert durable.load_catalog() is None
        local = LocalCatalog(NODES[0])
        local.keep_changes()
        local.apply(Update("test", 1, "test", items=[Schema("T", ()), Input("S", "T"), Node(NODES[0]),
                                                      box("a", NODES[0])]))
        durable.save_catalog(local.take_changes(), local.catalog)
        local.apply(Update("test", 2, "test", items=[Modify((("expression.0", "x > 3"),), box="a")]))
        durable.save_catalog(local.take_changes(), local.catalog)
        assert durable.status()["catalog_log"]["records"] >= 1
        durable.save_identity("sender-1", {})
    finally:
        await durable.close()
    failed = open_failed(NODES[0], tmp_path, None)
    assert text(failed.catalog) == text(local.catalog)
    assert failed.catalog.boxes["a"].params == (("expression.0", "x > 3"),)
    (tmp_path / LOG).write_bytes(b"\x00\x00\x00\x10garbage-not-a-record")
    assert text(open_failed(NODES[0], tmp_path, None).catalog) != text(local.catalog)  # catalog.xml alone
    (tmp_path / CATALOG).write_text("<update><box")
    with pytest.raises(AdoptionRefused):
        open_failed(NODES[0], tmp_path, None)
    assert json.loads((tmp_path / "identity.json").read_text())["sender"] == "sender-1"


def test_new_producer_ids_are_saved_once_an_update_not_once_a_box():
    """A durable node saves its identity (every box's producer id) when an update made new ids: once for the
    update, however many boxes it built (once a box rewrote the whole file per box: 20,000 writes for a
    20,000-box slice), and not at all when it made none."""
    from boreas.node.box_state import BoxStates
    from support.operators import T

    saves: list[dict[str, str]] = []
    states = BoxStates()
    states.on_new_box_id = lambda: saves.append(dict(states.box_ids))
    boxes = {f"b{i}": Box(f"b{i}", "filter", (InPort("Packet"),), (f"O{i}",), (("expression.0", "true"),))
             for i in range(50)}
    schemas = {"Packet": T, **{f"O{i}": T for i in range(51)}}
    states.follow(boxes, schemas)
    assert len(saves) == 1 and set(saves[0]) == set(boxes)  # every id made is in the one save
    states.follow(boxes, schemas)
    assert len(saves) == 1  # nothing new: nothing saved
    states.follow({**boxes, "late": Box("late", "filter", (InPort("Packet"),), ("O50",), (("expression.0", "true"),))},
                  schemas)
    assert len(saves) == 2 and "late" in saves[1]
