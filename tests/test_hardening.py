"""Untrusted XML: refused clearly, never read files or the network, never expanded."""

import http.server
import threading

import pytest

from boreas.catalog import ValidationFailed, read_document
from boreas.catalog.xmlsafe import XmlLimits, parse_xml

GOOD = b"""<?xml version="1.0"?>
<borealis>
  <input stream="A" schema="T"/>
  <schema name="T"><field name="x" type="int"/></schema>
</borealis>"""


def problems(data, **kw):
    with pytest.raises(ValidationFailed) as info:
        read_document(data, "doc.xml", **kw)
    return info.value.diagnostics


def test_malformed_xml_names_file_and_line():
    (p,) = problems(b"<borealis>\n<input stream='A' schema='T'>\n</borealis>")
    assert p.file == "doc.xml"
    assert p.line == 3
    assert "malformed XML" in p.reason


def test_external_entity_is_refused_and_never_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    doc = f"""<?xml version="1.0"?>
<!DOCTYPE borealis [<!ENTITY s SYSTEM "file://{secret}">]>
<borealis><input stream="&s;" schema="T"/></borealis>""".encode()
    (p,) = problems(doc)
    assert "internal subset" in p.reason
    assert p.line == 2
    assert "TOP-SECRET" not in str(p)


def test_entity_expansion_bomb_is_refused():
    lol = b'<!ENTITY a "aaaaaaaaaa">' + b"".join(
        b'<!ENTITY %s "%s">' % (bytes([98 + i]), (b"&" + bytes([97 + i]) + b";") * 10) for i in range(8)
    )
    doc = b"<?xml version='1.0'?><!DOCTYPE borealis [" + lol + b"]><borealis>&i;</borealis>"
    (p,) = problems(doc)
    assert "entities" in p.reason


def test_doctype_naming_external_dtd_is_accepted_and_not_loaded(tmp_path):
    dtd = tmp_path / "evil.dtd"
    dtd.write_text('<!ATTLIST input stream CDATA "INJECTED">')
    doc = GOOD.replace(b"<borealis>", f'<!DOCTYPE borealis SYSTEM "{dtd}">\n<borealis>'.encode(), 1)
    app = read_document(doc, "doc.xml")
    assert [i.stream for i in app.declarations if hasattr(i, "stream")] == ["A"]


def test_doctype_with_network_url_makes_no_request():
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # pragma: no cover - must not happen
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'<!ENTITY x "y">')

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/borealis.dtd"
        doc = GOOD.replace(b"<borealis>", f'<!DOCTYPE borealis SYSTEM "{url}">\n<borealis>'.encode(), 1)
        read_document(doc, "doc.xml")
    finally:
        server.shutdown()
    assert hits == []


def test_size_limit():
    limits = XmlLimits(max_bytes=1000)
    big = b"<borealis>" + b"<!-- padding -->" * 100 + b"</borealis>"
    (p,) = problems(big, limits=limits)
    assert "over the limit of 1,000" in p.reason


def test_default_size_limit_is_16_mib():
    data = b"<borealis>" + b" " * (16 * 1024 * 1024) + b"</borealis>"
    (p,) = problems(data)
    assert "over the limit" in p.reason


def test_depth_limit():
    deep = b"<borealis>" + b"<a>" * 100 + b"</a>" * 100 + b"</borealis>"
    (p,) = problems(deep)
    assert "deeper than the limit of 64" in p.reason


def test_element_count_limit():
    limits = XmlLimits(max_elements=50)
    many = b"<borealis>" + b'<schema name="s"/>' * 60 + b"</borealis>"
    (p,) = problems(many, limits=limits)
    assert "more than the limit of 50 elements" in p.reason


def test_parse_xml_accepts_str_with_encoding_declaration():
    tree = parse_xml('<?xml version="1.0" encoding="UTF-8"?><deploy/>', "s.xml")
    assert tree.getroot().tag == "deploy"
