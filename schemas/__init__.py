"""XSD schemas for the three Borealis XML languages, and a validator.

The schemas (``*.xsd`` beside this file) mirror ``borealis.dtd`` but are
strict: unknown elements or attributes fail.  We validate already-parsed lxml
trees rather than files so that a ``<!DOCTYPE>`` line can never change the
outcome (no DTD loading, no default attributes, no network).

Public API: :data:`LANGUAGES`, :func:`schema_for`, :func:`xsd_errors`,
:class:`XsdProblem`.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lxml import etree

if TYPE_CHECKING:
    import xmlschema

# xmlschema (about 0.2 s to import) is imported only to explain a document libxml2 refused
# (:func:`xsd_errors`): a valid document, the common case, never loads it (``boreas submit``, ``connect``).

__all__ = ["LANGUAGES", "XsdProblem", "schema_for", "xsd_errors"]

#: Root element -> language (the name of the ``.xsd`` file without suffix).
LANGUAGES: dict[str, str] = {
    "borealis": "application",
    "deploy": "deployment",
    "update": "update",
}

_SCHEMA_DIR = Path(__file__).parent


@dataclass(frozen=True)
class XsdProblem:
    """One schema violation, reduced to what a user needs to fix it.

    ``line`` is the source line of the offending element (None if unknown),
    ``path`` its XPath in the document, ``reason`` one short human line.
    """

    line: int | None
    path: str
    reason: str

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line is not None else "line ?"
        return f"{where}: {self.path}: {self.reason}"


def schema_for(language_or_root: str) -> xmlschema.XMLSchema:
    """Return the (process-wide cached) schema for a language or root tag.

    Accepts ``"application"``/``"deployment"``/``"update"`` or the root
    element names ``"borealis"``/``"deploy"``/``"update"``; both spellings
    return the same object.  Raises ValueError for anything else.
    """
    language = LANGUAGES.get(language_or_root, language_or_root)
    if language not in LANGUAGES.values():
        known = sorted(set(LANGUAGES) | set(LANGUAGES.values()))
        raise ValueError(
            f"unknown Borealis XML language {language_or_root!r}; "
            f"known: {', '.join(known)}"
        )
    return _load(language)


#: Schemas are compiled one at a time: libxml2's schema parser is not safe to run in two
#: threads at once (submissions are validated in worker threads), and lru_cache alone lets
#: two first callers both compile.
_COMPILING = threading.Lock()


@functools.lru_cache(maxsize=None)
def _load(language: str) -> xmlschema.XMLSchema:
    """Build a schema once per process (it is slow).  ``allow="sandbox"``
    keeps xs:include inside this package directory: loading never touches
    the network."""
    import xmlschema

    path = _SCHEMA_DIR / f"{language}.xsd"
    with _COMPILING:
        return xmlschema.XMLSchema(str(path), base_url=str(_SCHEMA_DIR), allow="sandbox")


@functools.lru_cache(maxsize=None)
def fast_schema(language: str) -> etree.XMLSchema:
    """The same XSD compiled by libxml2 (our own files: no network, no entities).

    Public: the catalog's streaming reader validates with it too (catalog/documents.py).
    """
    parser = etree.XMLParser(resolve_entities=False, no_network=True)
    with _COMPILING:
        return etree.XMLSchema(etree.parse(str(_SCHEMA_DIR / f"{language}.xsd"), parser))


def xsd_errors(tree_or_root_element) -> list[XsdProblem]:
    """Validate an lxml tree (or its root element) against its language.

    The language is picked by the root tag (see :data:`LANGUAGES`); an
    unknown root yields a single problem naming the known roots.  Returns
    an empty list when the document is valid.
    """
    root = (
        tree_or_root_element.getroot()
        if hasattr(tree_or_root_element, "getroot")
        else tree_or_root_element
    )
    tree = root.getroottree()
    if root.tag not in LANGUAGES:
        known = ", ".join(f"<{tag}>" for tag in LANGUAGES)
        return [
            XsdProblem(
                getattr(root, "sourceline", None),
                tree.getpath(root),
                f"unknown root element <{root.tag}>; expected one of {known}",
            )
        ]
    # libxml2 checks the same XSD a hundred times faster; xmlschema runs only
    # to explain a document libxml2 refused (its messages are the better ones).
    if fast_schema(LANGUAGES[root.tag]).validate(tree):
        return []
    problems = [
        _problem(tree, error) for error in schema_for(root.tag).iter_errors(root)
    ]
    # xmlschema reports a parent's content errors after its children's.
    return sorted(problems, key=lambda p: (p.line is None, p.line or 0))


def _problem(tree, error) -> XsdProblem:
    """Turn one xmlschema error into an XsdProblem (one line, right place)."""
    from xmlschema import XMLSchemaChildrenValidationError

    elem = error.elem
    if elem is None or not isinstance(getattr(elem, "tag", None), str):
        return XsdProblem(None, error.path or "", _first_line(error.reason))
    tag = elem.tag
    if isinstance(error, XMLSchemaChildrenValidationError):
        expected = _expected(error)
        if error.invalid_tag is not None:
            # xmlschema reports on the parent; point at the child itself.
            child = _child_at(elem, error.index)
            if child is not None:
                elem = child
            reason = f"unexpected child element <{error.invalid_tag}> in <{tag}>"
        else:
            reason = f"incomplete content of <{tag}>"
        if expected:
            reason += f" (expected {expected})"
    else:
        reason = _attribute_reason(_first_line(error.reason), tag, error.validator)
    return XsdProblem(getattr(elem, "sourceline", None), tree.getpath(elem), reason)


def _first_line(reason: str | None) -> str:
    return (reason or "invalid").strip().splitlines()[0].rstrip(".")


#: What a union type takes, by the name of its first member (whose failure
#: xmlschema reports for the whole union).
_UNION_REASONS = {
    "scalarTypeType": "not a Borealis type (byte, short, int, long, single, double, string, "
                      "timestamp), an array type such as byte(0...319, 0...239, 0...2), "
                      "or a <type> alias name",
}


def _attribute_reason(reason: str, tag: str, validator) -> str:
    """Rephrase xmlschema's attribute messages; name the element."""
    suffix = " attribute not allowed for element"
    if reason.endswith(suffix):
        return f"unknown attribute {reason[: -len(suffix)]} on <{tag}>"
    if reason.startswith("attribute ") and ": " in reason:
        # "attribute type='bool': value must be one of [...]"
        attr, _, why = reason[len("attribute ") :].partition(": ")
        if why.startswith("invalid literal for"):  # Python's int() leaking
            why = f"not a valid {getattr(validator, 'local_name', None) or 'value'}"
        # A union reports its first member's failure; say what the union takes.
        why = _UNION_REASONS.get(getattr(getattr(validator, "parent", None), "name", None), why)
        return f"bad value {attr} on <{tag}>: {why}"
    return f"{reason} on <{tag}>"


def _child_at(parent, index):
    """The child xmlschema counted as position ``index`` (comments count)."""
    if index is None:
        return None
    children = list(parent)
    return children[index] if 0 <= index < len(children) else None


def _expected(error) -> str:
    names = []
    for particle in error.expected or ():
        name = getattr(particle, "local_name", None) or getattr(particle, "name", None)
        if name:
            names.append(f"<{name}>")
    return " or ".join(names)
