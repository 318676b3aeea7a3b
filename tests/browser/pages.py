"""What the browser tests read from and do to a page (the spec's stable hooks: ``#board``,
``#step-index``, ``#next`` ..., the renderers' ``data-*`` attributes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.browser.driver import TIMEOUT


def wait_until(driver: Any, check: Callable[[Any], Any], what: str) -> Any:
    """``check(driver)``'s first truthy value within TIMEOUT, else a failure naming ``what``."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, TIMEOUT, poll_frequency=0.05).until(check, message=f"the page never showed {what}")


def step_index(driver: Any) -> tuple[int, int]:
    """``#step-index`` ("i / n") as (i, n)."""
    i, n = driver.find_element("id", "step-index").text.split("/")
    return int(i), int(n)


def attributes(driver: Any, selector: str, *names: str) -> list[dict[str, str | None]]:
    """The ``names`` attributes of every element matching ``selector``, in document order."""
    return driver.execute_script(
        "var names = arguments[1];"
        "return Array.from(document.querySelectorAll(arguments[0])).map(function (e) {"
        "  var out = {}; names.forEach(function (n) { out[n] = e.getAttribute(n); }); return out; });",
        selector, list(names),
    )  # fmt: skip


def post_from_page(driver: Any, path: str, body: str) -> dict[str, Any]:
    """POSTs ``body`` to the page's server from the page itself: ``{"status", "data"}``."""
    return driver.execute_async_script(
        "var done = arguments[arguments.length - 1];"
        "fetch(arguments[0], {method: 'POST', headers: {'Content-Type': 'application/json'}, body: arguments[1]})"
        "  .then(function (r) { return r.json().then(function (d) { done({status: r.status, data: d}); }); })"
        "  .catch(function (e) { done({status: -1, data: String(e)}); });",
        path, body,
    )  # fmt: skip


def fetch_text(driver: Any, path: str) -> dict[str, Any]:
    """GETs ``path`` from the page: ``{"status", "disposition", "text"}`` (what a download link saves)."""
    return driver.execute_async_script(
        "var done = arguments[arguments.length - 1];"
        "fetch(arguments[0]).then(function (r) { return r.text().then(function (t) {"
        "  done({status: r.status, disposition: r.headers.get('Content-Disposition'), text: t}); }); });",
        path,
    )  # fmt: skip
