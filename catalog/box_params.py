"""Reading a box's parameters: numbers, choices, field names and ``prefix.N`` lists, each refusal naming the box.

Apart from :mod:`.boxtypes` (the registry and each type's inference) because
every type's inference reads its parameters the same way, and the operators
read ``prefix.N`` lists with the same rule (:func:`indexed`) when they are built.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from .model import Box, Field, Schema


class BoxError(ValueError):
    """A box is wrong for its type; the message is one line."""


def indexed(box: Box, prefix: str) -> list[str]:
    """Values of ``prefix.0``, ``prefix.1``, ... in order; a gap is an error."""
    found: dict[int, str] = {}
    match = _numbered(prefix)
    for name, value in box.params:
        if name.startswith(prefix):  # (the pattern asked only of names it can match: every box built asks)
            m = match(name)
            if m:
                found[int(m.group(1))] = value
    if len(found) == 1 and 0 in found:
        return [found[0]]
    if sorted(found) != list(range(len(found))):
        raise BoxError(f"box {box.name!r}: parameters {prefix}.N must be numbered 0, 1, 2, ...")
    return [found[i] for i in range(len(found))]


@lru_cache(maxsize=256)
def _numbered(prefix: str) -> Callable[[str], re.Match | None]:
    """The matcher of ``prefix.N`` names (built once per prefix: every box's check asks)."""
    return re.compile(re.escape(prefix) + r"\.(\d+)$").match


def derived_schema(box: Box, port: int, fields: list[Field]) -> Schema:
    """The schema of out stream ``port`` of ``box``, named after the box (a derived stream has no declared name)."""
    return Schema(f"{box.name}.out{port}", tuple(fields))


def number_param(box: Box, name: str, *, low: float | None = None, high: float | None = None,
                 whole: bool = False) -> float | None:
    """Parameter ``name`` as a number within ``low``..``high`` (None: absent)."""
    text = box.param(name)
    if text is None:
        return None
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        kind = "a whole number" if whole else "a number"
        raise BoxError(f"box {box.name!r}: parameter {name!r}={text!r} is not {kind}") from None
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"{low if low is not None else '-inf'}..{high if high is not None else 'inf'}"
        raise BoxError(f"box {box.name!r}: parameter {name!r}={text!r} is outside {bounds}")
    return value


def check_slack(box: Box) -> None:
    """``slack``: how many tuples at or past a window's end the window still waits for (0 by default)."""
    text = box.param("slack")
    if text is None:
        return
    try:
        value = int(text.strip().lstrip("+"))
    except ValueError:
        value = -1
    if value < 0:
        raise BoxError(f"{box.type} box {box.name!r}: parameter 'slack'={text!r} must be a whole number "
                       f"of tuples, 0 or more (how many tuples at or past a window's end the window "
                       f"still waits for out-of-order tuples)")


def choice_param(box: Box, name: str, allowed: tuple[str, ...]) -> str | None:
    """Parameter ``name``, upper-cased, one of ``allowed`` (None: absent)."""
    value = box.param(name)
    if value is not None and value.upper() not in allowed:
        raise BoxError(f"box {box.name!r}: parameter {name!r}={value!r} must be one of {', '.join(allowed)}")
    return value.upper() if value is not None else None


def field_of(box: Box, schema: Schema, name: str, param: str) -> Field:
    """The field of ``schema`` that parameter ``param`` names."""
    found = schema.field(name.strip())
    if found is None:
        raise BoxError(
            f"box {box.name!r}: parameter {param!r} names unknown field {name.strip()!r} "
            f"(fields: {', '.join(f.name for f in schema.fields)})"
        )
    if found.array is not None:  # a group key, an order: compared and hashed, which an array is not
        raise BoxError(
            f"{box.type} box {box.name!r}: parameter {param!r} names field {found.name!r}, an array "
            f"({found.array}): a {param} field is compared (grouped, ordered) as one value, so it must be a "
            f"scalar; arrays pass through (docs/operators.md, \"Array fields\")"
        )
    return found
