"""XPath-like locations of elements, for the file/line/path of diagnostics.

Every problem a document has is reported with the element it is about
(``/borealis/box[2]``).  libxml2's ``getpath`` gives that, but at a cost in
the element's siblings, so locating many elements of a wide document costs
the square of its size; :class:`ElementPaths` gives the same answers in
linear time.  Used by hardened parsing (:mod:`.xmlsafe`), schema validation
and the decode gate (:mod:`.document_reader`).
"""

from __future__ import annotations

from lxml import etree


def element_path(element: etree._Element) -> str:
    """An XPath-like location for error messages: ``/borealis/box[2]``.

    Costs time in the number of the element's siblings (libxml2 counts them);
    to locate many elements of one document use :class:`ElementPaths`.
    """
    return element.getroottree().getpath(element)


class ElementPaths:
    """:func:`element_path` for many elements of one tree, in linear time overall.

    libxml2's ``getpath`` counts an element's same-named siblings each time,
    so locating every child of a parent with n children costs n squared.
    This numbers each parent's children once, the first time one of them is
    asked for, and gives the same answers:

    >>> root = etree.fromstring("<r><a/><b/><a><c/></a><!-- x --></r>")
    >>> paths = ElementPaths()
    >>> [paths(e) for e in root.iter("a", "b", "c")] == [element_path(e) for e in root.iter("a", "b", "c")]
    True
    >>> paths(root[2][0])
    '/r/a[2]/c'
    """

    def __init__(self) -> None:
        # Holding the elements keeps their lxml proxies alive, so the same
        # node is always the same (hashable) Python object.
        self._steps: dict[etree._Element, str] = {}
        self._parents: dict[etree._Element, str] = {}  # an element -> its path, once a child's was walked

    def __call__(self, element: etree._Element) -> str:
        parent = element.getparent()
        above = self._parents.get(parent) if parent is not None else None
        if above is None:
            return self._walk(element)
        step = self._steps.get(element)
        if step is None:
            step = self._number_siblings(element)
            if step is None:  # something getpath spells its own way
                return element_path(element)
        return above + "/" + step

    def _walk(self, element: etree._Element) -> str:
        """The path by walking up; remembered for the parent, which the next sibling asks about
        (a full copy's 100,000 boxes are all children of one element)."""
        steps = []
        node: etree._Element | None = element
        while node is not None:
            step = self._steps.get(node)
            if step is None:
                step = self._number_siblings(node)
                if step is None:  # something getpath spells its own way
                    return element_path(element)
            steps.append(step)
            node = node.getparent()
        path = "/" + "/".join(reversed(steps))
        parent = element.getparent()
        if parent is not None:
            self._parents[parent] = path[:path.rindex("/")]
        return path

    def _number_siblings(self, node: etree._Element) -> str | None:
        if not isinstance(node.tag, str) or node.tag.startswith("{") or node.prefix:
            return None
        parent = node.getparent()
        if parent is None:
            self._steps[node] = node.tag
            return node.tag
        siblings = [c for c in parent if isinstance(c.tag, str)]
        if any(c.tag.startswith("{") or c.prefix for c in siblings):
            return None
        total: dict[str, int] = {}
        for child in siblings:
            total[child.tag] = total.get(child.tag, 0) + 1
        seen: dict[str, int] = {}
        for child in siblings:
            tag = child.tag
            if total[tag] == 1:
                self._steps[child] = tag
            else:
                seen[tag] = seen.get(tag, 0) + 1
                self._steps[child] = f"{tag}[{seen[tag]}]"
        return self._steps[node]
