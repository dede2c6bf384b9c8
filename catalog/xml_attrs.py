"""What every catalog codec reads and writes of an XML element: whole-number attributes, children by tag,
attributes set where they have a value; and :class:`DecodeError`, a decode's one-line refusal.

Its own module so that the element codecs (:mod:`.xmlcodec`, :mod:`.partition_codec`) share one reading
of an attribute and one refusal, without importing each other.
"""

from __future__ import annotations

from lxml import etree

from .diagnostics import Origin


class DecodeError(ValueError):
    """An element is well-formed and schema-valid but means nothing sensible.

    ``origin``, when given, is the child element at fault (a ``<field>`` of a
    ``<schema>``), so the message points at its line rather than the parent's.
    """

    def __init__(self, reason: str, origin: Origin | None = None):
        super().__init__(reason)
        self.origin = origin


def int_attr(el: etree._Element, attr: str) -> int | None:
    """Attribute ``attr`` as a whole number (None: absent or blank); anything else is refused."""
    text = el.get(attr)
    if text is None or text.strip() == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise DecodeError(f"<{el.tag}> attribute {attr}={text!r} is not a whole number") from None


def children(el: etree._Element, tag: str) -> list[etree._Element]:
    """The children of ``el`` with tag ``tag``, in document order."""
    return [c for c in el if c.tag == tag]


def child_origin(origin: Origin, el: etree._Element, step: str) -> Origin:
    """Where child ``el`` stands: its line, and the parent's path with ``step`` (as diagnostics name it)."""
    return Origin(origin.file, el.sourceline, origin.path + step) if origin.path else origin


def set_attrs(el: etree._Element, **attrs: object) -> etree._Element:
    """Set each attribute that has a value (None leaves it out; a trailing ``_`` spells a keyword: ``id_``)."""
    for name, value in attrs.items():
        if value is not None:
            el.set(name.rstrip("_"), str(value))
    return el


def sub_element(parent: etree._Element, tag: str, **attrs: object) -> etree._Element:
    """A new ``<tag>`` child of ``parent`` with the attributes that have a value."""
    return set_attrs(etree.SubElement(parent, tag), **attrs)
