"""A box's XML text written as a string, byte for byte what lxml serializes, at a quarter of the cost.

Every box a deployment adds is written twice as text: once in catalog form
for the commit (:func:`.xmlcodec.to_text`) and once in the update XML its
node is sent (:func:`.updates.update_document`).  Building an lxml tree for
each (an element per port and parameter, every attribute set through
lxml's checks) and serializing it was about 20 microseconds a box, a tenth
of the Head's cost per box.  A box is the one element a big deployment is
made of, and its shape is fixed, so it is written here directly; any value
that is not printable ASCII (where lxml's checks and escapes matter), and
an attribute named twice, leave it to lxml (:func:`box_text` returns None).

>>> from boreas.catalog.model import Box, InPort
>>> box_text(Box("f", "filter", (InPort("a"),), ("b",), (("expression.0", "x > 1 & y < 2"),)), "n:1", "")
'<box name="f" type="filter" node="n:1"><in stream="a"/><out stream="b"/><parameter name="expression.0" value="x &gt; 1 &amp; y &lt; 2"/></box>'
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .model import Box

_PLAIN = re.compile(r"[ -~]*")  # printable ASCII: lxml writes it escaping only these four
_SPECIAL = re.compile(r'[&<>"]')
_BOX_ATTRS = frozenset({"name", "type", "node", "application"})
_IN_ATTRS = frozenset({"stream", "connection_point_view"})


def _esc(value: object) -> str:
    text = str(value)
    if not _SPECIAL.search(text):
        return text
    # (four replaces in C, "&" first: str.translate with a dict of strings runs its slow path, about 8x
    # longer for a filter's expression, which every filter box of a deployment has, written twice)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _extra(attrs: Iterable[tuple[str, str]], taken: frozenset[str]) -> str | None:
    """A box's or port's other attributes; None when one is named twice (lxml says what that means)."""
    names = [name for name, _ in attrs]
    if len(set(names)) != len(names) or not taken.isdisjoint(names):
        return None
    return "".join(f' {name}="{_esc(value)}"' for name, value in attrs)


def box_text(box: Box, node: str | None, app: str) -> str | None:
    """``<box>`` as :func:`.xmlcodec.encode` builds it (placed on ``node``; ``app``: the declaring
    application, written last), serialized; None when lxml must write it."""
    parts = [f'<box name="{_esc(box.name)}" type="{_esc(box.type)}"']
    if node is not None:
        parts.append(f' node="{_esc(node)}"')
    if box.attrs:
        extra = _extra(box.attrs, _BOX_ATTRS)
        if extra is None:
            return None
        parts.append(extra)
    if app:
        parts.append(f' application="{_esc(app)}"')
    if not (box.inputs or box.outputs or box.params or box.access):
        parts.append("/>")
    else:
        parts.append(">")
        for port in box.inputs:
            parts.append(f'<in stream="{_esc(port.stream)}"')
            if port.view is not None:
                parts.append(f' connection_point_view="{_esc(port.view)}"')
            if port.attrs:
                extra = _extra(port.attrs, _IN_ATTRS)
                if extra is None:
                    return None
                parts.append(extra)
            parts.append("/>")
        parts += [f'<out stream="{_esc(stream)}"/>' for stream in box.outputs]
        parts += [f'<parameter name="{_esc(name)}" value="{_esc(value)}"/>' for name, value in box.params]
        parts += [f'<access table="{_esc(table)}"/>' for table in box.access]
        parts.append("</box>")
    text = "".join(parts)
    return text if _PLAIN.fullmatch(text) else None
