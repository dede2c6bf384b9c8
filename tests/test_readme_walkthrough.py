"""The README works as written (issue 15, item 16 and the walk-through).

The quick tests read README.md: every file its commands name is in the
repository, every ``boreas publish`` names an example CSV file whose header
gives exactly the stream's fields, the M3 section publishes before it
queries, and the README stays under 250 lines, its links to docs/ pages that
exist.  The slow one runs ``examples/readme_walkthrough.sh``: every command
of the walk-through, in order, on free ports and a temporary catalog.
"""

from __future__ import annotations

import csv
import os
import re
import shlex
import signal
import subprocess
from pathlib import Path

import pytest
from boreas.catalog import read_file

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
WALKTHROUGH = README[README.index("\n## A cluster"):README.index("\n## Layout")]


def commands(text: str) -> list[str]:
    """The command lines of the ```sh blocks in ``text`` (comments and heredoc bodies left out)."""
    found = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE):
        terminator = None
        for line in block.splitlines():
            if terminator:
                terminator = None if line.strip() == terminator else terminator
                continue
            if line.strip() and not line.lstrip().startswith("#"):
                found.append(line.strip())
                match = re.search(r"<<-?'?(\w+)'?", line)
                terminator = match.group(1) if match else None
    return found


def words(command: str) -> list[str]:
    return shlex.split(command.split(" #")[0].rstrip(" &"))


def application_of(deploy: Path) -> Path:
    """NAME.xml for NAME_deploy.xml, also for NAME_HOW_deploy.xml (tpch_q3_partitioned_deploy.xml
    deploys tpch_q3.xml another way)."""
    name = deploy.name.removesuffix("_deploy.xml")
    while not deploy.with_name(name + ".xml").exists() and "_" in name:
        name = name.rsplit("_", 1)[0]
    return deploy.with_name(name + ".xml")


def stream_fields() -> dict[str, list[str]]:
    """Every input stream of the deployable examples (examples/xml/NAME.xml with NAME_deploy.xml)
    and its schema's field names."""
    fields: dict[str, list[str]] = {}
    for deploy in (ROOT / "examples" / "xml").glob("*_deploy.xml"):
        doc = read_file(application_of(deploy))
        schemas = {d.name: d for d in getattr(doc, "declarations", []) if type(d).__name__ == "Schema"}
        for d in getattr(doc, "declarations", []):
            if type(d).__name__ == "Input":
                fields[d.stream] = [f.name for f in schemas[d.schema].fields]
    return fields


def test_the_walkthrough_names_only_files_in_the_repository():
    """Every file a command reads is in the repository, or written by an earlier command."""
    cmds = commands(WALKTHROUGH)
    written = {m for c in cmds for m in re.findall(r"(?:>|--output)\s*([\w./-]+)", c)}
    named = [w for c in cmds for w in words(c) if re.search(r"\.(csv|parquet|jsonl?|xml|sql)$", w)]
    assert len(named) >= 10, named
    missing = [w for w in named if w not in written and not (ROOT / w).exists()]
    assert missing == []


def test_every_publish_uses_an_example_csv_whose_header_is_the_streams_fields():
    fields = stream_fields()
    publishes = [words(c) for c in commands(WALKTHROUGH) if c.startswith("boreas publish")]
    assert len(publishes) >= 4  # readings, and the three relations of the M3 view
    for argv in publishes:
        option = "--file" if "--file" in argv else "--spark"
        stream, path = argv[2], argv[argv.index(option) + 1]
        assert path.startswith("examples/data/") and path.endswith(".csv"), argv
        with open(ROOT / path, newline="") as fh:
            rows = list(csv.reader(fh))
        assert rows[0] == fields[stream], (path, rows[0], fields[stream])
        assert 10 <= len(rows) - 1 <= 500, (path, len(rows))
        assert all(len(row) == len(rows[0]) for row in rows), path


def test_every_example_input_stream_has_a_data_file():
    headers = {}
    for path in (ROOT / "examples" / "data").glob("*.csv"):
        with open(path, newline="") as fh:
            headers[path.name] = next(csv.reader(fh))
    for stream, names in stream_fields().items():
        assert names in headers.values(), f"no examples/data/*.csv for {stream} ({','.join(names)})"


def test_the_m3_section_publishes_before_it_queries():
    m3 = WALKTHROUGH[WALKTHROUGH.index("### Incrementally maintained SQL views"):]
    following = re.search(r"\n#{2,} ", m3)  # the next step's heading (### Stop the cluster) or section's
    m3 = m3[:following.start()] if following else m3
    cmds = commands(m3)
    submit = next(i for i, c in enumerate(cmds) if c.startswith("boreas submit") and "tpch_q3" in c)
    publishes = [i for i, c in enumerate(cmds) if c.startswith("boreas publish")]
    queries = [i for i, c in enumerate(cmds) if c.startswith("boreas query")]
    assert {words(cmds[i])[2] for i in publishes} == {"Customer", "Orders", "Lineitem"}
    assert queries and submit < min(publishes) and max(publishes) < min(queries)


def test_the_example_deployments_name_nodes_by_position():
    for path in (ROOT / "examples" / "xml").glob("*_deploy.xml"):
        text = path.read_text()
        assert '"#0"' in text or '"#1"' in text or '"#2"' in text, path
        assert not re.search(r'(node|endpoint)=":150\d\d"', text), path


def test_the_readme_stays_short():
    """A newcomer's page (issue 36): what Boreas is, the two commands, the tour and where to read on.
    Details, figures and options go to docs/, which the README links."""
    lines = README.count("\n")
    assert lines < 250, f"README.md has {lines} lines: move details to the matching page of docs/"
    for page in re.findall(r"\]\((docs/[\w.]+\.md)", README):
        assert (ROOT / page).exists() or page == "docs/client.md", page  # docs/client.md: being written


@pytest.mark.slow
def test_the_readme_walkthrough_runs(tmp_path):
    """Every README command, in order, on fresh ports (how long it takes is not asserted: about 2 minutes on
    a quiet 2-core machine, 3 under load; the 600 s limit only stops a hung walk-through)."""
    proc = subprocess.Popen(["bash", str(ROOT / "examples" / "readme_walkthrough.sh")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "TMPDIR": str(tmp_path)}, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # the script stops what it started
        out, _ = proc.communicate(timeout=60)
        pytest.fail("the walk-through did not finish in 600 s:\n" + out[-5000:])
    assert proc.returncode == 0, out[-8000:]
    assert re.search(r"README walk-through: all \d+ commands succeeded", out)
    assert f"{len(commands(WALKTHROUGH))} commands succeeded" in out
