"""/ui in headless Chromium against a real server: two things an operator hit.

- A service delivering a few timers a minute has, between two scrapes of the page, one
  interval with deliveries and idle ones around it: its lateness is a point with no
  neighbour, which the chart drew as a path of a single moveTo, that is, not at all.
- A name of only dots ("." and ".." are valid ids) cannot be put in a URL path by a
  browser, which resolves it (and %2E) as a dot segment: the Replay button of dead letter
  t/. replayed every dead letter of topic t, and the look-up of t/.. asked for t.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.cdp import Browser
from tests.api.helpers import ThreadServer, make_settings
from tests.api.test_dashboard_browser import SwitchSink, _pixels, _until
from tests.api.test_docs_browser import _chromium

P50, P99 = (0x2F, 0x7E, 0xD8), (0xD8, 0x57, 0x2F)  # the series' colours in ui.js
ONE_LATE_POINT = """(() => {
  const h = state.history, i = h.findIndex(p => p.p99 !== null);
  return i >= 1 && i < h.length - 1 && h.filter(p => p.p99 !== null).length;
})()"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    srv = ThreadServer(make_settings(tmp_path / "data", engine={"tick_ms": 5}))
    try:
        yield srv.start()
    finally:
        srv.stop()


@pytest.mark.browser
@pytest.mark.slow
def test_a_lone_delivery_is_drawn_on_the_lateness_chart(server: str, tmp_path: Path) -> None:
    browser = Browser(_chromium(), tmp_path / "profile")
    try:
        browser.open(f"{server}/ui?refresh_ms=250")
        browser.wait_for("state.history.length >= 2")  # idle intervals before the delivery
        assert _pixels(browser, "chart-lateness", P99) == 0
        body = {"topic": "quiet", "id": "q1", "delay_ms": 0}
        assert httpx.post(f"{server}/v1/timers", json=body, timeout=10).status_code == 201
        # one interval with the delivery, with idle ones before and after it
        assert browser.wait_for(ONE_LATE_POINT) == 1
        assert browser.js("document.getElementById('chart-lateness').dataset.points") == "2"
        assert _pixels(browser, "chart-lateness", P99) > 5
        assert _pixels(browser, "chart-lateness", P50) > 5
        assert browser.errors() == []
    finally:
        browser.close()


def _state(url: str, topic: str, timer_id: str) -> str | None:
    r = httpx.get(f"{url}/v1/timers/{topic}/{timer_id.replace('.', '%2E')}", timeout=10)
    return str(r.json()["state"]) if r.status_code == 200 else None


ROW = (
    "[...document.querySelectorAll('#deadletters tbody tr')]"
    ".find(r => r.dataset.topic === 't' && r.dataset.id === '{}')?.querySelector('button')"
)


@pytest.mark.browser
@pytest.mark.slow
def test_a_dead_letter_named_with_dots_only_is_not_sent_to_a_wrong_url(tmp_path: Path) -> None:
    sink = SwitchSink()
    settings = make_settings(tmp_path / "data", engine={"tick_ms": 5, "max_attempts": 1})
    srv = ThreadServer(settings, sink=sink)
    browser = Browser(_chromium(), tmp_path / "profile")
    try:
        url = srv.start()
        sink.down.set()
        ids = [".", "..", "a", "b"]
        batch = {"timers": [{"topic": "t", "id": i, "delay_ms": 0} for i in ids]}
        assert httpx.post(f"{url}/v1/timers/batch", json=batch, timeout=10).status_code == 200
        _until(lambda: all(_state(url, "t", i) == "dead_lettered" for i in ids), "dead letters")
        sink.down.clear()
        browser.open(f"{url}/ui?refresh_ms=500")
        browser.wait_for(f"!!{ROW.format('b')}")
        for name in (".", ".."):
            assert browser.js(f"{ROW.format(name)}.disabled"), name
            assert "%2E" in browser.js(f"{ROW.format(name)}.title")
            browser.js(f"{ROW.format(name)}.click()")  # a disabled button does nothing
        browser.js(f"{ROW.format('b')}.click()")
        browser.wait_for("document.getElementById('dl-message').textContent === 'replayed t/b'")
        _until(lambda: _state(url, "t", "b") == "delivered", "the replay of t/b")
        assert [_state(url, "t", i) for i in (".", "..", "a")] == ["dead_lettered"] * 3
        browser.js("document.getElementById('lookup-topic').value = 't'")
        browser.js("document.getElementById('lookup-id').value = '..'")
        browser.js("document.getElementById('lookup-submit').click()")
        note = browser.wait_for("document.getElementById('lookup-result').textContent")
        assert note.startswith('"..": a name of only dots cannot be sent from a browser'), note
        assert browser.errors() == []
    finally:
        browser.close()
        srv.stop()
