"""A real headless browser for the web UI's tests: Debian's chromium and chromium-driver, through selenium.

``browser`` is the fixture (its console kept, goog:loggingPrefs); the helpers read what the page shows.
"""

from __future__ import annotations

import shutil

import pytest
from support.cluster import wait_until

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture
def browser():
    """Headless chromium driven by chromedriver; its console is kept (goog:loggingPrefs)."""
    webdriver = pytest.importorskip("selenium.webdriver")
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("needs Debian's chromium and chromium-driver (make test installs them)")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1500,820"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def placement(driver) -> dict[str, list[str]]:
    """Per box drawn: the nodes whose column holds it (a box is a child of its node's group)."""
    return driver.execute_script("""
        const found = {};
        for (const g of document.querySelectorAll("g.node g.box[data-box]")) {
          (found[g.dataset.box] = found[g.dataset.box] || []).push(g.closest("g.node").dataset.node);
        }
        return found;""")


def wait(predicate, timeout: float, what: str, interval: float = 0.05):
    """:func:`support.cluster.wait_until`, the browser tests' way round."""
    return wait_until(predicate, timeout, what, interval)


def console_errors(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
