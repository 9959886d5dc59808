"""The /ui charts' y axes, read in headless Chromium: a count's ticks are integers (one
pending timer drew 0 / 0.3 / 0.5 / 0.8 / 1), and every axis's ticks are evenly spaced
labels of what they mark."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.api.cdp import Browser
from tests.api.helpers import ThreadServer, make_settings
from tests.api.test_docs_browser import _chromium


def _ticks(browser: Browser, canvas: str) -> list[str]:
    found = browser.wait_for(f"document.getElementById('{canvas}').dataset.ticks")
    return list(json.loads(found))


@pytest.mark.browser
def test_a_count_of_one_has_integer_ticks(tmp_path: Path) -> None:
    server = ThreadServer(make_settings(tmp_path / "data"))
    url = server.start()
    browser = Browser(_chromium(), tmp_path / "profile")
    try:
        r = httpx.post(url + "/v1/timers", json={"topic": "t", "id": "a", "delay_ms": 600_000})
        assert r.status_code == 201, r.text
        browser.open(f"{url}/ui?refresh_ms=300")
        browser.wait_for("document.getElementById('chart-due').dataset.values === '[0,1,0,0]'")
        assert _ticks(browser, "chart-due") == ["0", "1", "2", "3", "4"]
        for canvas in ("chart-rate", "chart-lateness"):  # no deliveries yet: fractions
            ticks = [float(t) for t in _ticks(browser, canvas)]
            step = ticks[1]
            assert step > 0 and ticks == [step * i for i in range(5)], (canvas, ticks)
        assert browser.errors() == []
    finally:
        browser.close()
        server.stop()
