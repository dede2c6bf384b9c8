"""Measure: how many application files of Borealis's own test suite Boreas accepts, and why it refuses the rest.

Issue 35's measure is Borealis's test suite (``test/`` of the public
Borealis sources, the ``dhu/conger`` repository): every ``*.xml`` under
it whose root element is ``<borealis>`` (123 files).  Each is validated
alone against an empty catalog, exactly as ``boreas validate FILE`` does
(hardened parse, XSD, merge, whole-topology validation with the ``m3``
box type plugged in).  Nothing of the suite is copied into this
repository: the path to a checkout is given on the command line.

Refusals are grouped by reason: the first problem of each refused file,
with file names, line numbers and element names taken out so that the same
cause counts once (``box type 'revisionmap'`` stays, since box types are
what the issue counts).

Usage: .venv/bin/python bench/borealis_suite.py PATH/TO/conger [--list] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from boreas.catalog import Catalog, plan_submission
from boreas.catalog.diagnostics import ValidationFailed
from boreas.catalog.documents import read_file
from boreas.m3.boxtype import box_types


@dataclass(frozen=True)
class Outcome:
    """One suite file: accepted, or the problems that refused it."""

    path: Path
    problems: tuple[str, ...]

    @property
    def accepted(self) -> bool:
        return not self.problems


def suite_files(root: Path) -> list[Path]:
    """The suite: XML files under ``root/test`` whose root element is ``<borealis>``."""
    found = []
    for path in sorted((root / "test").rglob("*.xml")):
        head = path.read_bytes()[:4096]
        if re.search(rb"<borealis[\s>]", head):
            found.append(path)
    return found


def validate(path: Path) -> Outcome:
    """What ``boreas validate PATH`` says about one file, against an empty catalog."""
    try:
        plan = plan_submission(Catalog(), [read_file(str(path))], box_types())
    except ValidationFailed as exc:
        return Outcome(path, tuple(str(d) for d in exc.diagnostics))
    return Outcome(path, tuple(str(d) for d in plan.problems))


_QUOTED_NAME = re.compile(r"(box|stream|schema|field|table|input|output|publication|subscription) '[^']*'")


def reason(problem: str) -> str:
    """A problem without its file, line, element path and element names: the cause, to count."""
    text = re.sub(r"^\S+?:\d+:\s*", "", problem)
    text = re.sub(r"^/\S+:\s*", "", text)
    text = re.sub(r"box type '([^']*)'", r"box type «\1»", text)
    text = _QUOTED_NAME.sub(r"\1 '…'", text)
    return re.sub(r"«([^»]*)»", r"'\1'", text)[:160]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="a checkout of the Borealis sources (dhu/conger)")
    parser.add_argument("--list", action="store_true", help="also print every file's outcome and first problem")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args(argv)
    files = suite_files(args.root)
    if not files:
        print(f"{args.root}: no <borealis> XML files under test/", file=sys.stderr)
        return 2
    outcomes = [validate(path) for path in files]
    accepted = sum(o.accepted for o in outcomes)
    reasons = Counter(reason(o.problems[0]) for o in outcomes if not o.accepted)
    if args.json:
        print(json.dumps({"files": len(files), "accepted": accepted, "refused": dict(reasons.most_common())}, indent=1))
        return 0
    if args.list:
        for o in outcomes:
            rel = o.path.relative_to(args.root)
            print(f"{'ok  ' if o.accepted else 'REF '} {rel}" + ("" if o.accepted else f"  {o.problems[0]}"))
    print(f"accepted {accepted} of {len(files)}")
    for text, n in reasons.most_common():
        print(f"{n:4d}  {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
