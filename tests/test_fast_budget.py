"""``make test-fast``'s time budget (tests/support/fast_budget.py): the tests it lists are left out of it."""

import doctest
import subprocess
import sys
from pathlib import Path

from support import fast_budget

ROOT = Path(__file__).resolve().parent.parent


def test_the_module_does_what_its_examples_say():
    assert doctest.testmod(fast_budget).failed == 0


def test_a_listed_test_is_left_out_by_not_slow_and_kept_without_it():
    """The keys read from a collected test's node id as from the junit the list was made from, so a listed test
    is deselected by ``-m "not slow"`` and its module's unlisted tests are not."""
    module = "tests.m3.test_cumulus_plan"
    listed = {key for key in fast_budget.left_out() if key.startswith(module + "::")}
    assert listed, "pick a module the list names"

    def collected(*args: str) -> set[str]:
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
                              "-p", "no:xdist", *args, "tests/m3/test_cumulus_plan.py"],
                             cwd=ROOT, capture_output=True, text=True).stdout
        return {fast_budget.key_of_nodeid(line) for line in out.splitlines() if "::" in line}

    every, fast = collected(), collected("-m", "not slow")
    assert listed <= every and not listed & fast and fast
