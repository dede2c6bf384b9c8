"""Which tests ``make test-fast`` leaves out for their time: measured, listed in ``tests/fast_left_out.txt``.

``make test-fast`` is the inner loop and must finish in about 3 minutes on 2 cores; ``make test`` runs
everything.  The marks (``slow``, ``faults``) say what a test *is* (Spark, ZooKeeper, kill -9); what a test
*costs* is measured.  ``make fast-list`` runs the test-fast selection with every test in it and writes here
each test that took :data:`THRESHOLD` seconds or more, except that the cheapest test of every module stays in
(one quick test of each area).  ``tests/conftest.py`` marks the listed tests ``slow``, so ``-m "not slow"``
leaves them out and ``make test`` still runs them.  A test not in the list (a new one) runs in test-fast until
the list is made again; a listed test that no longer exists is ignored.

The keys are junit's ``classname::name``, the test's id without xdist's ``@group`` suffix:

>>> key_of_nodeid("tests/m3/test_native.py::TestCache::test_loaded[a/b]")
'tests.m3.test_native.TestCache::test_loaded[a/b]'
>>> key_of_junit("tests.test_moves", "test_a_box_moves_once[sqlite]@processes")
'tests.test_moves::test_a_box_moves_once[sqlite]'
>>> key_of_junit("tests.test_x", "test_y[a@b]")
'tests.test_x::test_y[a@b]'
>>> chosen({"m": [(0.1, "m::a"), (2.0, "m::b")], "n": [(3.0, "n::c"), (5.0, "n::d")]}, 1.0)
['m::b', 'n::d']
"""

from __future__ import annotations

import os
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

#: Seconds (setup, call and teardown, as junit counts them, on a quiet 2-core machine) at which a test leaves
#: test-fast.  Chosen so the rest (about 4.5 minutes of test time on two workers) runs in about 3 minutes.
THRESHOLD = 0.4

#: xdist's ``@group`` suffix of a test's name in the junit (after its parameters, never inside them).
GROUP = re.compile(r"@[A-Za-z_][\w-]*$")

LIST = Path(__file__).resolve().parent.parent / "fast_left_out.txt"


def key_of_nodeid(nodeid: str) -> str:
    """The list's key of a collected test (its node id: ``path.py::[Class::]name[params]``)."""
    path, _, rest = nodeid.partition("::")
    *classes, name = rest.split("::")
    return ".".join([path.removesuffix(".py").replace("/", "."), *classes]) + "::" + name


def key_of_junit(classname: str, name: str) -> str:
    """The list's key of a junit test case (xdist's ``@group`` suffix dropped)."""
    return classname + "::" + GROUP.sub("", name)


def left_out() -> frozenset[str]:
    """The keys listed (empty when there is no list, or with ``BOREAS_FAST_LIST=off``, as ``make fast-list``
    runs)."""
    if os.environ.get("BOREAS_FAST_LIST") == "off" or not LIST.exists():
        return frozenset()
    return frozenset(line.strip() for line in LIST.read_text().splitlines() if line.strip() and line[0] != "#")


def chosen(modules: dict[str, list[tuple[float, str]]], threshold: float) -> list[str]:
    """The keys to leave out: each test at ``threshold`` or over, but the cheapest of each module stays.

    ``modules`` maps a module (or a class) to its tests' ``(seconds, key)``."""
    out = []
    for tests in modules.values():
        tests = sorted(tests)
        out += [key for seconds, key in tests[1:] if seconds >= threshold]
    return sorted(out)


def write(junit: Path, threshold: float = THRESHOLD) -> int:
    """Write :data:`LIST` from the junit of a test-fast run made with the list off; the number listed."""
    modules: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.find("skipped") is None:
            classname = case.get("classname", "")  # a module, or a class in one: an area either way
            modules[classname].append((float(case.get("time", 0)), key_of_junit(classname, case.get("name", ""))))
    keys = chosen(modules, threshold)
    LIST.write_text("# Left out of `make test-fast` for their time (tests/support/fast_budget.py; `make fast-list`"
                    " writes it).\n" + "".join(k + "\n" for k in keys))
    return len(keys)


if __name__ == "__main__":
    print(f"{write(Path(sys.argv[1]))} tests listed in {LIST}")
