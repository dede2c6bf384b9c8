"""M3: the trigger language of Cumulus/DBToaster, a SQL → M3 compiler, and a code-generating runtime.

Public API::

    compile_sql(sql_text) -> Program          # CREATE STREAM/TABLE ...; SELECT ... (one or more)
    compile_to_text(sql_text) -> str          # the program as M3 text (``boreas compile``)
    parse_program(text) -> Program            # M3 text -> AST
    format_program(program) -> str            # AST -> M3 text (parse(format(p)) == p)
    check_program(program) -> Program         # raises CheckError (restricted M3, section 2.1)
    Runtime(program_or_text, backend="auto")  # maps + generated triggers: "native" (C, docs/m3_native.md),
                                              # "python", or auto (native where a compiler is, else python)
        .backend, .backend_reason             # which one runs; why auto fell back to python
        .apply_columns(relation, sign, columns) / .apply_grouped_columns([...])  # columnar batches
        .apply_batch([(relation, +1|-1, row), ...]) -> version
        .apply_grouped([(relation, sign, rows), ...]) -> version
        .changes() -> {view: [(key, value)]}  # value 0 = removed (NULL values, ALWAYS with WHERE: GONE)
        .view(name) -> {key: value}
        .relations / .views                   # in/out port schemas
        .read_slice/read_sum/read_min/read_max(map, *keys)   # None = wildcard
        .read_stable(map, agg, *keys), .snapshot(), .version
        .state() -> dict, .restore(state), Runtime.from_state(state)
        .load({relation: rows})               # initial values from the defining queries

Errors: :class:`ParseError`, :class:`CheckError`, :class:`CompileError`,
:class:`RuntimeStateError`, all :class:`M3Error` with a message naming the
construct and its line:col.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# Importing boreas.m3.cumulus (layouts, which clients and the CLI need) must not import the SQL
# compiler and sqlglot: the names below are imported when first used, not with the package.
#: Each exported name -> the module that defines it (imported on first use, PEP 562).
_EXPORTS = {
    "Program": ".ast",
    "check_errors": ".check",
    "check_program": ".check",
    "classify": ".check",
    "compile_sql": ".compiler.pipeline",
    "compile_to_text": ".compiler.pipeline",
    "CheckError": ".errors",
    "CompileError": ".errors",
    "M3Error": ".errors",
    "ParseError": ".errors",
    "Pos": ".errors",
    "RuntimeStateError": ".errors",
    "format_expr": ".printer",
    "format_program": ".printer",
    "Snapshot": ".query",
    "Runtime": ".runtime.program",
    "ViewInfo": ".runtime.ports",
    "parse_expr": ".syntax",
    "parse_program": ".syntax",
}

__all__ = [
    "CheckError",
    "CompileError",
    "M3Error",
    "ParseError",
    "Pos",
    "Program",
    "Runtime",
    "RuntimeStateError",
    "Snapshot",
    "ViewInfo",
    "check_errors",
    "check_program",
    "classify",
    "compile_sql",
    "compile_to_text",
    "format_expr",
    "format_program",
    "parse_expr",
    "parse_program",
]

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ imports on use
    from .ast import Program
    from .check import check_errors, check_program, classify
    from .compiler.pipeline import compile_sql, compile_to_text
    from .errors import (
        CheckError,
        CompileError,
        M3Error,
        ParseError,
        Pos,
        RuntimeStateError,
    )
    from .printer import format_expr, format_program
    from .query import Snapshot
    from .runtime.ports import ViewInfo
    from .runtime.program import Runtime
    from .syntax import parse_expr, parse_program


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value
