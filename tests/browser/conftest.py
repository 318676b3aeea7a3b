"""Fixtures of the browser tests (each module marks its tests ``browser``): a headless Chromium
per test module and the plugins' entry points read from this checkout's sources.

Without Chromium, chromedriver or selenium these tests skip with the reason; CI sets
MEEPLE_REQUIRE_BROWSER=1 (.ci/run installs Debian's chromium + chromium-driver), so there a
missing browser fails instead.
"""

from __future__ import annotations

import os
from importlib.metadata import EntryPoint

import pytest

from tests.browser.driver import browser_missing, headless_chrome, source_entry_points


@pytest.fixture(scope="module")
def chrome():
    """A headless Chromium for one test module."""
    missing = browser_missing()
    if missing:
        if os.environ.get("MEEPLE_REQUIRE_BROWSER") == "1":
            pytest.fail(f"MEEPLE_REQUIRE_BROWSER=1 but {missing}")
        pytest.skip(missing)
    driver = headless_chrome()
    yield driver
    driver.quit()


@pytest.fixture
def source_plugins(monkeypatch):
    """Registry lookups see the entry points of this checkout's plugins too (the shared editable
    installs may predate them): the tests check the declarations a fresh install gets."""
    from meeple.plugins import registry
    from meeple.viewer import play_session, renderers

    real = registry.installed

    def installed(group: str = registry.GROUP) -> dict[str, EntryPoint]:
        return {**real(group), **source_entry_points(group)}

    for module in (registry, renderers, play_session):
        monkeypatch.setattr(module, "installed", installed)
