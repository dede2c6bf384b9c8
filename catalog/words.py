"""Words in messages: a count with its noun in the right number, and "did you mean" for an unknown name.

Every layer says these to people (the CLI, the Head's and the nodes' error
answers, logs), so they live at the bottom, beside the catalog's names.

>>> counted(1, "batch"), counted(3, "batch"), counted(0, "entry"), counted(2, "box")
('1 batch', '3 batches', '0 entries', '2 boxes')
>>> unknown("stream", "Readng", ["Reading", "Average"])
"no stream 'Readng' (did you mean 'Reading'?)"
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: Nouns whose plural is not the noun with -s, -es or -ies.
_IRREGULAR = {"query": "queries", "entry": "entries", "child": "children"}


def plural(noun: str) -> str:
    """The plural of an English noun as Boreas's messages use them.

    >>> [plural(w) for w in ("row", "batch", "box", "entry", "key", "bytes")]
    ['rows', 'batches', 'boxes', 'entries', 'keys', 'bytes']
    """
    if noun in _IRREGULAR:
        return _IRREGULAR[noun]
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun if noun.endswith("s") else noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u"):
        return noun[:-1] + "ies"
    return noun + "s"


def counted(n: int, noun: str, many: str | None = None, sep: str = "") -> str:
    """``n`` and ``noun`` (``many`` or its :func:`plural` unless ``n`` is 1); ``sep=","`` writes 1,000."""
    return f"{n:{sep}} {noun if n == 1 else many or plural(noun)}"


def close_matches(name: str, names: Iterable[str], n: int = 3) -> list[str]:
    """The names closest to ``name`` (case-insensitively), best first: what "did you mean" offers."""
    by_lower: dict[str, str] = {}
    for candidate in names:
        by_lower.setdefault(candidate.lower(), candidate)
    found = difflib.get_close_matches(name.lower(), list(by_lower), n=n, cutoff=0.6)
    return [by_lower[f] for f in found if by_lower[f] != name]


def did_you_mean(suggestions: Iterable[str]) -> str:
    """`` (did you mean 'a'?)``, `` (did you mean 'a' or 'b'?)``, or nothing.

    >>> did_you_mean(["a", "b", "c"]), did_you_mean([])
    (" (did you mean 'a', 'b' or 'c'?)", '')
    """
    quoted = [repr(s) for s in suggestions]
    if not quoted:
        return ""
    text = quoted[-1] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return f" (did you mean {text}?)"


def unknown(kind: str, name: str, names: Iterable[str], where: str = "") -> str:
    """``no KIND 'NAME'[ WHERE] (did you mean ...?)``: the one line for a name that is not there."""
    return f"no {kind} {name!r}{' ' + where if where else ''}{did_you_mean(close_matches(name, names))}"
