"""POST /submissions holds the Head's catalog-sized work from its upload to its commit (issue 37: a deployment in parts).

Work that costs the catalog's size (the copy built ahead, the index saved)
waits while a submission is on its way in (head/quiet_pacer.py's held); a deployment of 100,000
boxes in ten parts had both run during every next part's reading and
checking, taking its CPU, for a catalog the part then made stale.  An
in-process Head (memory store, no nodes): what the Head says while the
request is handled, and after.
"""

from __future__ import annotations

import aiohttp

from boreas.head.service import HeadService

APP = ('<borealis><schema name="R"><field name="value" type="double"/></schema><input stream="in" schema="R"/>'
       '<box name="f" type="filter"><in stream="in"/><out stream="f_t"/>'
       '<parameter name="expression.0" value="value &gt; 0.5"/></box></borealis>')


async def test_a_submission_holds_the_copy_ahead_and_the_index_save_until_committed():
    head = HeadService("memory://", token=None, snapshot_interval=0)
    await head.start("127.0.0.1", 0)
    seen: list[tuple[bool, bool]] = []
    submit = head.submit

    async def watched(documents, replacing=False):
        seen.append((head.submission_coming(), head.copy_ahead.pacer.held() and head.index_saver.pacer.held()))
        return await submit(documents, replacing=replacing)

    head.submit = watched  # type: ignore[method-assign]
    try:
        assert not head.submission_coming()
        form = aiohttp.FormData()
        form.add_field("document", APP.encode(), filename="app.xml", content_type="application/xml")
        async with aiohttp.ClientSession() as session:
            async with session.post(f"http://{head.server.endpoint}/submissions", data=form) as response:
                assert response.status == 202, await response.text()
        assert seen == [(True, True)]
        assert not head.submission_coming() and not head.copy_ahead.pacer.held()
    finally:
        await head.close()


async def test_a_bulk_submission_is_read_with_the_collector_paused(monkeypatch):
    """A deployment's part (512 KiB or more of XML) is read with the cyclic collector off (head/bulk.py's
    bulk_read: every element decoded is live); a small submission with it as it was."""
    import gc

    from boreas.head import api

    seen: list[tuple[int, bool]] = []
    real = api.read_document

    def reading(data, source, **kwargs):
        seen.append((len(data), gc.isenabled()))
        return real(data, source, **kwargs)

    monkeypatch.setattr(api, "read_document", reading)
    boxes = "".join(f'<box name="g{i}" type="filter"><in stream="in"/><out stream="g{i}_t"/>'
                    f'<parameter name="expression.0" value="value &gt; {i}.5"/></box>' for i in range(4000))
    big = f"<borealis>{boxes}</borealis>"  # (reading the first one's stream)
    assert len(big) >= 512 * 1024 > len(APP)
    head = HeadService("memory://", token=None, snapshot_interval=0)
    await head.start("127.0.0.1", 0)
    try:
        async with aiohttp.ClientSession() as session:
            for text in (APP, big):
                form = aiohttp.FormData()
                form.add_field("document", text.encode(), filename=f"app{len(seen)}.xml",
                               content_type="application/xml")
                async with session.post(f"http://{head.server.endpoint}/submissions", data=form) as response:
                    assert response.status == 202, await response.text()
        assert seen == [(len(APP), True), (len(big), False)] and gc.isenabled()
        assert len(head.catalog.boxes) == 4001
    finally:
        await head.close()
