"""The ``boreas`` command's first-hour experience, before any work: the parser, input files, output, ``--json``.

What a user sees (issue 15 items 9, 10, 12, 14, 20): a fast ``--help`` and
``--version``, one clear line and exit 2 for an input file that cannot be
used (before anything is contacted), a quiet exit 0 when the reader of the
output goes away, and ``--json``.  Publishing, querying and watching (and all
of it on a real cluster) are in test_cli_ux_commands.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from boreas.catalog.model import Catalog
from boreas.cli import catalog_text
from boreas.cli.main import COMMANDS, build_parser
from support.cli_run import EXAMPLES, NOWHERE, boreas, closed_stdout, one_error_line


# -- the parser: fast --help, --version ---------------------------------------------


def test_help_imports_none_of_the_heavy_libraries():
    code = ("import sys\nfrom boreas.cli.main import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = ('aiohttp', 'sqlglot', 'lxml', 'xmlschema', 'kazoo', 'msgspec', 'pyspark', 'asyncio', "
            "'boreas.catalog', 'boreas.m3', 'boreas.node', 'boreas.head', 'boreas.client')\n"
            "print(sorted({m.split('.')[0] if not m.startswith('boreas') else '.'.join(m.split('.')[:2])\n"
            "              for m in sys.modules if m.startswith(heavy)}), file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "usage: boreas" in result.stdout and "publish" in result.stdout
    assert result.stderr.strip() == "[]", result.stderr


def test_the_help_table_says_what_each_command_module_defines():
    """``boreas --help`` is built from COMMANDS alone; each module's parsers must agree with it."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert [(c.dest, c.help) for c in sub._choices_actions] == [(n, h) for n, (_, h) in COMMANDS.items()]
    stubs = build_parser(only=[])
    stub = next(a for a in stubs._actions if a.dest == "command")
    assert list(stub.choices) == list(sub.choices)


def test_version():
    import importlib.metadata

    result = boreas("--version")
    assert result.returncode == 0 and result.stdout == f"boreas {importlib.metadata.version('boreas')}\n"


def test_an_unknown_command_lists_the_commands():
    result = boreas("pubilsh", "Reading")
    assert result.returncode == 2 and "invalid choice: 'pubilsh'" in result.stderr and "publish" in result.stderr


# -- input files: exit 2, one line, before anything is contacted ----------------------


@pytest.mark.slow  # seven CLI processes; make test-fast keeps test_cli.py's test_missing_file
def test_an_input_file_that_cannot_be_read_exits_2_with_one_line_everywhere(tmp_path):
    missing = tmp_path / "missing"
    for args in [("publish", "Reading", "--file", f"{missing}.csv"),
                 ("publish", "Reading", "--file", f"{missing}.jsonl"),
                 ("publish", "Reading", "--spark", f"{missing}.parquet"),
                 ("compile", f"{missing}.sql")]:
        result = boreas(*args, "--head", NOWHERE) if args[0] == "publish" else boreas(*args)
        assert result.returncode == 2, (args, result.stderr)
        line = one_error_line(result)
        assert f"{missing}." in line and "cannot read file: No such file or directory" in line, line
    for args in [("validate", f"{missing}.xml"), ("submit", f"{missing}.xml", "--head", NOWHERE),
                 ("catalog", "apply", f"{missing}.xml", "--catalog", f"sqlite:///{tmp_path}/c.db")]:
        result = boreas(*args)
        assert result.returncode == 2 and "cannot read file" in result.stderr and "Traceback" not in result.stderr


def test_spark_without_pyspark_is_one_line_not_a_traceback(tmp_path):
    parquet = tmp_path / "r.parquet"
    parquet.write_bytes(b"PAR1")
    code = ("import sys\nsys.modules['pyspark'] = None  # as if it were not installed\n"
            "from boreas.cli.main import main\n"
            f"sys.exit(main(['publish', 'Reading', '--spark', {str(parquet)!r}, '--head', {NOWHERE!r}]))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert one_error_line(result) == ("error: --spark needs pyspark, which is not installed: "
                                      "pip install 'boreas[spark]' (or publish the file with --file)")


def test_a_compile_error_is_invalid_input(tmp_path):
    sql = tmp_path / "bad.sql"
    sql.write_text("SELECT SUM(x) FROM\n")
    result = boreas("compile", sql)
    assert result.returncode == 2 and result.stderr.startswith(f"{sql}:") and "Traceback" not in result.stderr


# -- output cut short: quiet, exit 0 -------------------------------------------------------


def test_catalog_show_into_a_closed_pipe_ends_quietly(tmp_path):
    url = f"sqlite:///{tmp_path}/c.db"
    assert boreas("catalog", "apply", EXAMPLES / "trade_join.xml", EXAMPLES / "trade_join_deploy.xml",
                  "--catalog", url).returncode == 0
    for args in [("catalog", "show", "--catalog", url), ("catalog", "export", "--catalog", url)]:
        code, err = closed_stdout(*args)
        assert (code, err) == (0, ""), args


# -- $BOREAS_HEAD ----------------------------------------------------------------------


def test_catalog_show_asks_the_head_boreas_head_names_unless_a_catalog_is_given(tmp_path):
    url = f"sqlite:///{tmp_path}/c.db"
    assert boreas("catalog", "apply", EXAMPLES / "trade_join.xml", EXAMPLES / "trade_join_deploy.xml",
                  "--catalog", url).returncode == 0
    # $BOREAS_HEAD, as --head says: the Head is asked (here nothing answers), not ./boreas-catalog.db
    result = boreas("catalog", "show", env={"BOREAS_HEAD": NOWHERE}, cwd=tmp_path)
    assert result.returncode == 1
    assert one_error_line(result).startswith(f"error: {NOWHERE}/catalog is unreachable: ")
    # --catalog says which store to read, whatever $BOREAS_HEAD says
    result = boreas("catalog", "show", "--catalog", url, env={"BOREAS_HEAD": NOWHERE})
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("catalog version 1: ")


# -- plurals ---------------------------------------------------------------------------


def test_one_of_a_thing_is_said_in_the_singular(tmp_path):
    from boreas.cli.input_rows import RowProblems, read_rows

    url = f"sqlite:///{tmp_path}/c.db"
    result = boreas("validate", EXAMPLES / "trade_join.xml")
    assert result.stdout == "valid: 1 file, +1 box against catalog version 0\n", result.stderr
    assert boreas("catalog", "apply", EXAMPLES / "trade_join.xml", EXAMPLES / "trade_join_deploy.xml",
                  "--catalog", url).returncode == 0
    result = boreas("catalog", "show", "--catalog", url)
    assert result.stdout.splitlines()[0] == ("catalog version 1: 1 box, 3 streams, 3 schemas, 0 queries, "
                                             "1 node in the deployment")
    csv = tmp_path / "r.csv"
    csv.write_text("sensor,celsius\n7\n")
    problems = RowProblems(str(csv))
    assert list(read_rows(str(csv), ["sensor", "celsius"], problems=problems)) == []
    assert problems.found == [(2, "row has 1 value; the header has 2 columns")]


# -- --json ---------------------------------------------------------------------------


def test_catalog_show_json(tmp_path):
    url = f"sqlite:///{tmp_path}/c.db"
    assert boreas("catalog", "apply", EXAMPLES / "trade_join.xml", EXAMPLES / "trade_join_deploy.xml",
                  "--catalog", url).returncode == 0
    result = boreas("catalog", "show", "--catalog", url, "--json")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["version"] == 1 and shown["boxes"]["match"]["node"] == "localhost:15002"
    assert shown["boxes"]["match"]["type"] == "join" and "localhost:15002" in shown["nodes"]
    assert "origin" not in json.dumps(shown)


def test_the_catalog_summary_says_which_nodes_are_up():
    live = [{"endpoint": f"localhost:1500{i}", "alive": i < 3, "registered": True} for i in range(4)]
    text = catalog_text.describe_catalog(Catalog(version=3), live)
    first, second = text.splitlines()[:2]
    assert first == "catalog version 3: 0 boxes, 0 streams, 0 schemas, 0 queries, 0 nodes in the deployment"
    assert second == "nodes up: 3 (localhost:15000, localhost:15001, localhost:15002); down: 1 (localhost:15003)"
