"""Every element and attribute the XSDs declare, per language: the skeleton of docs/xml.md.

``tests/test_docs_xml.py`` checks the doc against :func:`outline`; running this
module prints a skeleton to write a new element's section from::

    .venv/bin/python tests/support/xsd_outline.py [application|deployment|update]

An element is keyed by its name, or ``parent/name`` when it is declared
locally inside its parent (``partition/node``, whose attributes differ from
the global ``<node>``'s).

>>> outline("deployment")["partition/segment"]
{'id': 'required, xs:integer', 'member': 'required, xs:integer', 'slots': 'required, xs:string'}
>>> list(outline("application"))[:3]
['borealis', 'input', 'output']
"""

from __future__ import annotations

import sys

from boreas.schemas import LANGUAGES, schema_for

#: Language -> its root element.
ROOTS = {language: root for root, language in LANGUAGES.items()}


def _describe(attribute) -> str:
    """``required, xs:integer`` or ``one of block, drop, disconnect``."""
    kind = attribute.type
    enum = getattr(kind, "enumeration", None)
    if enum is None and kind.is_union():
        what = "union of " + ", ".join(m.local_name for m in kind.member_types)
    elif enum:
        what = "one of " + ", ".join(enum)
    else:
        what = kind.prefixed_name or kind.local_name or "xs:string"
    return ("required, " if attribute.use == "required" else "") + what


def outline(language: str) -> dict[str, dict[str, str]]:
    """Element key -> {attribute: what the XSD says of it}, in the order a walk from the root meets them."""
    found: dict[str, dict[str, str]] = {}

    def visit(element, key: str) -> None:
        if key in found:
            return
        found[key] = {name: _describe(a) for name, a in sorted(element.attributes.items())}
        for child in element.iterchildren():
            local = child.ref is None and not child.is_global()
            visit(child, f"{element.local_name}/{child.local_name}" if local else child.local_name)

    root = ROOTS[language]
    visit(schema_for(language).elements[root], root)
    return found


def skeleton(language: str) -> str:
    """Markdown: a heading and an attribute table per element, descriptions left to write."""
    lines = []
    for key, attributes in outline(language).items():
        parent, _, name = key.rpartition("/")
        lines += [f"### `<{name}>`" + (f" (in `<{parent}>`)" if parent else ""), "",
                  "| attribute | XSD | meaning |", "|---|---|---|"]
        lines += [f"| `{a}` | {what} | TODO |" for a, what in attributes.items()] + [""]
    return "\n".join(lines)


if __name__ == "__main__":
    for language in sys.argv[1:] or list(ROOTS):
        print(f"## {language}\n\n{skeleton(language)}")
