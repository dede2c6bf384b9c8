"""The Head's web UI (issue 16 item 1, docs/ui.md).

In process (quick): the page and its static files are served from the package and fetch nothing
from elsewhere; ``/ui/feed`` sends the catalog, then each commit's changes in order, and applying
them gives the Head's catalog; ``/ui/stats`` answers at once, also while a node does not; reads of
an m3 box through ``/ui/query``; ``POST /ui/move`` needs the token and moves a box.

In a real headless browser (``-m slow``: Debian's chromium and chromium-driver, through
selenium), against a Head and node processes: the page loads with no console errors, shows every
box on the node that runs it, and after ``boreas move`` shows the box on its new node within 2 s of
the Head's commit, without a reload; a move from the page itself needs the token.  A screenshot is written to the
test's temporary directory (and to ``$BOREAS_UI_SCREENSHOT`` when set: docs/ui.png comes from there).
"""

from __future__ import annotations

import asyncio
import doctest
import json
import os
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import aiohttp
import pytest
from boreas.head.ui import feed as ui_feed
from boreas.head.ui import stats as ui_stats
from boreas.head.ui.feed import catalog_json
from support.browser import browser, console_errors, placement, wait  # noqa: F401  (browser: a fixture)
from support.cluster import EXAMPLES, TOKEN, free_port, get_json
from support.inprocess import in_process

STATIC = resources.files("boreas.head.ui").joinpath("static")


def test_doctests_of_the_ui_modules():
    for module in (ui_feed, ui_stats):
        assert doctest.testmod(module).failed == 0, module.__name__


async def test_the_page_is_served_from_the_package_and_needs_nothing_from_elsewhere():
    async with in_process() as cluster, aiohttp.ClientSession() as session:
        async with session.get(f"{cluster.url}/") as resp:
            assert resp.status == 200 and resp.content_type == "text/html"
            page = await resp.text()
        assert 'src="ui/static/app.js"' in page and 'href="ui/static/style.css"' in page
        for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
            async with session.get(f"{cluster.url}/ui/static/{name}") as resp:
                assert resp.status == 200 and resp.content_type == kind
                assert await resp.read() == STATIC.joinpath(name).read_bytes()
        async with session.get(f"{cluster.url}/ui/static/..%2Fstats.py") as resp:
            assert resp.status == 404
    for name in ("index.html", "app.js", "style.css"):
        text = STATIC.joinpath(name).read_text()
        # no CDN, no web font: the only absolute URL is the SVG namespace
        assert text.replace("http://www.w3.org/2000/svg", "").count("://") == 0, name


async def _receive(ws: aiohttp.ClientWebSocketResponse, timeout: float = 10.0) -> dict:
    message = await ws.receive(timeout=timeout)
    assert message.type == aiohttp.WSMsgType.TEXT, message
    return json.loads(message.data)


def _apply(catalog: dict, items: list[dict]) -> None:
    for item in items:
        if item["value"] is None:
            catalog.pop((item["kind"], item["key"]), None)
        else:
            catalog[(item["kind"], item["key"])] = item["value"]


async def test_the_feed_sends_the_catalog_then_every_change_in_commit_order_and_a_move_needs_the_token():
    async with in_process(nodes=2) as cluster, aiohttp.ClientSession() as session:
        head = cluster.head
        async with session.ws_connect(f"{cluster.url}/ui/feed") as ws:
            first = await _receive(ws)
            assert first["type"] == "copy" and first["version"] == head.catalog.version
            mirror: dict = {}
            _apply(mirror, first["items"])
            await cluster.deploy()
            version = first["version"]
            while version < head.catalog.version:
                message = await _receive(ws)
                assert message["type"] == "change" and message["version"] == version + 1, message
                version = message["version"]
                _apply(mirror, message["items"])
            expected = {(i["kind"], i["key"]): i["value"] for i in catalog_json(head.catalog)}
            assert mirror == expected and mirror[("box", "valid")]["node"] == cluster.nodes[0].endpoint

            target = cluster.nodes[1].endpoint
            body = {"box": "valid", "node": target}
            async with session.post(f"{cluster.url}/ui/move", json=body) as resp:
                assert resp.status == 401  # no token: refused before the handler, nothing moves
            auth = {"Authorization": f"Bearer {TOKEN}"}
            async with session.post(f"{cluster.url}/ui/move", json=body, headers=auth) as resp:
                assert resp.status == 200, await resp.text()
                assert (await resp.json())["from"] == cluster.nodes[0].endpoint
            while mirror[("box", "valid")]["node"] != target:  # the Head commits what the node reports
                message = await _receive(ws)
                assert message["version"] == version + 1
                version = message["version"]
                _apply(mirror, message["items"])
            async with session.post(f"{cluster.url}/ui/move", json=body, headers=auth) as resp:
                assert resp.status == 409 and "already on" in (await resp.json())["error"]
            async with session.post(f"{cluster.url}/ui/move", json={"box": "nosuch", "node": target},
                                    headers=auth) as resp:
                assert resp.status == 404


async def test_a_filter_is_inserted_and_removed_from_the_ui_with_the_token_and_refused_with_reasons():
    async with in_process(nodes=2) as cluster, aiohttp.ClientSession() as session:
        head = cluster.head
        await cluster.deploy()
        body = {"box": "to_fahrenheit", "port": 0, "expression": "celsius > 0.0", "name": "warm"}
        async with session.post(f"{cluster.url}/ui/connect", json=body) as resp:
            assert resp.status == 401  # no token: refused before the handler, nothing inserted
        assert "warm" not in head.catalog.boxes
        auth = {"Authorization": f"Bearer {TOKEN}"}
        for bad, status, why in [({**body, "port": 3}, 422, "in ports 0-0"), ({**body, "box": "nosuch"}, 404, "no box"),
                                 ({**body, "name": "valid"}, 409, "is taken"),
                                 ({**body, "expression": "nosuchfield > 1"}, 502, "warm")]:
            async with session.post(f"{cluster.url}/ui/connect", json=bad, headers=auth) as resp:
                answer = await resp.json()
                assert resp.status == status and why in json.dumps(answer), (bad, resp.status, answer)
        assert "warm" not in head.catalog.boxes  # nothing half-applied

        async with session.post(f"{cluster.url}/ui/connect", json=body, headers=auth) as resp:
            assert resp.status == 200, await resp.text()
        for _ in range(100):  # the Head commits what the node reports
            if "warm" in head.catalog.boxes:
                break
            await asyncio.sleep(0.05)
        warm, sink = head.catalog.boxes["warm"], head.catalog.boxes["to_fahrenheit"]
        assert warm.node == sink.node == cluster.nodes[1].endpoint and sink.inputs[0].stream == "warm"
        assert warm.inputs[0].stream == "Valid" and dict(warm.params)["expression.0"] == "celsius > 0.0"

        async with session.post(f"{cluster.url}/ui/disconnect", json={"stream": "Valid"}, headers=auth) as resp:
            assert resp.status == 409  # Valid is read by two boxes: not a stream a connect added
        async with session.post(f"{cluster.url}/ui/disconnect", json={"stream": "warm"}, headers=auth) as resp:
            assert resp.status == 200 and (await resp.json())["removed"] == "warm"
        for _ in range(100):
            if "warm" not in head.catalog.boxes:
                break
            await asyncio.sleep(0.05)
        assert "warm" not in head.catalog.boxes and head.catalog.boxes["to_fahrenheit"].inputs[0].stream == "Valid"


async def test_stats_answer_at_once_and_a_node_that_does_not_answer_only_makes_its_own_figures_stale():
    async with in_process(nodes=2) as cluster, aiohttp.ClientSession() as session:
        await cluster.deploy()
        head = cluster.head

        async def stats() -> dict:  # from the Head's last poll (how fast is not asserted: no timing in tests)
            async with session.get(f"{cluster.url}/ui/stats") as resp:
                assert resp.status == 200
                return await resp.json()

        async def until(predicate, what: str, timeout: float = 10.0) -> dict:
            deadline = time.monotonic() + timeout
            while True:
                answer = await stats()
                if predicate(answer):
                    return answer
                assert time.monotonic() < deadline, f"timed out waiting for {what}: {answer}"
                await asyncio.sleep(0.2)

        endpoints = [n.endpoint for n in cluster.nodes]
        answer = await until(lambda a: all(a["nodes"].get(e, {}).get("ok") for e in endpoints)
                             and "totals" in a["boxes"], "both nodes' figures")
        assert answer["boxes"]["totals"]["node"] == endpoints[1]
        assert set(answer["boxes"]["totals"]["maps"]) and answer["boxes"]["totals"]["entries"] == 0

        silent = f"localhost:{free_port()}"  # registered, but nothing listens there
        head.heartbeat(silent, "gone", 0)
        answer = await until(lambda a: a["nodes"].get(silent, {}).get("ok") is False, "the silent node")
        assert all(answer["nodes"][e]["ok"] for e in endpoints)
        assert any(e["node"] == silent for e in answer["errors"])


async def test_views_of_an_m3_box_are_read_through_the_head_and_streams_have_rates():
    from boreas.client.publisher import Publisher

    async with in_process(nodes=2) as cluster, aiohttp.ClientSession() as session:
        await cluster.deploy()
        async with Publisher(cluster.url, "Reading", TOKEN) as pub:
            await pub.send([(1, 10.0), (2, 20.0), (1, 5.0)])
            await pub.flush()
        async with session.get(f"{cluster.url}/ui/query/totals/maps") as resp:
            assert resp.status == 200
            maps = await resp.json()
        assert maps["streams"] == {"Totals": next(iter(maps["views"]))}
        deadline = time.monotonic() + 10
        while True:
            async with session.get(f"{cluster.url}/ui/query/totals") as resp:
                assert resp.status == 200, await resp.text()
                answer = await resp.json()
            rows = {tuple(r["key"]): r["value"] for r in answer["rows"]}
            if rows == {(1,): 15.0, (2,): 20.0} or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        assert rows == {(1,): 15.0, (2,): 20.0} and answer["node"] == cluster.nodes[1].endpoint
        async with session.get(f"{cluster.url}/ui/query/totals", params=[("key", "1"), ("agg", "sum")]) as resp:
            assert (await resp.json())["rows"][0]["value"] == 15.0
        first, second = (n.endpoint for n in cluster.nodes)
        deadline = time.monotonic() + 10  # per-stream rates, from the nodes' /metrics
        while True:
            async with session.get(f"{cluster.url}/ui/stats") as resp:
                nodes = (await resp.json())["nodes"]
            rates = (nodes.get(first, {}).get("streams_in", {}).get("Reading"),
                     nodes.get(first, {}).get("streams_routed", {}).get("Valid"),
                     nodes.get(second, {}).get("streams_in", {}).get("Valid"))
            if all(isinstance(r, float) for r in rates) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert all(isinstance(r, float) and r >= 0 for r in rates), nodes
        async with session.get(f"{cluster.url}/ui/query/nosuch") as resp:
            assert resp.status == 404 and "nosuch" in (await resp.json())["error"]
        async with session.get(f"{cluster.url}/ui/query/totals", params={"agg": "median"}) as resp:
            assert resp.status == 422


# -- a real browser ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_the_page_shows_the_topology_live_in_a_browser(cluster_factory, browser, tmp_path: Path):
    cluster = cluster_factory("sqlite")
    nodes, ports = cluster.sensor_chain()
    cluster.submit(EXAMPLES / "tpch_q3.xml", cluster.example("tpch_q3_deploy.xml", ports))
    catalog = cluster.head_catalog()
    assert {"valid", "to_fahrenheit", "per_sensor", "q3"} <= set(catalog.boxes)

    browser.get(f"{cluster.head}/")
    wait(lambda: browser.execute_script("return document.body.dataset.version") == str(catalog.version),
         15, f"the page to show catalog version {catalog.version}")
    expected = {name: [box.node] for name, box in catalog.boxes.items()}
    wait(lambda: placement(browser) == expected, 5, f"every box on its node: {expected}")
    assert {e for e in nodes} <= set(browser.execute_script(
        "return [...document.querySelectorAll('g.node')].map(g => g.dataset.node)"))
    published = cluster.boreas("publish", "Reading", "--file", EXAMPLES.parent / "data" / "readings.csv")
    assert published.returncode == 0, published.stderr
    wait(lambda: browser.execute_script(
        "return [...document.querySelectorAll('.edge[data-stream=Valid] .rate')].some(t => /tuples\\/s/.test(t.textContent))"),
        10, "the rate of stream Valid")

    # an optimizer moves a box: the page follows without a reload
    browser.execute_script("window.notReloaded = true")
    move = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "move", "valid", nodes[1]], env=cluster.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait(lambda: get_json(f"{cluster.head}/boxes/valid")["node"] == nodes[1], 30, "the Head to commit the move",
         interval=0.02)
    committed = time.monotonic()  # the clock starts when the Head has the move, before boreas move returns
    wait(lambda: placement(browser).get("valid") == [nodes[1]], 2.0, "valid on its new node within 2 s")
    shown_after = time.monotonic() - committed
    out, err = move.communicate(timeout=60)
    assert move.returncode == 0, (out, err)
    assert browser.execute_script("return window.notReloaded === true"), "the page was reloaded"

    # the box's details; read-only without the token
    browser.execute_script("document.querySelector('g.box[data-box=\"valid\"]')"
                           ".dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    details = wait(lambda: browser.find_element("id", "details").text, 5, "the box's details")
    assert "filter box" in details and "celsius" in details and "Enter the cluster token" in details
    assert not browser.find_elements("id", "move-form")

    # with the token, the page moves the box back itself
    browser.find_element("id", "token").send_keys(TOKEN)
    browser.find_element("css selector", "#auth button").click()
    form = wait(lambda: browser.find_elements("id", "move-form"), 5, "the move form")[0]
    from selenium.webdriver.support.select import Select

    Select(form.find_element("name", "node")).select_by_value(nodes[0])
    form.find_element("css selector", "button").click()
    wait(lambda: placement(browser).get("valid") == [nodes[0]], 15, "valid back on its first node")
    assert cluster.head_catalog().boxes["valid"].node == nodes[0]

    # and inserts a filter before a box's in port, then removes it again
    version = cluster.head_catalog().version  # (the move's last commit shown: the details stay as they are)
    wait(lambda: browser.execute_script("return document.body.dataset.version") == str(version), 10,
         f"the page at catalog version {version}")
    browser.execute_script("document.querySelector('g.box[data-box=\"to_fahrenheit\"]')"
                           ".dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    wait(lambda: browser.find_elements("id", "filter-form"), 5, "the filter form")
    from selenium.common.exceptions import StaleElementReferenceException

    for _ in range(5):  # the panel is built again when its box or the nodes change: look the fields up afresh
        try:
            for field, text in (("expression", "celsius > 0.0"), ("name", "warm")):
                entry = browser.find_element("css selector", f"#filter-form [name={field}]")
                entry.clear()
                entry.send_keys(text)
            browser.find_element("css selector", "#filter-form button").click()
            break
        except StaleElementReferenceException:
            time.sleep(0.2)
    wait(lambda: "warm" in placement(browser), 15, "the inserted filter on the page")
    assert cluster.head_catalog().boxes["to_fahrenheit"].inputs[0].stream == "warm"
    browser.execute_script("document.querySelector('g.box[data-box=\"warm\"]')"
                           ".dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    wait(lambda: browser.find_elements("id", "disconnect"), 5, "the remove button")[0].click()
    wait(lambda: "warm" not in placement(browser), 15, "the filter gone from the page")
    assert cluster.head_catalog().boxes["to_fahrenheit"].inputs[0].stream == "Valid"

    # an m3 box: its views and a read through the query form
    browser.execute_script("document.querySelector('g.box[data-box=\"q3\"]')"
                           ".dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    query = wait(lambda: browser.find_elements("id", "query-form"), 10, "the query form")[0]
    query.find_element("css selector", "button").click()
    wait(lambda: "row(s) from" in browser.find_element("id", "m3-views").text, 10, "the query's answer")

    browser.find_element("css selector", "header nav button[data-view='nodes']").click()
    table = wait(lambda: browser.find_element("id", "nodes-table").text, 5, "the node view")
    assert all(e in table for e in nodes) and "in sync" in table
    browser.find_element("css selector", "header nav button[data-view='topology']").click()

    # a node dies: its column turns red, its boxes stay where the catalog has them
    cluster.stop(nodes[2], kill=True)
    wait(lambda: browser.find_elements("css selector", f"g.node.down[data-node='{nodes[2]}']"), 15,
         "the dead node shown down")
    assert placement(browser)["per_sensor"] == [nodes[2]]
    time.sleep(1.5)  # a few more polls with the node gone

    assert console_errors(browser) == []
    shot = tmp_path / "ui.png"
    browser.save_screenshot(str(shot))
    if os.environ.get("BOREAS_UI_SCREENSHOT"):
        browser.save_screenshot(os.environ["BOREAS_UI_SCREENSHOT"])
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}; the page showed the move {shown_after:.2f} s after the Head committed it")


async def test_a_feed_sender_that_fails_unexpectedly_is_logged_counted_and_closes_its_browser(caplog):
    class BrokenSocket:
        closed = False

        async def send_str(self, text: str) -> None:
            raise ValueError("not JSON-safe")  # a bug, not a browser that went away

        async def close(self) -> None:
            self.closed = True

    feed = ui_feed.UiFeed(lambda: None)
    browser = ui_feed._Browser(BrokenSocket())
    browser.queue.put_nowait("{}")
    with caplog.at_level("ERROR", logger=ui_feed.__name__):
        await asyncio.wait_for(feed._send(browser), 5)
    assert browser.ws.closed and feed.counters["send_failures"] == 1
    assert "sending to a browser failed" in caplog.text and "not JSON-safe" in caplog.text
