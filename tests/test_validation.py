"""Semantic validation of submissions: every mistake reported with file, line, path; nothing committed."""

from pathlib import Path

import pytest

from boreas.catalog import Catalog, ValidationFailed, apply_submission, open_store, plan_submission, read_document
from boreas.catalog.elements import catalog_from_snapshot

DATA = Path(__file__).parent / "data" / "borealis"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "borealis"
EXAMPLES = Path(__file__).parents[1] / "examples" / "xml"

PAIRS = [
    ("move_Move.xml", "move_MoveDeploy.xml"),
    ("connect_Connect.xml", "connect_ConnectDeploy.xml"),
    ("connect_Connect1.xml", "connect_ConnectDeploy1.xml"),
    ("deploy_Deploy.xml", "deploy_DeployDeploy.xml"),
]

SCHEMA = '<schema name="T"><field name="value" type="double"/><field name="time" type="int"/></schema>'


def app(body: str) -> str:
    return f'<?xml version="1.0"?>\n<borealis>\n{body}\n</borealis>'


def deploy(body: str) -> str:
    return f'<?xml version="1.0"?>\n<deploy>\n{body}\n</deploy>'


def filter_box(name, src, dst, expr="value > 1.0"):
    return (f'<box name="{name}" type="filter"><in stream="{src}"/><out stream="{dst}"/>'
            f'<parameter name="expression.0" value="{expr}"/></box>')


def plan(*texts, base=None):
    docs = [read_document(t, f"doc{i}.xml") for i, t in enumerate(texts)]
    return plan_submission(base or Catalog(), docs)


def reasons(*texts, base=None):
    result = plan(*texts, base=base)
    assert not result.ok, "expected the submission to be refused"
    for p in result.problems:
        assert p.file.startswith("doc") and p.reason
    return [p.reason for p in result.problems]


def read_error(text):
    with pytest.raises(ValidationFailed) as info:
        read_document(text, "bad.xml")
    return info.value.diagnostics


# -- real Borealis files --------------------------------------------------------


@pytest.mark.parametrize("dirname", [DATA, SHARED], ids=["repo-copy", "shared"])
@pytest.mark.parametrize("app_file,deploy_file", PAIRS)
def test_real_borealis_pairs_validate(dirname, app_file, deploy_file):
    if not dirname.exists():
        pytest.skip(f"{dirname} not present")
    docs = [read_document((dirname / f).read_bytes(), f) for f in (app_file, deploy_file)]
    result = plan_submission(Catalog(), docs)
    assert result.problems == []
    assert all(box.node for box in result.catalog.boxes.values())


def test_deploy_add_extends_a_deployed_catalog_and_fails_on_empty():
    store = open_store("memory://")
    first = [read_document((DATA / f).read_bytes(), f) for f in ("deploy_Deploy.xml", "deploy_DeployDeploy.xml")]
    add = [read_document((DATA / f).read_bytes(), f) for f in ("deploy_Add.xml", "deploy_AddDeploy.xml")]
    apply_submission(store, first)
    result = apply_submission(store, add)
    assert result.after.boxes["box2"].node == "localhost:15000"
    assert result.after.boxes["box2"].inputs[0].stream == "Result"

    empty = open_store("memory://")
    with pytest.raises(ValidationFailed) as info:
        apply_submission(empty, add)
    text = "\n".join(str(d) for d in info.value.diagnostics)
    assert "'Result'" in text and "nothing produces" in text
    assert any(d.file == "deploy_Add.xml" and d.line == 9 for d in info.value.diagnostics)
    assert empty.version() == 0


@pytest.mark.parametrize("name", ["packet_aggregate", "sensor_chain", "trade_join"])
def test_examples_validate(name):
    docs = [read_document((EXAMPLES / f).read_bytes(), f) for f in (f"{name}.xml", f"{name}_deploy.xml")]
    assert plan_submission(Catalog(), docs).problems == []


# -- schema (XSD) level problems ---------------------------------------------


def test_unknown_element_is_located():
    (p,) = read_error(app('<input stream="A" schema="T"/>\n<bogus/>'))
    assert p.line == 4 and "bogus" in p.reason and p.file == "bad.xml"


def test_unknown_attribute_is_located():
    (p,) = read_error(app('<input stream="A" schema="T" colour="red"/>'))
    assert p.line == 3 and "colour" in p.reason


# -- semantic problems ------------------------------------------------------------


def test_unknown_box_type_names_the_known_ones():
    body = SCHEMA + '<input stream="A" schema="T"/>' + \
        '<box name="b" type="fliter"><in stream="A"/><out stream="B"/></box>'
    (reason,) = reasons(app(body))
    assert "unknown box type 'fliter'" in reason and "filter" in reason and "aggregate" in reason


def test_dangling_stream_reference():
    (reason,) = reasons(app(SCHEMA + filter_box("b", "Nowhere", "B")))
    assert "'Nowhere'" in reason and "nothing produces" in reason


def test_dangling_schema_reference():
    (reason,) = reasons(app('<input stream="A" schema="Missing"/>'))
    assert "unknown schema 'Missing'" in reason


def test_stream_with_two_producers():
    body = SCHEMA + '<input stream="A" schema="T"/>' + filter_box("b1", "A", "B") + filter_box("b2", "A", "B")
    (reason,) = reasons(app(body))
    assert "stream 'B' has 2 producers" in reason and "b1" in reason and "b2" in reason


def test_duplicate_box_in_one_submission_and_against_catalog():
    body = SCHEMA + '<input stream="A" schema="T"/>' + filter_box("b", "A", "B") + filter_box("b", "A", "C")
    result = plan(app(body))
    assert any("duplicate box 'b'" in p.reason and p.line == 3 for p in result.problems)

    store = open_store("memory://")
    apply_submission(store, [read_document(app(SCHEMA + '<input stream="A" schema="T"/>' +
                                               filter_box("b", "A", "B")), "first.xml")])
    base = catalog_from_snapshot(store.snapshot())
    (reason,) = reasons(app(filter_box("b", "A", "C")), base=base)
    assert "duplicate box 'b'" in reason and "global catalog" in reason


def test_schema_redefinition():
    base = plan(app(SCHEMA)).catalog
    assert plan(app(SCHEMA), base=base).ok, "an identical schema again is a no-op"
    changed = SCHEMA.replace('type="int"', 'type="long"')
    (reason,) = reasons(app(changed), base=base)
    assert "schema 'T' is already defined differently" in reason and "never be redefined" in reason


def test_box_placed_on_two_nodes():
    a = app(SCHEMA + '<input stream="A" schema="T"/>' + filter_box("b", "A", "B"))
    d = deploy('<node endpoint=":15000" query="b"/>\n<node endpoint=":15100" query="b"/>')
    (reason,) = reasons(a, d)
    assert "placed on more than one node" in reason and "localhost:15000" in reason and "localhost:15100" in reason


def test_box_placed_on_no_node():
    a = app(SCHEMA + '<input stream="A" schema="T"/>' + filter_box("b", "A", "B") + filter_box("c", "B", "C"))
    d = deploy('<node endpoint=":15000" query="b"/>')
    (reason,) = reasons(a, d)
    assert "box 'c' is not placed on any node" in reason


def test_same_box_twice_on_one_node_spelled_differently_is_fine():
    a = app(SCHEMA + '<input stream="A" schema="T"/>' + filter_box("b", "A", "B"))
    d = deploy('<node endpoint=":15000" query="b"/>\n<node endpoint="localhost:15000" query="b"/>')
    result = plan(a, d)
    assert result.ok and result.catalog.boxes["b"].node == "localhost:15000"


def test_deploying_unknown_query():
    a = app(SCHEMA + '<input stream="A" schema="T"/>' + filter_box("b", "A", "B"))
    d = deploy('<node endpoint=":15000" query="b nosuch"/>')
    (reason,) = reasons(a, d)
    assert "'nosuch'" in reason


def test_bad_endpoint():
    (p,) = read_error(deploy('<node endpoint="host:99999" query=""/>'))
    assert "port must be 1..65535" in p.reason and p.line == 3


def test_filter_expression_must_parse_and_name_input_fields():
    body = SCHEMA + '<input stream="A" schema="T"/>' + filter_box("b", "A", "B", "speed > 3") + \
        filter_box("c", "B", "C", "value >")
    found = reasons(app(body))
    assert any("unknown field 'speed'" in r and "value, time" in r for r in found)
    assert any("does not parse" in r for r in found)


def test_map_derives_schema_and_output_mismatch_is_reported():
    body = SCHEMA + '<input stream="A" schema="T"/><output stream="B" schema="T"/>' + \
        '<box name="m" type="map"><in stream="A"/><out stream="B"/>' \
        '<parameter name="expression.0" value="time * 2"/><parameter name="output-field-name.0" value="t2"/></box>'
    (reason,) = reasons(app(body))
    assert "declares schema 'T'" in reason and "(t2 int)" in reason


def test_union_needs_equal_schemas():
    other = '<schema name="U"><field name="x" type="int"/></schema>'
    body = SCHEMA + other + '<input stream="A" schema="T"/><input stream="B" schema="U"/>' + \
        '<box name="u" type="union"><in stream="A"/><in stream="B"/><out stream="C"/></box>'
    (reason,) = reasons(app(body))
    assert "union box 'u'" in reason and "in port 1" in reason


def test_aggregate_output_schema_is_inferred_positionally():
    (EX,) = [EXAMPLES / "packet_aggregate.xml"]
    result = plan(EX.read_text())
    assert result.ok


def test_join_fields_must_exist_on_their_side():
    body = SCHEMA + '<input stream="A" schema="T"/><input stream="B" schema="T"/>' + \
        '<box name="j" type="join"><in stream="A"/><in stream="B"/><out stream="C"/>' \
        '<parameter name="predicate" value="left.time = right.nope"/>' \
        '<parameter name="left-buffer-size" value="10"/><parameter name="right-buffer-size" value="10"/></box>'
    (reason,) = reasons(app(body))
    assert "right.nope" in reason


def test_missing_required_parameter():
    body = SCHEMA + '<input stream="A" schema="T"/>' + \
        '<box name="d" type="random_drop"><in stream="A"/><out stream="B"/></box>'
    (reason,) = reasons(app(body))
    assert "needs parameter 'drop_rate'" in reason


def test_all_problems_are_reported_at_once():
    body = SCHEMA + '<input stream="A" schema="Nope"/>' + filter_box("b", "X", "B") + \
        '<box name="c" type="zzz"><in stream="A"/><out stream="C"/></box>'
    assert len(reasons(app(body))) == 3


def test_refused_submission_commits_nothing():
    store = open_store("memory://")
    apply_submission(store, [read_document(app(SCHEMA + '<input stream="A" schema="T"/>'), "ok.xml")])
    before = store.snapshot()
    bad = app(filter_box("b", "A", "B") + filter_box("c", "Missing", "C"))
    with pytest.raises(ValidationFailed):
        apply_submission(store, [read_document(bad, "bad.xml")])
    assert store.snapshot() == before


def test_delete_and_modify():
    a = app(SCHEMA + '<input stream="A" schema="T"/><output stream="B"/>' + filter_box("b", "A", "B"))
    base = plan(a, deploy('<node endpoint=":15000" query="b"/>')).catalog
    modified = plan(app('<modify box="b"><parameter name="expression.0" value="time &lt; 3"/></modify>'),
                    base=base)
    assert modified.ok and modified.catalog.boxes["b"].param("expression.0") == "time < 3"
    deleted = plan(app('<delete query="b"/>'), base=base)
    assert deleted.ok and "b" not in deleted.catalog.boxes and "B" not in deleted.catalog.outputs
    (reason,) = reasons(app('<delete query="ghost"/>'), base=base)
    assert "ghost" in reason


def test_region_must_name_a_declared_node():
    a = app(SCHEMA + '<input stream="A" schema="T"/>' + filter_box("b", "A", "B"))
    (reason,) = reasons(a, deploy('<node endpoint=":15000" query="b"/><region node=":16000"/>'))
    assert "unknown node 'localhost:16000'" in reason


def test_update_xml_is_not_a_submission():
    (reason,) = [p.reason for p in pytest.raises(ValidationFailed, plan, "<update/>").value.diagnostics]
    assert "update XML" in reason
