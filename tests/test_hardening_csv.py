"""Published files are mapped to the stream's fields by name (issue 15, item 8).

A CSV header in another order than the schema used to store ``time`` in
``sensor`` silently.  Columns are now mapped by the header's names (a header
is required unless ``--no-header``); a header naming an unknown column, or
missing one, is refused naming it before anything is sent.  JSON lines name a
missing field, and refuse unknown keys unless ``--ignore-unknown``.
"""

from __future__ import annotations

import pytest

from boreas.catalog.diagnostics import ValidationFailed
from boreas.catalog.model import Field, FieldType, Schema
from boreas.cli.input_rows import RowProblems, read_rows
from boreas.cli.main import main
from boreas.wire.columns import read_ipc, unwrap
from boreas.wire.prepared import Prepared

FIELDS = ["sensor", "time", "celsius"]
SCHEMA = Schema("ReadingTuple", (Field("sensor", FieldType.INT), Field("time", FieldType.INT),
                                 Field("celsius", FieldType.DOUBLE)))


def rows(path, **kw):
    problems = RowProblems(str(path))
    got = list(read_rows(str(path), FIELDS, problems=problems, **kw))
    return got, problems.found


def refusal(path, **kw) -> list[str]:
    with pytest.raises(ValidationFailed) as info:
        rows(path, **kw)
    return [str(d) for d in info.value.diagnostics]


def test_csv_columns_are_mapped_by_header_name(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("time,celsius,sensor\n100,21.5,7\n160,22.0,8\n")
    assert rows(f) == ([(2, ["7", "100", "21.5"]), (3, ["8", "160", "22.0"])], [])


def test_csv_header_with_spaces_and_a_byte_order_mark(tmp_path):
    f = tmp_path / "r.csv"
    f.write_bytes("\ufefftime , sensor,celsius\n100,7,21.5\n".encode())
    assert rows(f)[0] == [(2, ["7", "100", "21.5"])]


def test_csv_unknown_and_missing_columns_are_named(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("time,sensor,temp\n100,7,21.5\n")
    problems = refusal(f)
    assert any("unknown column 'temp'" in p for p in problems), problems
    assert any("missing column 'celsius'" in p for p in problems), problems
    assert all(p.startswith(f"{f}:1:") for p in problems)


def test_csv_unknown_columns_may_be_ignored(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("note,time,sensor,celsius\nhello,100,7,21.5\n")
    assert rows(f, ignore_unknown=True)[0] == [(2, ["7", "100", "21.5"])]


def test_csv_duplicate_column_is_refused(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("time,sensor,celsius,time\n1,2,3,4\n")
    assert any("'time' appears more than once" in p for p in refusal(f))


def test_csv_without_header_needs_no_header(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("7,100,21.5\n8,160,22.0\n")
    (problem,) = refusal(f)
    assert "not a header" in problem and "--no-header" in problem
    assert rows(f, header=False) == ([(1, ["7", "100", "21.5"]), (2, ["8", "160", "22.0"])], [])


def test_csv_rows_of_the_wrong_width_are_refused_by_line(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("sensor,time,celsius\n7,100,21.5\n\n8,160\n9,170,1.0\n")
    got, problems = rows(f)
    assert [n for n, _ in got] == [2, 5]
    assert problems == [(4, "row has 2 values; the header has 3 columns")]


def test_json_lines_name_missing_and_unknown_fields(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text('{"time": 100, "celsius": 1.5, "sensor": 7}\n'
                 '{"time": 101, "sensor": 7}\n'
                 '{"time": 102, "celsius": 1.5, "sensor": 7, "temp": 3}\n'
                 '[8, 103, 2.5]\n'
                 '[8, 104]\n'
                 'not json\n')
    got, problems = rows(f)
    assert got == [(1, [7, 100, 1.5]), (4, [8, 103, 2.5])]
    reasons = dict(problems)
    assert "missing field 'celsius'" in reasons[2]
    assert "unknown field 'temp'" in reasons[3] and "--ignore-unknown" in reasons[3]
    assert "array has 2 values" in reasons[5]
    assert "not JSON" in reasons[6]
    got, problems = rows(f, ignore_unknown=True)
    assert [n for n, _ in got] == [1, 3, 4]


def as_rows(rows):
    """Rows, or a pyarrow batch's rows (``publish`` sends Arrow batches, as :class:`Publisher` takes them)."""
    if hasattr(rows, "columns") and hasattr(rows, "num_rows"):
        return list(zip(*(c.to_pylist() for c in rows.columns)))
    return rows


class FakePublisher:
    """Stands in for the network: records what would have been sent."""

    sent: list = []

    def __init__(self, head, stream, token, batch_size=1000, producer=None):
        self.schema, self.fields, self.producer = SCHEMA, FIELDS, producer
        self.accepted, self.refused, self.refused_count, self.duplicates = 0, [], 0, 0

    async def locate(self):  # (the schema, asked of the Head before the batches are sized: given here)
        pass

    async def start(self):
        pass

    async def send(self, rows):
        if isinstance(rows, Prepared):  # (a file's batch as boreas publish sends it: Arrow IPC, made ahead)
            rows = read_ipc(unwrap(rows.payload))
        for row in as_rows(rows):
            FakePublisher.sent.append(tuple(row))
            self.accepted += 1

    async def close(self, final=False):  # (final: boreas publish --final)
        self.final = final

    async def abort(self):  # (a publish that fails before sending closes its links)
        self.aborted = True


@pytest.fixture
def fake_publisher(monkeypatch):
    FakePublisher.sent = []
    monkeypatch.setattr("boreas.client.publisher.Publisher", FakePublisher)  # (cmd_publish imports it when it runs)
    return FakePublisher


def publish(path, *flags):
    return main(["publish", "Reading", "--file", str(path), "--head", "http://localhost:1", *flags])


def test_publish_reorders_csv_columns_into_the_schema(tmp_path, fake_publisher, capsys):
    f = tmp_path / "r.csv"
    f.write_text("time,celsius,sensor\n100,21.5,7\n")
    assert publish(f) == 0
    assert fake_publisher.sent == [(7, 100, 21.5)]  # today: time read as the sensor


def test_publish_with_a_bad_header_sends_nothing_and_exits_2(tmp_path, fake_publisher, capsys):
    f = tmp_path / "r.csv"
    f.write_text("time,temp,sensor\n100,21.5,7\n")
    assert publish(f) == 2
    err = capsys.readouterr().err
    assert "unknown column 'temp'" in err and "missing column 'celsius'" in err
    assert fake_publisher.sent == []


def test_publish_flags(tmp_path, fake_publisher, capsys):
    f = tmp_path / "r.csv"
    f.write_text("7,100,21.5\n")
    assert publish(f, "--no-header") == 0
    j = tmp_path / "r.jsonl"
    j.write_text('{"time": 100, "celsius": 1.5, "sensor": 7, "note": "x"}\n')
    assert publish(j) == 1
    assert "row 1: unknown field 'note'" in capsys.readouterr().err
    assert publish(j, "--ignore-unknown") == 0
    assert fake_publisher.sent == [(7, 100, 21.5), (7, 100, 1.5)]
