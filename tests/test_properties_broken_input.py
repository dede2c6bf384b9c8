"""Property tests: broken input fails cleanly.

Two families (the third, random valid topologies round-tripping, is
``test_properties.py``; they share the strategy in ``support/topologies.py``):

2. One random mutation of a valid pair (generated, or a real Borealis file)
   either still commits, or raises ``ValidationFailed`` with located reasons;
   never any other exception, and a refused submission leaves the store
   exactly as it was.
3. Random bytes, text and random trees of Borealis vocabulary given to
   ``read_document`` raise nothing but ``ValidationFailed``.

They are separate from the round trips because they test refusal, not
acceptance, and bring their own generators (mutations, vocabulary trees).

``BOREAS_PROPERTY_SCALE=20`` multiplies every example count for a deeper run.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from boreas.catalog import ValidationFailed, apply_submission, catalog_from_snapshot, open_store, read_document
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from lxml import etree
from support.property_scale import SETTINGS, examples
from support.topologies import topologies

ROOT = Path(__file__).parents[1]
DATA = ROOT / "tests" / "data" / "borealis"
EXAMPLES = ROOT / "examples" / "xml"


# =============================================================================
# 2. Mutations never crash and never half-commit
# =============================================================================

#: A valid catalog already in the store before each mutated submission.  Its
#: names are disjoint from the generated ones and the real files' ones, so an
#: unmutated submission still commits on top of it.
BACKGROUND_APP = """<borealis>
  <schema name="BgTuple"><field name="bg_x" type="int"/><field name="bg_s" type="string" size="4"/></schema>
  <input stream="BgIn" schema="BgTuple"/>
  <query name="bg_query">
    <box name="bg_box" type="filter"><in stream="BgIn"/><out stream="BgOut"/>
      <parameter name="expression.0" value="bg_x &gt; 0"/></box>
  </query>
  <output stream="BgOut" schema="BgTuple"/>
</borealis>"""
BACKGROUND_DEP = """<deploy>
  <node endpoint="bg-host:17000" query="bg_query"/>
  <region node="bg-host:17000" name="bg_region"/>
  <subscribe stream="BgOut" endpoint="bg-host:27000"/>
</deploy>"""
BACKGROUND_NAMES = ["BgTuple", "bg_x", "bg_s", "BgIn", "BgOut", "bg_query", "bg_box",
                    "bg-host:17000", "bg_region"]

#: (application, deployment, what must be committed first) from real Borealis files.
REAL_PAIRS = [
    (DATA / "connect_Connect.xml", DATA / "connect_ConnectDeploy.xml", None),
    (DATA / "connect_Connect1.xml", DATA / "connect_ConnectDeploy1.xml", None),
    (DATA / "deploy_Deploy.xml", DATA / "deploy_DeployDeploy.xml", None),
    (DATA / "deploy_Add.xml", DATA / "deploy_AddDeploy.xml",
     (DATA / "deploy_Deploy.xml", DATA / "deploy_DeployDeploy.xml")),
    (DATA / "move_Move.xml", DATA / "move_MoveDeploy.xml", None),
    (EXAMPLES / "packet_aggregate.xml", EXAMPLES / "packet_aggregate_deploy.xml", None),
    (EXAMPLES / "sensor_chain.xml", EXAMPLES / "sensor_chain_deploy.xml", None),
    (EXAMPLES / "trade_join.xml", EXAMPLES / "trade_join_deploy.xml", None),
]

_ATTR_NAMES = ["name", "stream", "schema", "type", "node", "endpoint", "query", "value", "size",
               "field", "table", "array", "boxes", "prefix", "gap", "start", "end",
               "connection_point_view", "update_queue", "queue_type", "key", "bogus"]
_TAGS = ["box", "in", "out", "parameter", "schema", "field", "input", "output", "query", "node",
         "region", "publish", "subscribe", "client", "table", "key", "type", "delete", "modify",
         "move", "unsubscribe", "replica_set", "connection_point_view", "size", "range",
         "connect", "global", "update", "borealis", "deploy", "frobnicate", "Box"]

#: Attribute values: printable text of any script, plus the characters that
#: matter to expressions, names and endpoints.
_VALUE_TEXT = st.text(
    st.one_of(st.characters(min_codepoint=0x20, max_codepoint=0x2FF),
              st.sampled_from(list("'\"<>&|:;[]()=!.-_ \t\n0123456789")),
              st.characters(min_codepoint=0x300, max_codepoint=0xD7FF),
              st.characters(min_codepoint=0xE000, max_codepoint=0x10FFFF,
                            exclude_characters="\ufffe\uffff")),
    max_size=12)


def _is_element(el) -> bool:
    return isinstance(el.tag, str)


@st.composite
def mutated(draw, app: str, dep: str, names: list[str]) -> tuple[str | bytes, str | bytes, str]:
    """The pair with one random mutation applied to one of the two documents."""
    which = draw(st.sampled_from(["app", "dep"]))
    text = app if which == "app" else dep
    kind = draw(st.sampled_from(["delete", "duplicate", "rename-attr", "value-random",
                                 "value-name", "value-empty", "insert-element", "truncate",
                                 "insert-bytes"]))
    result: str | bytes
    if kind == "truncate":
        result = text[: draw(st.integers(0, max(0, len(text) - 1)))]
    elif kind == "insert-bytes":
        data = text.encode()
        at = draw(st.integers(0, len(data)))
        result = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    else:
        parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
        root = etree.fromstring(text.encode(), parser)
        elements = [el for el in root.iter() if _is_element(el)]
        if kind in ("delete", "duplicate"):
            assume(len(elements) > 1)
            el = draw(st.sampled_from(elements[1:]))
            if kind == "delete":
                el.getparent().remove(el)
            else:
                el.addnext(copy.deepcopy(el))
        elif kind == "insert-element":
            parent = draw(st.sampled_from(elements))
            new = etree.Element(draw(st.sampled_from(_TAGS)))
            for attr in draw(st.lists(st.sampled_from(_ATTR_NAMES), max_size=3, unique=True)):
                new.set(attr, draw(st.one_of(st.sampled_from(names), _VALUE_TEXT)))
            parent.insert(draw(st.integers(0, len(parent))), new)
        else:
            with_attrs = [el for el in elements if el.attrib]
            assume(with_attrs)
            el = draw(st.sampled_from(with_attrs))
            attr = draw(st.sampled_from(sorted(el.attrib)))
            if kind == "rename-attr":
                value = el.attrib.pop(attr)
                el.set(draw(st.sampled_from(_ATTR_NAMES)), value)
            elif kind == "value-random":
                el.set(attr, draw(_VALUE_TEXT))
            elif kind == "value-name":
                el.set(attr, draw(st.sampled_from(names)))
            else:
                el.set(attr, "")
        result = etree.tostring(root, encoding="unicode")
    if which == "app":
        return result, dep, kind
    return app, result, kind


def _background_store(first: tuple[Path, Path] | None = None):
    store = open_store("memory://")
    apply_submission(store, [read_document(BACKGROUND_APP, "bg.xml"),
                             read_document(BACKGROUND_DEP, "bg_deploy.xml")])
    if first is not None:
        apply_submission(store, [read_document(first[0].read_bytes(), str(first[0])),
                                 read_document(first[1].read_bytes(), str(first[1]))])
    return store


def _check_submission_is_atomic(store, app: str | bytes, dep: str | bytes) -> None:
    before_version = store.version()
    before = store.snapshot()
    try:
        docs = [read_document(app, "app.xml"), read_document(dep, "deploy.xml")]
        applied = apply_submission(store, docs)
    except ValidationFailed as exc:
        assert exc.diagnostics, "ValidationFailed without diagnostics"
        for d in exc.diagnostics:
            assert d.reason and d.reason.strip(), f"diagnostic without a reason: {d!r}"
            assert d.file, f"diagnostic without a file: {d!r}"
            assert "\n" not in d.reason, f"reason is not one line: {d.reason!r}"
    else:
        # Committed exactly once, and the store reloads to what was applied.
        assert store.version() == before_version + 1
        assert applied.commit.version == before_version + 1
        assert catalog_from_snapshot(store.snapshot()) == applied.after
        return
    # Refused (or crashed): nothing changed.
    assert store.version() == before_version
    assert store.snapshot() == before


@pytest.mark.slow
@settings(max_examples=examples(250), **SETTINGS)
@given(st.data())
def test_mutated_generated_submission_commits_or_fails_cleanly(data):
    topo = data.draw(topologies())
    app, dep, _kind = data.draw(mutated(topo.app, topo.dep, topo.names + BACKGROUND_NAMES))
    with _background_store() as store:
        _check_submission_is_atomic(store, app, dep)


@settings(max_examples=examples(250), **SETTINGS)
@given(st.data())
def test_mutated_real_submission_commits_or_fails_cleanly(data):
    app_path, dep_path, first = data.draw(st.sampled_from(REAL_PAIRS))
    app, dep = app_path.read_text(), dep_path.read_text()
    names = sorted({v for text in (app, dep)
                    for el in etree.fromstring(text.encode()).iter() if _is_element(el)
                    for v in el.attrib.values()})
    app, dep, _kind = data.draw(mutated(app, dep, names + BACKGROUND_NAMES))
    with _background_store(first) as store:
        _check_submission_is_atomic(store, app, dep)


@pytest.mark.parametrize("app_path,dep_path,first", REAL_PAIRS,
                         ids=[p[0].stem for p in REAL_PAIRS])
def test_real_pairs_commit_on_top_of_background(app_path, dep_path, first):
    """The unmutated starting points of the mutation test do commit."""
    with _background_store(first) as store:
        version = store.version()
        applied = apply_submission(store, [read_document(app_path.read_bytes(), str(app_path)),
                                           read_document(dep_path.read_bytes(), str(dep_path))])
        assert applied.commit.version == version + 1
        assert catalog_from_snapshot(store.snapshot()) == applied.after


# =============================================================================
# 3. Random documents: read_document raises nothing but ValidationFailed
# =============================================================================


def _read_fails_cleanly(data: bytes | str) -> None:
    try:
        read_document(data, "random.xml")
    except ValidationFailed as exc:
        assert exc.diagnostics
        assert all(d.reason and d.file == "random.xml" for d in exc.diagnostics)
        assert all("\n" not in d.reason for d in exc.diagnostics)


@settings(max_examples=examples(200), **SETTINGS)
@given(st.binary(max_size=300))
def test_random_bytes_read_fails_cleanly(data: bytes):
    _read_fails_cleanly(data)


@settings(max_examples=examples(200), **SETTINGS)
@given(st.one_of(
    st.text(max_size=200),
    # near-XML: fragments of markup glued together
    st.lists(st.sampled_from(["<borealis>", "</borealis>", "<deploy>", "</deploy>", "<update>",
                              "</update>", "<box name='b' type='filter'>", "</box>",
                              "<in stream='A'/>", "<out stream='B'/>", "<!DOCTYPE borealis [",
                              "<!ENTITY e 'x'>", "]>", "&e;", "<?xml version='1.0'?>",
                              "<!-- c -->", "<![CDATA[x]]>", "\x00", "\ufeff", "&#0;", "&amp;",
                              '<node endpoint=":15000" query="b"/>', " ", "\n", "<", ">", "'",
                              '"', "=", "/"]),
             max_size=25).map("".join),
))
def test_random_text_read_fails_cleanly(text: str):
    _read_fails_cleanly(text)


_ROOT_CHILDREN = {
    "borealis": ["input", "output", "schema", "type", "box", "table", "query",
                 "connection_point_view", "delete", "modify"],
    "deploy": ["node", "region", "publish", "subscribe", "unsubscribe", "client", "replica_set",
               "move"],
    "update": ["input", "output", "schema", "box", "query", "delete", "modify", "node", "region",
               "publish", "subscribe", "unsubscribe", "client", "replica_set", "move", "connect",
               "disconnect", "global"],
}
_CHILDREN = {
    "box": ["in", "out", "parameter", "access"], "schema": ["field"],
    "query": ["box", "table", "schema", "input"], "table": ["key", "index", "parameter"],
    "connection_point_view": ["size", "range", "order", "parameter"], "modify": ["parameter"],
    "client": ["publish", "subscribe"], "replica_set": ["node"], "connect": ["box"],
}
_VOCAB_ATTRS = _ATTR_NAMES + ["version", "origin", "id", "port", "upstream", "global", "view",
                              "array", "tables"]
_VOCAB_VALUES = st.one_of(
    st.sampled_from(["", " ", "0", "1", "-1", "9" * 30, "x", "int", "string", "filter", "map",
                     "union", "aggregate", "join", ":15000", "host:0", "[::1]", "a b",
                     "expression.0", "x > 1", "'", "1=1", "count()", "VALUES", "\u00b2", "nan"]),
    _VALUE_TEXT,
)


@st.composite
def vocabulary_trees(draw) -> str:
    """Random trees of the Borealis tags and attributes (so some pass the XSD)."""
    root = etree.Element(draw(st.sampled_from(sorted(_ROOT_CHILDREN))))
    if root.tag == "update" and draw(st.booleans()):
        root.set("version", draw(st.sampled_from(["1", "+2", " 3 ", "x", ""])))

    def fill(parent: etree._Element, tags: list[str], depth: int) -> None:
        for tag in draw(st.lists(st.sampled_from(tags), max_size=4 if depth == 0 else 3)):
            el = etree.SubElement(parent, tag)
            for attr in draw(st.lists(st.sampled_from(_VOCAB_ATTRS), max_size=4, unique=True)):
                el.set(attr, draw(_VOCAB_VALUES))
            if depth < 2 and tag in _CHILDREN:
                fill(el, _CHILDREN[tag], depth + 1)

    fill(root, _ROOT_CHILDREN[root.tag], 0)
    return etree.tostring(root, encoding="unicode")


@settings(max_examples=examples(200), **SETTINGS)
@given(vocabulary_trees())
def test_random_vocabulary_trees_read_fails_cleanly(text: str):
    _read_fails_cleanly(text)
