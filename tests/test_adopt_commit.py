"""A Head follows its own submission's commit by taking the plan's boxes, not decoding the commit again (issue 37).

catalog/elements.py's ``adopt_commit`` must give exactly what
``apply_commit`` (decoding every changed element's text) gives: the same
elements, keys in the same order, every box's origin the catalog's and its
application kept.  Checked over a sequence of submissions that adds,
places, replaces and removes boxes, with parameters, outputs, placements and
applications; then an in-process Head (memory store) is checked to take
that path for a submission and to decode a commit it did not plan (a move).
"""

from __future__ import annotations

import time
from dataclasses import replace

from boreas.catalog import Catalog, open_store, read_document
from boreas.catalog.diagnostics import CATALOG
from boreas.catalog.elements import KIND_TO_DICT, adopt_commit, apply_commit, diff
from boreas.catalog.submission import apply_submission
from boreas.head import commit_follower
from boreas.head import service as head_service
from boreas.head.service import HeadService

SCHEMA = ('<schema name="R"><field name="k" type="int"/><field name="value" type="double"/></schema>'
          '<input stream="in" schema="R"/>')


def _box(name: str, source: str, value: str = "0.5") -> str:
    return (f'<box name="{name}" type="filter"><in stream="{source}"/><out stream="{name}_t"/><out stream="{name}_f"/>'
            f'<parameter name="expression.0" value="value &gt; {value}"/>'
            f'<parameter name="pass-on-false-port" value="1"/></box>')


def _app(body: str) -> str:
    return f"<borealis>{body}</borealis>"


def _dep(*pairs: tuple[str, str]) -> str:
    return "<deploy>" + "".join(f'<node endpoint="{node}" query="{query}"/>' for node, query in pairs) + "</deploy>"


#: (documents, replacing, file name: the application's): a schema, boxes, placements, an application and its
#: new version (a box changed, one removed), an output
STEPS = [
    ([_app(SCHEMA + _box("a", "in") + _box("b", "a_t"))], False, "base"),
    ([_app(_box("c", "b_t")), _dep(("n1:1", "a b c"))], False, "more"),
    ([_app(_box("d", "in") + _box("e", "d_f"))], False, "appx"),
    ([_app(_box("d", "in", "0.75"))], True, "appx"),
    ([_app(_box("g", "c_t") + '<output stream="g_t" schema="R"/>')], False, "last"),
]


def _described(catalog: Catalog) -> dict[str, list[tuple[str, str, object, str]]]:
    """Every element with its key, its value, its origin and its application, in the catalog's order."""
    return {attr: [(key, repr(obj), getattr(obj, "origin", None), getattr(obj, "app", None))
                   for key, obj in getattr(catalog, attr).items()] for attr, _ in KIND_TO_DICT.values()}


def test_adopting_a_planned_commit_equals_decoding_it(tmp_path):
    with open_store(f"sqlite:///{tmp_path}/c.db") as store:
        catalog = Catalog()
        for texts, replacing, name in STEPS:
            documents = [read_document(text, f"{name}.xml" if i == 0 else f"{name}_deploy.xml")
                         for i, text in enumerate(texts)]
            applied = apply_submission(store, documents, base=catalog, replacing=replacing)
            assert applied.before is catalog
            decoded = apply_commit(catalog, applied.commit)
            adopted = adopt_commit(catalog, applied.commit, applied.after)
            assert adopted == decoded and adopted.version == decoded.version
            assert _described(adopted) == _described(decoded)
            assert all(box.origin is CATALOG for box in adopted.boxes.values())
            assert any(box.origin is not CATALOG for box in applied.after.boxes.values()) or not texts
            catalog = adopted
        assert list(catalog.boxes) == list(decoded.boxes) and "e" not in catalog.boxes  # (the new version's)
        assert catalog.boxes["d"].param("expression.0") == "value > 0.75" and catalog.boxes["d"].app == "appx"


async def test_a_head_takes_its_plans_boxes_and_decodes_what_it_did_not_plan(monkeypatch):
    decoded: list[int] = []
    real = commit_follower.apply_commit

    def counting(catalog, commit):
        decoded.append(commit.version)
        return real(catalog, commit)

    monkeypatch.setattr(commit_follower, "apply_commit", counting)
    head = HeadService("memory://", token=None, snapshot_interval=0)
    await head.start("127.0.0.1", 0)
    try:
        for node in ("n1:1", "n2:2"):  # (registered, never answering: the Head's pushes to them fail aside)
            head.heartbeat(node, "incarnation", 0)
        for texts, replacing, name in STEPS:
            documents = [read_document(text, f"{name}.xml" if i == 0 else f"{name}_deploy.xml")
                         for i, text in enumerate(texts)]
            submission = await head.submit(documents, replacing=replacing)
            await head.caught_up(submission.version)
        assert decoded == [] and head.catalog.version == submission.version
        assert all(box.origin is CATALOG for box in head.catalog.boxes.values())
        assert _described(head.catalog) == _described(head.commits.read_full())  # (what a new Head reads)

        def move_c(catalog):  # a commit the Head makes without a plan (as a move does)
            after = catalog.copy()
            after.boxes["c"] = replace(after.boxes["c"], node="n2:2")
            return diff(catalog, after)

        version = await head.commit(move_c)
        await head.caught_up(version)
        assert decoded == [version] and head.catalog.boxes["c"].node == "n2:2"
        assert _described(head.catalog) == _described(head.commits.read_full())
    finally:
        await head.close()


async def test_a_commit_the_watch_brings_before_its_writer_returns_is_still_adopted(monkeypatch):
    """The store's watch can bring the Head's own commit before the submitting coroutine, back from its
    thread, hands over its plan: the follower waits for the write to end, so the plan is still adopted (it
    was decoded so under load).  The write is held here past the watch's delivery to make that the order."""
    decoded: list[int] = []
    real_apply, real_submission = commit_follower.apply_commit, head_service.apply_submission

    def counting(catalog, commit):
        decoded.append(commit.version)
        return real_apply(catalog, commit)

    def slow_submission(*args, **kwargs):  # (on the writer's thread, after the store's write: the watch fires)
        applied = real_submission(*args, **kwargs)
        time.sleep(0.3)
        return applied

    monkeypatch.setattr(commit_follower, "apply_commit", counting)
    monkeypatch.setattr(commit_follower, "WRITE_WAIT", 30.0)  # (a loaded machine's scheduling is no part of it)
    monkeypatch.setattr(head_service, "apply_submission", slow_submission)
    head = HeadService("memory://", token=None, snapshot_interval=0)
    await head.start("127.0.0.1", 0)
    try:
        for node in ("n1:1", "n2:2"):
            head.heartbeat(node, "incarnation", 0)
        for texts, replacing, name in STEPS[:3]:
            documents = [read_document(text, f"{name}.xml" if i == 0 else f"{name}_deploy.xml")
                         for i, text in enumerate(texts)]
            submission = await head.submit(documents, replacing=replacing)
            await head.caught_up(submission.version)
        assert decoded == [] and head.catalog.version == submission.version
        assert _described(head.catalog) == _described(head.commits.read_full())
    finally:
        await head.close()
