"""A stateless ``m3`` view's WHERE and SELECT expressions on Arrow columns, with the M3 row path's semantics.

:mod:`.m3rows` runs a view without aggregates over one stream (a bag of
rows: projection, filter, ``CASE``, string functions) on a batch's columns.
This module translates the view's SQL expressions (the sqlglot tree of its
``SELECT``) into functions of the batch's ``RecordBatch``, one
``pyarrow.compute`` kernel per operation, with what the M3 runtime computes
per row as the definition (``m3/functions.py``: ``MOD`` truncates toward
zero, ``SPLIT_INDEX`` is ``str.split``'s part or ``''``, ``REGEXP_EXTRACT``
Python ``re.search``'s group or ``''``, ``IS NULL`` of it no match).

Exact or not at all, as :mod:`.arrow_exprs` for Borealis boxes, and with
its two refusals (:class:`~.arrow_nodes.Unsupported`,
:class:`~.arrow_nodes.Fallback`):

* at plan time, an expression outside what is translated here (a cast, a
  date, a division, a function not listed, a nullable column, a regular
  expression whose meaning Python's ``re`` and Arrow's RE2 might not share)
  raises ``Unsupported``: the view keeps the row path for every batch;
* per batch, values on which the two could differ raise ``Fallback``: an
  int64 overflow (Arrow's checked kernels), an int beyond 2**53 meeting a
  double, a non-ASCII string under ``LOWER``/``UPPER`` or a regular
  expression (Unicode case and classes), a newline under a regular
  expression (Python's ``$``), a match whose group is empty where
  ``IS NULL`` asks whether the group took part.  That batch takes the row
  path (:mod:`.m3rows`).

Kinds are M3's: ``INT`` (int64), ``FLOAT`` (float64), ``STRING``, ``BOOL``.

>>> import pyarrow as pa
>>> import sqlglot
>>> cols = {"url": ("STRING", 0), "price": ("INT", 1)}
>>> batch = pa.record_batch([pa.array(["a/b/c", "x"]), pa.array([7, -7])], names=["url", "price"])
>>> kind, run = translate(sqlglot.parse_one("SPLIT_INDEX(url, '/', 1)"), cols)
>>> kind, run(batch).to_pylist()
('STRING', ['b', ''])
>>> translate(sqlglot.parse_one("MOD(price, 3)"), cols)[1](batch).to_pylist()
[1, -1]
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import expressions as exp

from .arrow_nodes import ARROW_ERRORS, Fallback, Unsupported
from .m3rows_distinct import per_distinct
from .m3rows_regex import RE2Pattern

Run = Callable[[pa.RecordBatch], pa.Array | pa.Scalar]
Translated = tuple[str, Run]
#: a column's M3 kind and its index in the batch, by lower-case name
Columns = dict[str, tuple[str, int]]

_ARROW = {"INT": pa.int64(), "FLOAT": pa.float64(), "STRING": pa.string(), "BOOL": pa.bool_()}
_ZERO = pa.scalar(0, pa.int64())
_EXACT = 2 ** 53  # ints beyond it are not all doubles
_COMPARE = {exp.EQ: "equal", exp.NEQ: "not_equal", exp.GT: "greater", exp.GTE: "greater_equal",
            exp.LT: "less", exp.LTE: "less_equal"}
_ARITH = {exp.Add: "add_checked", exp.Sub: "subtract_checked", exp.Mul: "multiply_checked"}


def translate(node: exp.Expression, columns: Columns) -> Translated:
    """``(kind, batch -> values)`` of ``node``; :class:`Unsupported` when it has no exact translation here."""
    if isinstance(node, (exp.Paren, exp.Alias)):
        return translate(node.this, columns)
    if isinstance(node, exp.Column):
        return _column(node, columns)
    if isinstance(node, exp.Neg):
        return _folded(node, _arith("subtract_checked", ("INT", lambda b: _ZERO), translate(node.this, columns)))
    if isinstance(node, exp.Literal):
        return _literal(node)
    if type(node) in _COMPARE:
        left, right = translate(node.this, columns), translate(node.expression, columns)
        if "FLOAT" in (left[0], right[0]) and (_has_arith(node.this) or _has_arith(node.expression)):
            raise Unsupported(f"{node.sql()}: a comparison of float arithmetic (the compiler may move its terms)")
        return _compare(_COMPARE[type(node)], left, right)
    if type(node) in _ARITH:
        return _folded(node, _arith(_ARITH[type(node)], translate(node.this, columns),
                                    translate(node.expression, columns)))
    if isinstance(node, (exp.And, exp.Or)):
        (lk, left), (rk, right) = translate(node.this, columns), translate(node.expression, columns)
        if lk != "BOOL" or rk != "BOOL":
            raise Unsupported(f"{node.sql()}: AND/OR of non-conditions")
        fn = pc.and_ if isinstance(node, exp.And) else pc.or_
        return "BOOL", lambda b: fn(left(b), right(b))
    if isinstance(node, exp.Not):
        kind, inner = translate(node.this, columns)
        if kind != "BOOL":
            raise Unsupported(f"{node.sql()}: NOT of a non-condition")
        return "BOOL", lambda b: pc.invert(inner(b))
    if isinstance(node, exp.In):
        return _in(node, columns)
    if isinstance(node, exp.Is):
        return _is_null(node, columns)
    if isinstance(node, exp.Case):
        return _case(node, columns)
    if isinstance(node, exp.Mod):
        return _mod(translate(node.this, columns), node.expression)
    if isinstance(node, (exp.Lower, exp.Upper)):
        return _case_map(node, columns)
    if isinstance(node, exp.RegexpExtract):
        return _regexp_extract(node, columns)
    if isinstance(node, exp.Anonymous) and node.name.upper() == "SPLIT_INDEX":
        return _split_index(node, columns)
    raise Unsupported(f"{node.sql()}: not evaluated on columns")


def _column(node: exp.Column, columns: Columns) -> Translated:
    got = columns.get(node.name.lower())
    if got is None:
        raise Unsupported(f"{node.sql()}: not a column of the stream")
    kind, index = got
    if kind not in ("INT", "FLOAT", "STRING"):
        raise Unsupported(f"{node.sql()}: a {kind} column")
    want = _ARROW[kind]

    def run(batch: pa.RecordBatch) -> pa.Array:
        col = batch.column(index)
        if col.null_count:
            raise Fallback("a null value")
        return col if col.type == want else col.cast(want)
    return kind, run


def _literal(node: exp.Literal) -> Translated:
    if node.is_string:
        value = pa.scalar(node.this, pa.string())
        return "STRING", lambda b: value
    text = node.this
    if re.fullmatch(r"-?\d+", text):
        value = pa.scalar(int(text), pa.int64())
        return "INT", lambda b: value
    value = pa.scalar(float(text), pa.float64())
    return "FLOAT", lambda b: value


def _constant(node: exp.Expression, kind: type) -> object:
    """The value of a literal constant argument (a function's pattern, separator, group)."""
    if not isinstance(node, exp.Literal) or node.is_string != (kind is str):
        raise Unsupported(f"{node.sql()}: not a {kind.__name__} constant")
    return node.this if kind is str else int(node.this)


def _exact_ints(values: pa.Array | pa.Scalar) -> None:
    """Fallback where an int would not be the same number as a double (beyond 2**53)."""
    if isinstance(values, pa.Scalar):
        if abs(values.as_py()) > _EXACT:
            raise Fallback("an int beyond 2**53 beside a double")
        return
    if len(values):
        bounds = pc.min_max(values)
        if max(abs(bounds["min"].as_py()), abs(bounds["max"].as_py())) > _EXACT:
            raise Fallback("an int beyond 2**53 beside a double")


def _numeric(left: Translated, right: Translated) -> tuple[str, Run, Run]:
    """Both operands as one numeric kind: an INT beside a FLOAT becomes a double (exact below 2**53)."""
    (lk, lrun), (rk, rrun) = left, right
    if lk not in ("INT", "FLOAT") or rk not in ("INT", "FLOAT"):
        raise Unsupported("arithmetic of non-numbers")
    if lk == rk:
        return lk, lrun, rrun

    def widened(run: Run, kind: str) -> Run:
        if kind == "FLOAT":
            return run

        def to_float(batch):
            values = run(batch)
            _exact_ints(values)
            return values.cast(pa.float64())
        return to_float
    return "FLOAT", widened(lrun, lk), widened(rrun, rk)


def _compare(fn: str, left: Translated, right: Translated) -> Translated:
    if left[0] == "STRING" or right[0] == "STRING":
        if left[0] != right[0]:
            raise Unsupported("a string compared with a non-string")
        lrun, rrun = left[1], right[1]  # UTF-8 byte order is code point order, as Python compares str
    else:
        _, lrun, rrun = _numeric(left, right)
    kernel = getattr(pc, fn)
    return "BOOL", lambda b: kernel(lrun(b), rrun(b))


def _has_arith(node: exp.Expression) -> bool:
    return any(isinstance(n, (exp.Add, exp.Sub, exp.Mul, exp.Neg, exp.Div)) for n in node.walk())


def _folded(node: exp.Expression, result: Translated) -> Translated:
    """``result``, unless it is float arithmetic over arithmetic: the compiler folds and reorders sums and
    products (``x + 1.0 + 1.0`` is ``2.0 + X``, ``3 * (x - 0.1)`` is ``-0.30000000000000004 + 3 * X``), which
    rounds otherwise than the SQL as written; one operation of a column and a constant rounds the same."""
    operands = [node.this] + ([node.expression] if node.args.get("expression") is not None else [])
    if result[0] == "FLOAT" and any(_has_arith(o) for o in operands):
        raise Unsupported(f"{node.sql()}: float arithmetic of several operations (the compiler reorders them)")
    return result


def _arith(fn: str, left: Translated, right: Translated) -> Translated:
    kind, lrun, rrun = _numeric(left, right)
    kernel = getattr(pc, fn)

    def run(batch):
        try:
            return kernel(lrun(batch), rrun(batch))
        except ARROW_ERRORS as exc:  # an int64 overflow: the row path computes it (beyond 64 bits, on Python)
            raise Fallback(str(exc)) from None
    return kind, run


def _mod(value: Translated, divisor: exp.Expression) -> Translated:
    """``MOD(x, m)`` of an INT and a constant: ``x % |m|`` for ``x >= 0``, else ``-(-x % |m|)`` (truncated)."""
    kind, run = value
    m = abs(_constant(divisor, int))
    if kind != "INT" or m == 0:
        raise Unsupported("MOD of a non-INT or by 0")
    divisor_scalar = pa.scalar(m, pa.int64())

    def mod(batch):
        x = run(batch)
        return pc.subtract(x, pc.multiply(pc.divide(x, divisor_scalar), divisor_scalar))  # int divide truncates
    return "INT", mod


def _in(node: exp.In, columns: Columns) -> Translated:
    kind, run = translate(node.this, columns)
    if node.args.get("query") or not node.expressions:
        raise Unsupported(f"{node.sql()}: IN of a subquery")
    values = [translate(e, columns) for e in node.expressions]
    if any(not isinstance(e, exp.Literal) for e in node.expressions) or any(k != kind for k, _ in values):
        raise Unsupported(f"{node.sql()}: IN a list of other than constants of its kind")
    value_set = pa.array([run_(None).as_py() for _, run_ in values], _ARROW[kind])
    return "BOOL", lambda b: pc.is_in(run(b), value_set=value_set)


def _case(node: exp.Case, columns: Columns) -> Translated:
    if node.args.get("default") is None:
        raise Unsupported(f"{node.sql()}: CASE without ELSE (NULL)")
    subject = translate(node.this, columns) if node.this is not None else None
    conditions, values = [], []
    for branch in node.args["ifs"]:
        test = translate(branch.this, columns)
        if subject is not None:
            test = _compare("equal", subject, test)
        if test[0] != "BOOL":
            raise Unsupported(f"{node.sql()}: a WHEN that is no condition")
        conditions.append(test[1])
        values.append(translate(branch.args["true"], columns))
    values.append(translate(node.args["default"], columns))
    kinds = {k for k, _ in values}
    if len(kinds) != 1 or kinds == {"BOOL"}:
        raise Unsupported(f"{node.sql()}: CASE of values of several kinds")
    kind = kinds.pop()
    runs = [r for _, r in values]

    def run(batch):
        n = batch.num_rows
        tests = [_array(c(batch), n, pa.bool_()) for c in conditions]
        return pc.case_when(pc.make_struct(*tests, field_names=[str(i) for i in range(len(tests))]),
                            *(_array(r(batch), n, _ARROW[kind]) for r in runs))
    return kind, run


def _array(value: pa.Array | pa.Scalar, n: int, kind: pa.DataType) -> pa.Array:
    return pa.repeat(value, n) if isinstance(value, pa.Scalar) else value


def _ascii(values: pa.Array | pa.Scalar, what: str) -> None:
    """Fallback unless every string is ASCII (Python's Unicode case and classes are not Arrow's)."""
    if isinstance(values, pa.Scalar):
        values = pa.array([values.as_py()], pa.string())
    if len(values) and not pc.all(pc.string_is_ascii(values)).as_py():
        raise Fallback(f"a non-ASCII string under {what}")


def _case_map(node: exp.Expression, columns: Columns) -> Translated:
    kind, run = translate(node.this, columns)
    if kind != "STRING":
        raise Unsupported(f"{node.sql()}: of a non-string")
    kernel = pc.ascii_lower if isinstance(node, exp.Lower) else pc.ascii_upper

    def mapped(batch):
        values = run(batch)
        _ascii(values, "LOWER/UPPER")
        return kernel(values)  # (one pass over the bytes: cheaper than making the values distinct)
    return "STRING", mapped


_SPLIT_MOST = 16  # the largest SPLIT_INDEX part taken on columns


def _split_index(node: exp.Anonymous, columns: Columns) -> Translated:
    """``SPLIT_INDEX(s, sep, i)``: ``s.split(sep)[i]``, ``''`` past the end.  The string padded with ``i + 1``
    separators always has an ``i``-th part, the same one where ``s`` has it (``''`` where not); exact for a
    one-character separator (a longer one could meet the padding inside the string's end)."""
    if len(node.expressions) != 3:
        raise Unsupported(f"{node.sql()}: SPLIT_INDEX of other than three arguments")
    kind, run = translate(node.expressions[0], columns)
    sep, i = _constant(node.expressions[1], str), _constant(node.expressions[2], int)
    if kind != "STRING" or len(sep) != 1:
        raise Unsupported(f"{node.sql()}: SPLIT_INDEX of a non-string or by other than one character")
    if i < 0:
        empty = pa.scalar("", pa.string())
        return "STRING", lambda b: empty
    if i > _SPLIT_MOST:  # (the padding below costs i + 1 characters a row: a large index is the row path's)
        raise Unsupported(f"{node.sql()}: SPLIT_INDEX past part {_SPLIT_MOST}")
    pad = pa.scalar(sep * (i + 1), pa.string())

    def part(batch):
        return per_distinct(run(batch), lambda v: pc.list_element(
            pc.split_pattern(pc.binary_join_element_wise(v, pad, ""), sep), i))
    return "STRING", part


def _regexp_extract(node: exp.RegexpExtract, columns: Columns) -> Translated:
    """``REGEXP_EXTRACT(s, pattern[, group])``: the group of the first match, ``''`` without one; ``IS NULL`` of
    it (:func:`_is_null`) reads whether the group took part in a match."""
    extra = {k for k, v in node.args.items() if v is not None} - {"this", "expression", "position", "group"}
    if extra or (node.args.get("position") is not None and node.args.get("group") is not None):
        raise Unsupported(f"{node.sql()}: REGEXP_EXTRACT's arguments")
    kind, run = translate(node.this, columns)
    group = node.args.get("group") or node.args.get("position")
    g = 1 if group is None else _constant(group, int)
    regex = RE2Pattern(_constant(node.expression, str))
    if kind != "STRING" or not 1 <= g <= regex.groups:
        raise Unsupported(f"{node.sql()}: REGEXP_EXTRACT of a non-string or of a group it lacks")
    empty = pa.scalar("", pa.string())

    def extract(batch) -> pa.Array:
        values = run(batch)
        if isinstance(values, pa.Scalar):
            raise Fallback("REGEXP_EXTRACT of a constant")
        _ascii(values, "a regular expression")
        if len(values) and pc.any(pc.match_substring(values, "\n")).as_py():
            raise Fallback("a newline under a regular expression")
        return per_distinct(values, lambda v: pc.struct_field(pc.extract_regex(v, regex.pattern), [g - 1]))

    def value(batch):
        return pc.fill_null(extract(batch), empty)

    def found(batch):
        got = extract(batch)
        if pc.any(pc.equal(got, empty)).as_py():  # matched with an empty group: took part or not, Arrow cannot say
            raise Fallback("a match with an empty group")
        return pc.is_valid(got)
    value.found = found  # type: ignore[attr-defined]
    return "STRING", value


def _is_null(node: exp.Is, columns: Columns) -> Translated:
    """``REGEXP_EXTRACT(...) IS NULL``: no match (M3's ``REGEXP_FOUND = 0``); other values are never NULL here
    (the stream's columns are not nullable), which the row path has its own rules for: not translated."""
    if not isinstance(node.expression, exp.Null) or not isinstance(node.this, exp.RegexpExtract):
        raise Unsupported(f"{node.sql()}: IS of other than REGEXP_EXTRACT and NULL")
    _, value = _regexp_extract(node.this, columns)
    found = value.found  # type: ignore[attr-defined]
    return "BOOL", lambda b: pc.invert(found(b))
