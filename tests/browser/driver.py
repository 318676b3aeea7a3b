"""Headless Chromium and play servers for the browser tests and tools/viewer_screenshots.py.

Selenium drives Debian's ``chromium`` through its ``chromedriver`` (both on PATH); every page the
tests open is a file or a server on 127.0.0.1, so the browser needs no network.
"""

from __future__ import annotations

import shutil
import threading
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 20  # seconds: a page load, a script, a wait for the page to show a move


def browser_missing() -> str | None:
    """Why a headless Chromium cannot be driven here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    for exe in ("chromium", "chromedriver"):
        if shutil.which(exe) is None:
            return f"{exe} is not on PATH (apt-get install chromium chromium-driver)"
    return None


def headless_chrome(width: int = 1280, height: int = 900) -> Any:
    """A selenium driver of headless Chromium with a fixed window (screenshots match)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    driver.set_page_load_timeout(TIMEOUT)
    driver.set_script_timeout(TIMEOUT)
    return driver


def source_entry_points(group: str) -> dict[str, EntryPoint]:
    """``group``'s entry points as this checkout's plugins declare them (pyproject.toml)."""
    found = {}
    for pyproject in sorted((REPO / "plugins").glob("*/pyproject.toml")):
        declared = tomllib.loads(pyproject.read_text()).get("project", {}).get("entry-points", {}).get(group, {})
        found.update({name: EntryPoint(name, value, group) for name, value in declared.items()})
    return found


@contextmanager
def serving(server: Any) -> Iterator[Any]:
    """Runs ``server`` (a PlayServer) in a thread until the block ends."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(TIMEOUT)
