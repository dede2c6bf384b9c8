"""Values as Python writes them as text, and LIKE, on Arrow columns: concat, casts to varchar, LIKE of a column.

The row code makes text with ``str(x)`` (``_text`` in
:mod:`boreas.node.compile_helpers`: concat, ``cast(x as varchar)``): an int
in decimal, a bool ``True``/``False``, a double as ``repr`` -- the shortest
digits that read back to the same double, laid out fixed when ``1e-4 <= |x|
< 1e16`` (``123.0``, ``0.0001``, ``-0.0``) and as an exponent otherwise
(``1e+16``, ``1e-05``, ``1.5e+300``), and ``nan``, ``inf``, ``-inf``.

Arrow's cast of a double to text writes the same shortest digits
(double-conversion's shortest mode, as Python's ``repr`` is David Gay's: both
the shortest correctly rounded string) in another layout (``123``,
``1.2345678901225e+11``, ``0.00001``, ``1e-7``), so :func:`double_text`
re-lays it out on columns:

* a whole double below 1e16 is its int64 text and ``.0`` (below 1e16 the
  shortest digits of a whole double are the integer's own: every integer
  with fewer digits is another double), ``-0.0`` kept;
* fixed in both: Arrow's text; an exponent in Arrow's and fixed in Python's
  (exponent 0..15): the point moved, one regex per exponent in the batch;
* an exponent in both: written with two digits at least (``e-07``); fixed in
  Arrow's and an exponent in Python's (``0.00001``): rewritten per count of
  leading zeros;
* any row none of those shapes gives is flagged: the row code writes it.

LIKE is the row code's anchored regex (``%`` any run, ``_`` one character,
every other character itself: there is no escape character, ``\\`` is a
backslash): Arrow's ``match_like`` is the same where the pattern has no
backslash (Arrow reads one as an escape); a pattern with one is given to
RE2 as the row code's regex, each character that is not a letter or digit
written as ``\\x{..}``, so it means no more to RE2 than to Python.  A
pattern read from a column is matched one distinct pattern at a time (the
:data:`PATTERNS` most frequent of the batch); rows with any other pattern
are flagged for the row code.

>>> import pyarrow as pa
>>> from boreas.node.operators.arrow_nodes import Eval
>>> ev = Eval(pa.record_batch([pa.array([1.0])], names=["d"]))
>>> values = pa.array([123.0, 1e16, 1e-5, -0.0, 123456789012.25, float("nan"), 0.5])
>>> double_text(values, ev).to_pylist()
['123.0', '1e+16', '1e-05', '-0.0', '123456789012.25', 'nan', '0.5']
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

import pyarrow as pa
import pyarrow.compute as pc

from boreas.node.compile import BOOL, FLOAT, INT, STR

from .arrow_nodes import NUM, Eval, Node, Run, Unsupported, Value, strict

#: How many distinct patterns of a LIKE whose pattern is a column are matched on columns per batch.
PATTERNS = 16

_BIG, _SMALL = pa.scalar(1e16), pa.scalar(1e-4)
_SIGNED_ZERO_TEXT = pa.scalar("-0.0")
_FIXED_SHAPE = r"^-?(0|[1-9][0-9]*)\.[0-9]+$"  # Python's fixed layout, as a check of the rewrites
_EXP_SHAPE = r"^-?[1-9](\.[0-9]*[1-9])?e[+-][0-9]{2,3}$"  # and its exponent layout


def _masked(mask: pa.Array) -> pa.Array:
    return pc.fill_null(mask, False)


def _relaid(text: pa.Array, rows: pa.Array, patterns: list[tuple[str, str]]) -> pa.Array:
    """``text`` with the regex rewrites ``patterns`` applied to the ``rows`` alone (each rewrite matches only
    the shape it is for, so applying them in turn is applying the right one)."""
    if not rows.true_count:
        return text
    part = text.filter(rows)
    for pattern, rewrite in patterns:
        part = pc.replace_substring_regex(part, pattern, rewrite)
    return pc.replace_with_mask(text, rows, part)


def double_text(value: pa.Array, ev: Eval) -> pa.Array:
    """Python's ``repr`` of each double of ``value`` (float64); rows not laid out exactly are flagged.

    Most doubles Arrow writes fixed where Python does: the rest of a number (``123.25``) as Arrow's, a whole
    one (``500``, ``-0``) with ``.0`` added (below 1e16 both are the integer's own digits).  Only the other
    rows (an exponent in either layout) go through :func:`_relaid_text`."""
    text = pc.cast(value, pa.string())
    size = pc.abs(value)
    fixed = pc.invert(pc.match_substring(text, "e"))  # (nan and inf too: Arrow writes them as Python does)
    whole = pc.and_(pc.equal(value, pc.floor(value)), pc.less(size, _BIG))  # (false for nan, inf)
    python_fixed = pc.and_(pc.greater_equal(size, _SMALL), pc.less(size, _BIG))
    plain = _masked(pc.and_(fixed, pc.or_(whole, python_fixed)))
    finite = _masked(pc.is_finite(value))
    special = pc.and_not(finite, plain)
    padded = _masked(pc.and_(fixed, whole))
    if padded.true_count:
        text = pc.if_else(padded, pc.binary_join_element_wise(text, ".0", ""), text)
    if not special.true_count:
        return text
    part, wrong = _relaid_text(value.filter(special), text.filter(special))
    if wrong.true_count:
        ev.flag(pc.replace_with_mask(pa.repeat(pa.scalar(False), len(value)), special, wrong))
    return pc.replace_with_mask(text, special, part)


def _relaid_text(value: pa.Array, text: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Python's layout of finite doubles ``value`` that Arrow wrote as ``text``, and the rows it cannot give."""
    size = pc.abs(value)
    whole = pc.and_(pc.equal(value, pc.floor(value)), pc.less(size, _BIG))
    exp_form = pc.match_substring(text, "e")
    python_fixed = pc.and_(pc.greater_equal(size, _SMALL), pc.less(size, _BIG))
    python_exp = pc.and_not(pc.invert(python_fixed), whole)  # (zero is whole)
    # whole: the integer's digits and ".0"; -0.0 keeps its sign
    ints = pc.cast(pc.if_else(whole, value, 0.0), pa.int64()).cast(pa.string())
    out = pc.if_else(whole, pc.binary_join_element_wise(ints, ".0", ""), text)
    out = pc.if_else(pc.and_(whole, pc.starts_with(text, "-0")), _SIGNED_ZERO_TEXT, out)
    if whole.true_count == len(value):  # (each regex below is compiled per call: only where needed)
        return out, pa.repeat(pa.scalar(False), len(value))
    # fixed in Python, an exponent in Arrow: the point moved right by the exponent
    moved = pc.and_(pc.and_not(python_fixed, whole), exp_form)
    if moved.true_count:
        exponents = pc.extract_regex(text.filter(moved), r"e\+(?P<x>\d+)$").field("x")
        found = sorted(int(x) for x in pc.unique(exponents).to_pylist() if x is not None and int(x) < 16)
        out = _relaid(out, moved, [(rf"^(-?)(\d)\.(\d{{{x}}})(\d+)e\+{x}$", r"\1\2\3.\4") for x in found])
    # an exponent in Python: at least two digits of it; Arrow's fixed 0.0000ddd written as one
    out = _relaid(out, pc.and_(python_exp, exp_form), [(r"e([+-])(\d)$", r"e\10\2")])
    out = _relaid(out, pc.and_not(python_exp, exp_form), [
        (rf"^(-?)0\.0{{{k}}}([1-9])(\d*)$", rf"\1\2.\3e-{k + 1:02d}") for k in range(4, 9)] + [(r"\.e", "e")])
    # what no shape above gave: the row code writes it
    fixed_shape = pc.match_substring_regex(out, _FIXED_SHAPE)
    exp_shape = pc.match_substring_regex(out, _EXP_SHAPE)
    wrong = pc.or_(pc.and_not(python_fixed, fixed_shape), pc.and_not(python_exp, exp_shape))
    return out, pc.and_not(wrong, whole)


def _python_text(kind: str, value: object, is_int: bool) -> str | None:
    """The row code's ``str(x)`` of one constant (a value folded when the box was built)."""
    if value is None:
        return None
    if kind == NUM and is_int:
        return str(int(value))  # type: ignore[call-overload]
    return str(value)


def text_of(node: Node, ev: Eval, value: Value) -> Value:
    """``value`` (``node``'s, evaluated on ``ev``) as the row code's ``str()`` writes it."""
    if node.kind == STR:
        return value
    if isinstance(value, pa.Scalar):
        is_int = node.kind == NUM and bool(node.ints and node.ints(ev).as_py())
        return pa.scalar(_python_text(node.kind, value.as_py(), is_int), pa.string())
    if node.kind == INT:
        return value.cast(pa.string())
    if node.kind == BOOL:
        return pc.if_else(value, "True", "False")
    doubles = value if value.type == pa.float64() else value.cast(pa.float64())
    if node.kind == FLOAT:
        return double_text(doubles, ev)
    assert node.kind == NUM and node.ints is not None
    ints = _masked(node.ints(ev))
    as_int = pc.cast(pc.if_else(ints, doubles, 0.0), pa.int64()).cast(pa.string())  # (exact: beyond 2**53 flagged)
    return pc.if_else(ints, as_int, double_text(pc.if_else(ints, 0.0, doubles), ev))


def _printable(node: Node) -> None:
    if node.kind not in (STR, INT, FLOAT, BOOL, NUM) or node.truth_only:
        raise Unsupported(f"text of a {node.kind} value (its kind depends on the row, or it is NULL)")


def cast_text(a: Node) -> Node:
    """``cast(a as varchar)``: the row code's ``_text`` (None fails the expression)."""
    _printable(a)
    return Node(STR, lambda ev: text_of(a, ev, strict(a, ev)))


def concat(parts: list[Node]) -> Node:
    """``concat(...)``: each part's text joined (a None in any part fails the expression, but in a lone string
    part, which the row code passes on as it is)."""
    if not parts:
        empty = pa.scalar("", pa.string())
        return Node(STR, lambda ev: empty)
    for p in parts:
        _printable(p)
    if len(parts) == 1 and parts[0].kind == STR:  # the row code's one string part is the field itself: None passes
        return parts[0]

    def run(ev: Eval) -> Value:
        texts = [text_of(p, ev, strict(p, ev)) for p in parts]
        return texts[0] if len(texts) == 1 else pc.binary_join_element_wise(*texts, "")
    return Node(STR, run)


# -- LIKE ----------------------------------------------------------------------------------------


def _operand(node: Node, three: bool) -> Run:
    """An operand's value: its nulls failing the row (Python raises), or passed on under SQL's logic."""
    return node.run if three else (lambda ev: strict(node, ev))


@lru_cache(maxsize=1024)
def like_regex(pattern: str) -> str:
    """The row code's LIKE regex (``like_pattern``) as RE2 reads it: anchored, ``.`` matching newlines."""
    return "(?s)\\A" + "".join(
        ".*" if ch == "%" else "." if ch == "_" else ch if ch.isascii() and ch.isalnum() else f"\\x{{{ord(ch):x}}}"
        for ch in pattern) + "\\z"


def matched(values: Value, pattern: str) -> Value:
    """``values like pattern``: Arrow's ``match_like`` where it is the row code's (no backslash: Arrow reads
    one as an escape, the row code as itself), else the row code's regex for RE2."""
    if "\\" in pattern:
        return pc.match_substring_regex(values, like_regex(pattern))
    return pc.match_like(values, pattern)


def like(a: Node, pattern: Node, three: bool = False) -> Node:
    """``a like pattern`` of strings: a constant pattern matched once; a pattern that is a column matched per
    distinct pattern of the batch (its :data:`PATTERNS` most frequent; rows with another one flagged)."""
    if a.kind != STR or pattern.kind != STR or a.truth_only or pattern.truth_only:
        raise Unsupported("LIKE of a non-string, or with a pattern that is not one")
    text = _operand(a, three)
    if pattern.constant and pattern.run(Eval(None)).is_valid:
        fixed = pattern.run(Eval(None)).as_py()
        return Node(BOOL, lambda ev: matched(text(ev), fixed), nullable=three)
    patterns = _operand(pattern, three)

    def run(ev: Eval) -> Value:
        values, wanted = text(ev), patterns(ev)
        if isinstance(wanted, pa.Scalar):
            return matched(values, wanted.as_py()) if wanted.is_valid else pa.scalar(None, pa.bool_())
        if isinstance(values, pa.Scalar):
            values = pa.repeat(values, len(wanted))
        codes = wanted.dictionary_encode()  # the distinct patterns once; rows compared by their int code
        indices, distinct = codes.indices, codes.dictionary.to_pylist()
        counts = np.bincount(indices.fill_null(len(distinct)).to_numpy(zero_copy_only=False),
                             minlength=len(distinct) + 1)[:len(distinct)]
        common = sorted(range(len(distinct)), key=lambda k: -counts[k])[:PATTERNS]
        out = pa.nulls(len(wanted), pa.bool_())
        for k in common:
            out = pc.if_else(_masked(pc.equal(indices, k)), matched(values, distinct[k]), out)
        if len(common) < len(distinct):
            others = _masked(pc.invert(pc.is_in(indices, value_set=pa.array(common, indices.type))))
            ev.flag(others)
            out = pc.if_else(others, False, out)
        return out
    return Node(BOOL, run, nullable=three)
