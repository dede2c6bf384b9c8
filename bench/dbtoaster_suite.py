"""Measure: how many queries of DBToaster's public query suite Boreas compiles, and why it refuses the rest.

Issue 33's measure is the DBToaster project's suite (``test/queries/`` of
the public ``dbtoaster/dbtoaster-a5`` repository: simple, TPC-H, TPC-DS,
finance, employee, mddb, zeus; its ``error/`` folder holds queries that
must be refused).  Nothing of the suite is copied into this repository:
the path to a checkout is given on the command line.

How a file is read (the method docs/m3.md's "DBToaster's query suite"
records): its ``INCLUDE 'file';`` statements are inlined, comments and the
``FROM FILE ... ;`` / ``FROM SOCKET ... ;`` source clauses of its
``CREATE STREAM``/``TABLE`` statements are removed, and the whole file is
compiled as an ``m3`` box's SQL is.  A *valid* query is a ``.sql`` file
outside ``error/`` with a ``SELECT`` (schema files have none).

Usage: .venv/bin/python bench/dbtoaster_suite.py PATH/TO/dbtoaster-a5 [--reasons] [--list]
"""

from __future__ import annotations

import argparse
import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from boreas.m3 import compile_sql

INCLUDE = re.compile(r"INCLUDE\s+'\.?/?([^']+)'\s*;")
SOURCE = re.compile(r"\bFROM\s+(FILE|SOCKET)\b(?:'[^']*'|[^;'])*;", re.IGNORECASE)


def text_of(root: Path, path: Path) -> str:
    """The file with its INCLUDEs inlined (paths are relative to the checkout's root, as the suite writes them)."""
    text = path.read_text(errors="replace")
    return INCLUDE.sub(lambda m: text_of(root, root / m.group(1)), text)


def cleaned(text: str) -> str:
    """Without comments and without the source clauses Boreas has no use for (its streams come from the catalog)."""
    return SOURCE.sub(";", re.sub(r"--[^\n]*", "", text))


def reason_of(exc: Exception) -> str:
    """The refusal without view names and positions, so that one cause counts once."""
    return re.sub(r" in view \w+.*| \(at line.*|\(.*", "", str(exc))[:110]


@dataclass
class Tally:
    """The suite's outcome: valid queries compiled or refused (with reasons), and the error queries."""

    compiled: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)
    errors_refused: list[str] = field(default_factory=list)
    errors_compiled: list[str] = field(default_factory=list)

    def summary(self) -> str:
        valid = len(self.compiled) + len(self.refused)
        errors = len(self.errors_refused) + len(self.errors_compiled)
        return (f"valid: {valid}, compile: {len(self.compiled)} ({100 * len(self.compiled) / max(valid, 1):.0f}%); "
                f"error queries refused: {len(self.errors_refused)} of {errors}")


def measure(root: Path) -> Tally:
    """Compile every query of the checkout at ``root``."""
    suite = root / "test" / "queries"
    tally = Tally()
    for path in sorted(suite.rglob("*.sql")):
        rel = path.relative_to(suite)
        text = cleaned(text_of(root, path))
        if not re.search(r"\bSELECT\b", text, re.IGNORECASE):
            continue
        is_error = rel.parts[0] == "error"
        try:
            compile_sql(text)
        except Exception as exc:  # noqa: BLE001 - every refusal is counted, whatever its class
            (tally.errors_refused if is_error else tally.refused).append(str(rel))
            if not is_error:
                tally.reasons[reason_of(exc)] += 1
        else:
            (tally.errors_compiled if is_error else tally.compiled).append(str(rel))
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a checkout of dbtoaster/dbtoaster-a5")
    parser.add_argument("--reasons", action="store_true", help="the refusals, most frequent first")
    parser.add_argument("--list", action="store_true", help="every compiled query (and any error query compiled)")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # the compiler's notes would drown the counts
    tally = measure(args.checkout)
    print(tally.summary())
    if args.reasons:
        for reason, count in tally.reasons.most_common(40):
            print(f"{count:4d} {reason}")
    if args.list:
        print("\n".join(f"OK {name}" for name in tally.compiled))
        print("\n".join(f"ERROR QUERY COMPILED {name}" for name in tally.errors_compiled))


if __name__ == "__main__":
    main()
