"""The Head refuses bad submissions clearly and never validates on its event loop (issue 15, items 2 and 5).

* broken multipart (no or wrong boundary, truncated, nested, garbage) is a
  400 with a JSON reason, not a 500;
* a document with 1,500 attributes on an element is a prompt 422 naming it;
* documents are parsed and validated on a worker thread: the Head answers
  other requests meanwhile; past the time budget a submission is a 413.
"""

from __future__ import annotations

import asyncio
import threading

import aiohttp
import pytest

import boreas.head.api as head_api
from boreas.head.service import HeadService

TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
APP = b"""<borealis>
  <input stream="A" schema="T"/>
  <schema name="T"><field name="x" type="int"/></schema>
</borealis>"""


@pytest.fixture
async def head():
    service = HeadService("memory://", token=TOKEN, snapshot_interval=0)
    await service.start("127.0.0.1", 0)
    try:
        yield service
    finally:
        await service.close()


async def post(head: HeadService, body: bytes, content_type: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session:
        async with session.post(f"http://{head.server.endpoint}/submissions", data=body,
                                headers={**AUTH, "Content-Type": content_type},
                                timeout=aiohttp.ClientTimeout(total=30)) as resp:
            return resp.status, await resp.json()


async def submit(head: HeadService, *files: tuple[str, bytes]) -> tuple[int, dict]:
    form = aiohttp.FormData()
    for name, data in files:
        form.add_field("file", data, filename=name, content_type="application/xml")
    async with aiohttp.ClientSession() as session:
        async with session.post(f"http://{head.server.endpoint}/submissions", data=form, headers=AUTH,
                                timeout=aiohttp.ClientTimeout(total=30)) as resp:
            return resp.status, await resp.json()


PART = b'--abc\r\nContent-Disposition: form-data; name="f"; filename="a.xml"\r\n\r\n' + APP + b"\r\n"

BROKEN = {
    "no boundary": (PART + b"--abc--\r\n", "multipart/form-data"),
    "wrong boundary": (PART + b"--abc--\r\n", "multipart/form-data; boundary=xyz"),
    "garbage": (b"\x00\xff not multipart at all \x01" * 20, "multipart/form-data; boundary=abc"),
    "empty body": (b"", "multipart/form-data; boundary=abc"),
    "truncated": (PART[:-20], "multipart/form-data; boundary=abc"),
    "bad part header": (b"--abc\r\nnot a header line\r\n\r\nx\r\n--abc--\r\n", "multipart/form-data; boundary=abc"),
    "boundary too long": (PART + b"--abc--\r\n", "multipart/form-data; boundary=" + "b" * 100),
    "nested multipart": (
        b'--abc\r\nContent-Type: multipart/mixed; boundary=inner\r\nContent-Disposition: form-data; name="f"\r\n\r\n'
        b"--inner\r\nContent-Type: application/xml\r\n\r\n" + APP + b"\r\n--inner--\r\n--abc--\r\n",
        "multipart/form-data; boundary=abc"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
async def test_broken_multipart_is_a_400_with_a_reason(head, case):
    body, content_type = BROKEN[case]
    status, answer = await post(head, body, content_type)
    assert status == 400, answer
    assert "multipart" in answer["error"]
    assert head.catalog.version == 0
    # and the Head is fine
    assert (await submit(head, ("app.xml", APP)))[0] == 202


async def test_1500_attributes_are_refused_promptly_naming_the_element(head):
    attrs = " ".join(f'a{i}="x"' for i in range(1500))
    doc = APP.replace(b'<input stream="A" schema="T"/>', f'<input stream="A" schema="T" {attrs}/>'.encode())
    status, answer = await submit(head, ("wide.xml", doc))
    assert status == 422
    (p,) = answer["diagnostics"]
    assert (p["file"], p["line"], p["path"]) == ("wide.xml", 2, "/borealis/input")
    assert "limit of 64 per element" in p["reason"]


async def test_diagnostics_are_capped_across_files(head):
    bad = b"<borealis>" + b"".join(b'<input stream="A%d" schema="T" zz="1"/>' % i for i in range(80)) + b"</borealis>"
    status, answer = await submit(head, ("one.xml", bad), ("two.xml", bad))
    assert status == 422
    assert len(answer["diagnostics"]) == 101
    assert answer["diagnostics"][-1]["reason"] == "... and 60 more problems"


async def test_validation_runs_off_the_event_loop(head, monkeypatch):
    started, release = threading.Event(), threading.Event()
    stalled = []
    real = head_api.read_document

    def slow_read(*args, **kwargs):
        started.set()
        # Blocks its thread until the test has had /status answered.  Run on the
        # event loop, it would block the Head and the test with it: then the
        # wait times out and the stall is recorded.
        if not release.wait(5):
            stalled.append(True)
        return real(*args, **kwargs)

    monkeypatch.setattr(head_api, "read_document", slow_read)
    submission = asyncio.create_task(submit(head, ("app.xml", APP)))
    try:
        assert await asyncio.to_thread(started.wait, 10)
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://{head.server.endpoint}/status",
                                   timeout=aiohttp.ClientTimeout(total=10)) as resp:
                assert resp.status == 200  # answered while the document is being read
        assert not submission.done()
    finally:
        release.set()
    assert (await submission)[0] == 202
    assert not stalled, "the document was read on the event loop: the Head stalled"


async def test_a_submission_over_the_time_budget_is_refused(head, monkeypatch):
    monkeypatch.setattr(head_api, "VALIDATION_BUDGET", 0.0)
    status, answer = await submit(head, ("app.xml", APP))
    assert status == 413
    assert "budget" in answer["error"] and "nothing was changed" in answer["error"]
    assert head.catalog.version == 0
    assert head.server.counters["too_slow"] == 1
