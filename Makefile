# Two commands do all set-up on a fresh machine (Debian, run as root):
#   make demo   a Head and three nodes on loopback; submit and watch the examples
#   make test   run the whole test suite (real ZooKeeper included, and every command of the README
#               walk-through: tests/test_readme_walkthrough.py runs examples/readme_walkthrough.sh)
# Both are idempotent.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# chromium and chromium-driver: tests/test_ui.py drives the web UI in a real headless browser.
# gcc: the M3 runtime's native backend compiles each program's triggers (docs/m3_native.md); without it
# the runtime falls back to the Python backend and says why.
# iproute2: tests/test_netns.py runs Heads, nodes and ZooKeeper each in its own network namespace (`ip netns`).
APT_PACKAGES := zookeeper default-jre-headless chromium chromium-driver gcc iproute2

.PHONY: demo test test-fast fast-list setup system-deps venv clean bench bench-setup

setup: system-deps venv

# apt-get only when something is missing, so a second run is quick and offline.
system-deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

# One pytest on both cores (pytest-xdist, --dist loadgroup): the tests that start real Head and node
# processes and wait on them form one group (tests/conftest.py, IN_PROCESS names the others) that runs
# one test at a time on one worker, while the other worker takes the in-process tests (the M3 compiler and
# runtime against DuckDB, the Cumulus and catalog simulations, property tests, doctests); the group's worker
# takes in-process tests too once the group is done.
PYTEST := $(BIN)/pytest -q -n 2 --dist loadgroup
# The tests start hundreds of Head, node and CLI processes; where PYTHONDONTWRITEBYTECODE is set (as in many
# containers) each would compile Boreas's sources again (~0.5 s a process), so compile them once first (py_compile
# writes .pyc files whatever that setting says; imports only read them).
BYTECODE := $(BIN)/python -m compileall -q -j 0 __init__.py catalog cli client head m3 node regional schemas spark wire

test: setup
	$(BYTECODE)
	$(PYTEST) --durations=30

# The inner loop: everything but the fault tests (-m faults: kill -9, restarts) and the slow tests
# (-m slow: Spark, ZooKeeper-backed clusters, multi-process moves and data-plane runs, the README
# walk-through, most M3 shapes against DuckDB and the second backend of the others: tests/m3/conftest.py);
# one quick test of each area stays in.  The tests tests/fast_left_out.txt lists (over 0.4 s each, measured
# by `make fast-list` on a quiet machine: tests/support/fast_budget.py) are left out for their time, so the
# inner loop stays near 3 minutes.  `make test` runs everything.
FAST := BOREAS_PROPERTY_SCALE=0.25 $(PYTEST) -m "not faults and not slow"
test-fast: setup
	$(BYTECODE)
	$(FAST)

# Measure the test-fast selection with every test in it and list again the ones it leaves out for their time.
fast-list: setup
	$(BYTECODE)
	BOREAS_FAST_LIST=off $(FAST) --junitxml=.fast-list.xml -o junit_duration_report=total
	$(BIN)/python tests/support/fast_budget.py .fast-list.xml

demo: setup
	@bash examples/demo.sh

# The peers the benchmarks race (apache-flink, bytewax, pathway: the `bench` extra), only for `make bench`.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): pyproject.toml $(STAMP)
	$(BIN)/pip install -q -e '.[test,bench]'
	touch $(BENCH_STAMP)

bench-setup: setup $(BENCH_STAMP)

bench: bench-setup
	$(BIN)/python bench/catalog.py
	$(BIN)/python bench/deploy.py
	$(BIN)/python bench/dataplane.py
	$(BIN)/python bench/move.py
	$(BIN)/python bench/m3.py
	$(BIN)/python bench/recovery.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache boreas-catalog.db*
