"""``<parameter name="sql-file" value="views/q3.sql"/>``: an m3 box's SQL kept in a file of its own.

The file is read on the client's machine, before a document leaves it: the
CLI (``boreas submit``, ``deploy``, ``validate``, ``catalog apply``, ``drop``) and
:func:`boreas.catalog.documents.read_file` replace each such parameter by
``<parameter name="sql" value="...">`` holding the file's text.  The Head and
the nodes never read files named in XML (a document they are sent is
untrusted: it must not make them read ``/etc/passwd``), so a ``sql-file``
that reaches them is refused by the reader (:mod:`.document_reader`).

The path is relative to the XML file's directory and names a ``.sql`` file;
an absolute path, another suffix or a file that cannot be read is an error
naming the XML file, the line and the element.  The SQL goes into the
``value`` attribute (line breaks written as ``&#10;``), so every other line
of the document keeps its number and the Head's diagnostics point into the
file as the user wrote it.

>>> import tempfile
>>> folder = Path(tempfile.mkdtemp())
>>> _ = (folder / "q.sql").write_text("SELECT SUM(x) AS s\\nFROM t WHERE x < 3")
>>> xml = b'<borealis><box name="v" type="m3"><in stream="T"/><out stream="V"/>' \\
...       b'<parameter name="sql-file" value="q.sql"/></box></borealis>'
>>> inline_sql_files(xml, folder / "app.xml").decode()
'<borealis><box name="v" type="m3">...<parameter name="sql" value="SELECT SUM(x) AS s&#10;FROM t WHERE x &lt; 3"/></box></borealis>'
>>> inline_sql_files(xml.replace(b"q.sql", b"gone.sql"), folder / "app.xml")
Traceback (most recent call last):
...
boreas.catalog.diagnostics.ValidationFailed: 1 problem:
  .../app.xml:1: /borealis/box/parameter: sql-file 'gone.sql': cannot read .../gone.sql: No such file or directory
"""

from __future__ import annotations

import re
from pathlib import Path, PurePath

from lxml import etree

from .diagnostics import Diagnostic, ValidationFailed
from .element_paths import ElementPaths
from .xmlsafe import DEFAULT_LIMITS, XmlLimits, as_bytes, parse_xml

__all__ = ["SQL_FILE", "inline_sql_files"]

#: The parameter that names a file of SQL, relative to the XML file.
SQL_FILE = "sql-file"


def inline_sql_files(data: bytes | str, path: str | Path, limits: XmlLimits = DEFAULT_LIMITS) -> bytes:
    """The document read from ``path`` with every ``sql-file`` parameter replaced by ``sql``.

    A document without one is returned as it is (the same bytes); otherwise
    it is parsed (with :func:`~boreas.catalog.xmlsafe.parse_xml`'s limits) and
    written again.  Raises :class:`ValidationFailed` with every problem.
    """
    data = as_bytes(data)
    if SQL_FILE.encode() not in data:
        return data
    source = str(path)
    tree = parse_xml(data, source, limits)
    paths = ElementPaths()
    problems = []
    for el in tree.getroot().iter("parameter"):
        if el.get("name") != SQL_FILE:
            continue
        name = el.get("value")
        name = name if name is not None else (el.text or "").strip()
        try:
            sql = _read_sql(Path(path).parent, name, limits)
        except ValueError as exc:
            problems.append(Diagnostic(source, el.sourceline, paths(el), f"sql-file {name!r}: {exc}"))
            continue
        el.text = None
        el.set("name", "sql")
        el.set("value", sql)
    if problems:
        raise ValidationFailed(problems)
    root = tree.getroot()
    body = etree.tostring(root, encoding=tree.docinfo.encoding or "UTF-8", xml_declaration=False)
    return data[:_root_start(data, root)] + body


def _root_start(data: bytes, root: etree._Element) -> int:
    """Where the root element's start tag begins: the prolog before it (declaration, DOCTYPE,
    comments, blank lines) is kept byte for byte, so line numbers stay as written."""
    tag = re.compile(rb"<" + re.escape(root.tag.encode()) + rb"[\s/>]")
    for found in tag.finditer(data):
        before = data[:found.start()]
        if before.rfind(b"<!--") <= before.rfind(b"-->"):  # not inside a comment
            return found.start()
    return 0  # not found as written (cannot happen for a document lxml parsed): no prolog


def _read_sql(folder: Path, name: str, limits: XmlLimits) -> str:
    if not name:
        raise ValueError("names no file")
    if PurePath(name).is_absolute():
        raise ValueError("is an absolute path; give it relative to the XML file's directory")
    if PurePath(name).suffix != ".sql":
        raise ValueError("is not a .sql file")
    file = folder / name
    try:
        with file.open("rb") as fh:
            raw = fh.read(limits.max_bytes + 1)
    except OSError as exc:
        raise ValueError(f"cannot read {file}: {exc.strerror}") from None
    if len(raw) > limits.max_bytes:
        raise ValueError(f"{file} is over the limit of {limits.max_bytes:,} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{file} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
