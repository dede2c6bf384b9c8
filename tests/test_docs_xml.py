"""docs/xml.md against the XSDs and Boreas's own reader, so the reference cannot drift.

* Every element each XSD declares has a heading in its language's section
  (update XML may list an element it shares with the other languages in its
  table of shared elements instead), and no heading names an element the
  XSD lacks.
* The attribute table under each element's heading names exactly the
  attributes the XSD allows on it.
* Every ``xml`` example is read by :func:`boreas.catalog.documents.read_document`
  (a fragment inside its section's root element); a whole ``<borealis>``
  document is also planned as a submission; an ``xml refused`` example is
  refused, with the reason its ``<!-- refused: ... -->`` comment quotes.

The XSD side comes from ``support/xsd_outline.py``, which also prints the
skeleton of a new element's section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from boreas.catalog.diagnostics import ValidationFailed
from boreas.catalog.documents import read_document
from boreas.catalog.model import Catalog
from boreas.catalog.submission import plan_submission
from lxml import etree

from support.xsd_outline import ROOTS, outline

DOC = Path(__file__).resolve().parents[1] / "docs" / "xml.md"
LANGUAGES = tuple(ROOTS)  # application, deployment, update
#: ``### `<name>` `` or ``#### `<name>` (in `<parent>`)``: the section of element ``name`` (``parent/name``).
_ELEMENT_HEADING = re.compile(r"^#{3,4} `<([\w-]+)>`(?: \(in `<([\w-]+)>`\))?")
_HEADING = re.compile(r"^#{1,4} ")
_ROW = re.compile(r"^\| `<?([\w-]+)>?`(?: \(in `<([\w-]+)>`\))? \|")
_EXAMPLE = re.compile(r"^```(xml(?: refused)?)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
_REFUSED = re.compile(r"<!-- refused: (.*?) -->", re.DOTALL)


@dataclass
class Section:
    """One language's ``##`` section: its element headings' attribute tables, shared-element rows, text."""

    tables: dict[str, set[str]]  # element key -> attributes its table names
    shared: set[str]             # elements named in a table whose header is "element" (update XML)
    text: str
    first_line: int


def _tables(lines: list[str], header: str) -> list[set[str]]:
    """First-column names of the rows of each table whose header's first cell is ``header``."""
    found: list[set[str]] = []
    rows: set[str] | None = None
    for line in lines:
        if line.startswith(f"| {header} |"):
            rows = set()
            found.append(rows)
        elif rows is not None and line.startswith("|"):
            m = _ROW.match(line)
            if m:
                rows.add(f"{m.group(2)}/{m.group(1)}" if m.group(2) else m.group(1))
        else:
            rows = None
    return found


def _sections() -> dict[str, Section]:
    lines = DOC.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("## ")] + [len(lines)]
    found = {}
    for start, end in zip(starts, starts[1:]):
        language = next((lang for lang, root in ROOTS.items() if f"(`<{root}>`)" in lines[start]), None)
        if language is None:
            continue
        body = lines[start:end]
        heads = [i for i, line in enumerate(body) if _HEADING.match(line)] + [len(body)]
        tables: dict[str, set[str]] = {}
        for head, nxt in zip(heads, heads[1:]):
            m = _ELEMENT_HEADING.match(body[head])
            if m is None:
                continue
            key = f"{m.group(2)}/{m.group(1)}" if m.group(2) else m.group(1)
            assert key not in tables, f"docs/xml.md: two sections for <{key}> in {language} XML"
            attributes = _tables(body[head:nxt], "attribute")
            assert len(attributes) == 1, f"docs/xml.md: <{key}> ({language}) needs one attribute table"
            tables[key] = attributes[0]
        shared = set().union(*_tables(body, "element"))
        found[language] = Section(tables, shared, "\n".join(body), start + 1)
    assert set(found) == set(LANGUAGES), f"docs/xml.md: sections found for {sorted(found)}"
    return found


SECTIONS = _sections()


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_element_of_the_xsd_is_described_and_no_other(language):
    section = SECTIONS[language]
    declared = set(outline(language))
    described = set(section.tables) | section.shared
    assert sorted(declared - described) == [], f"{language} XML elements missing from docs/xml.md"
    assert sorted(described - declared) == [], f"docs/xml.md describes elements {language}.xsd lacks"


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_attribute_is_in_its_elements_table(language):
    for key, attributes in outline(language).items():
        # update XML describes its own elements; the ones it shares are described where they come from
        home = next(SECTIONS[lang] for lang in (language, "application", "deployment")
                    if key in SECTIONS[lang].tables)
        documented = home.tables[key]
        assert sorted(set(attributes) - documented) == [], f"<{key}> ({language}): attributes missing"
        assert sorted(documented - set(attributes)) == [], f"<{key}> ({language}): attributes the XSD lacks"


def _examples() -> list[tuple[str, str, str, int]]:
    """(language, kind, text, line in docs/xml.md) of every ``xml`` block."""
    found = []
    for language, section in SECTIONS.items():
        for m in _EXAMPLE.finditer(section.text):
            line = section.first_line + section.text.count("\n", 0, m.start())
            found.append((language, m.group(1), m.group(2), line))
    return found


EXAMPLES = _examples()


def test_there_are_examples_for_every_language_and_refusals():
    assert {lang for lang, *_ in EXAMPLES} == set(LANGUAGES)
    assert sum(kind == "xml refused" for _, kind, _, _ in EXAMPLES) >= 3


def _document(language: str, text: str) -> str:
    """The example as a whole document: itself, or its fragment inside the language's root."""
    wrapped = etree.fromstring(f"<example>{text}</example>")  # well-formed, one or more elements
    children = [c for c in wrapped if isinstance(c.tag, str)]
    if len(children) == 1 and children[0].tag in ROOTS.values():
        return text
    return f"<{ROOTS[language]}>{text}</{ROOTS[language]}>"


def _problems(document: str, whole: bool) -> list[str]:
    """Why Boreas refuses the document: reading it, and planning it when it is a whole application."""
    from boreas.m3.boxtype import box_types

    try:
        doc = read_document(document, "example.xml")
    except ValidationFailed as failed:
        return [d.reason for d in failed.diagnostics]
    if not (whole and document.lstrip().startswith("<borealis")):
        return []
    return [d.reason for d in plan_submission(Catalog(), [doc], box_types()).problems]


@pytest.mark.parametrize("language, kind, text, line", EXAMPLES,
                         ids=[f"{lang}-line{line}" for lang, _, _, line in EXAMPLES])
def test_examples_read_as_the_doc_says(language, kind, text, line):
    document = _document(language, text)
    problems = _problems(document, whole=document is text)
    if kind == "xml":
        assert problems == [], f"docs/xml.md line {line}: the example is refused"
        return
    assert problems, f"docs/xml.md line {line}: the example marked refused is accepted"
    for quoted in _REFUSED.findall(text):
        assert any(" ".join(quoted.split()) in p for p in problems), (quoted, problems)
