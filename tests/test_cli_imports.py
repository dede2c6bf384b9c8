"""The light commands stay light: parsing them imports none of the heavy libraries.

Each command is parsed in a fresh interpreter (what ``boreas CMD ...`` does
before it runs), which then lists the heavy modules it has loaded.  A module
that imports sqlglot, xmlschema, aiohttp, pyarrow, pandas or lxml at its top,
on the path of one of these commands, fails this test: every such import
costs the user tenths of a second on every call (docs/architecture.md, "The
control plane's reads and imports").  No timing is asserted, only what is imported.
"""

from __future__ import annotations

import json
import subprocess
import sys

#: Imported only where used: never by building the parser or parsing a light command's arguments.
HEAVY = ("sqlglot", "xmlschema", "aiohttp", "pyarrow", "pandas", "lxml", "boreas.m3.compiler")

#: The commands people and optimizers run all day, with arguments that parse.
LIGHT = {
    "--help": [],  # (the top-level parser alone: what `boreas --help` builds)
    "move": ["move", "b1", "localhost:15001"],
    "connect": ["connect", "b1", "--box", "filter.xml"],
    "disconnect": ["disconnect", "b1_filter"],
    "nodes": ["nodes"],
    "submit": ["submit", "app.xml", "deploy.xml"],
    "watch": ["watch"],
    "snapshot": ["snapshot"],
    "drop": ["drop", "q1"],
    "publish": ["publish", "in1", "--file", "rows.csv"],
    "subscribe": ["subscribe", "out1"],
    "validate": ["validate", "app.xml"],
    "catalog": ["catalog", "show"],
}

PROBE = """
import json, sys
from boreas.cli.main import _command_of, build_parser
argv = json.loads(sys.argv[1])
command = _command_of(argv)
parser = build_parser(only=[command] if command else [])
if argv:
    parser.parse_args(argv)
print(json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)))
"""


def test_light_commands_import_no_heavy_module() -> None:
    # One interpreter per command, all at once (each must start clean: one command's imports would
    # hide another's).
    procs = {name: subprocess.Popen([sys.executable, "-c", PROBE, json.dumps(argv), json.dumps(HEAVY)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, argv in LIGHT.items()}
    loaded = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"boreas {name}: the probe failed:\n{err}"
        loaded[name] = json.loads(out)
    assert {name: mods for name, mods in loaded.items() if mods} == {}


def test_the_probe_sees_a_heavy_import() -> None:
    """The check above would notice: a command whose module imports the M3 compiler shows up."""
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(["compile", "q.sql"]), json.dumps(HEAVY)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "sqlglot" in json.loads(proc.stdout)
