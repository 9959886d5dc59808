"""/ui in headless Chromium, used as a person would, against a real uvicorn server.

The server (127.0.0.1, API keys on) holds delivered timers, a stream of timers falling
due while the page watches, pending timers in every due-time bucket and dead letters
(a sink that was down). The test signs in through the login field, waits for the charts
to hold data, replays a dead letter by its button and a topic's by its button, purges
the rest through the confirmation, and looks a timer up. The screenshot in
docs/dashboard.png comes from this test (written when missing; the path is printed).
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from storage.protocol import LOG_SINK, DueTimer
from tests.api.cdp import Browser
from tests.api.helpers import ThreadServer, make_settings
from tests.api.test_docs_browser import _chromium

KEY = "ui-secret"
DOCS = Path(__file__).resolve().parents[2] / "docs"


class SwitchSink:
    """The topic log, or a broker that is down while ``down`` is set."""

    name = LOG_SINK

    def __init__(self) -> None:
        self.down = threading.Event()

    def deliver(self, batch: Sequence[DueTimer]) -> None:
        if self.down.is_set():
            raise ConnectionError("broker down")


def _until(check: Any, what: str, timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := check()):
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.05)
    return value


def _batch(client: httpx.Client, timers: list[dict[str, Any]]) -> None:
    r = client.post("/v1/timers/batch", json={"timers": timers})
    assert r.status_code == 200, r.text


def _state(client: httpx.Client, topic: str, timer_id: str) -> str | None:
    r = client.get(f"/v1/timers/{topic}/{timer_id}")
    return str(r.json()["state"]) if r.status_code == 200 else None


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, httpx.Client]]:
    sink = SwitchSink()
    settings = make_settings(
        tmp_path / "data",
        api_keys=[KEY],
        engine={"tick_ms": 5, "max_attempts": 1},
        housekeeping={"stats_snapshot_interval_ms": 1000},
    )
    srv = ThreadServer(settings, sink=sink)
    url = srv.start()
    client = httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {KEY}"})
    try:
        sink.down.set()
        dead = [("dl", "d1"), ("dl", "d2"), ("dz", "z1")]
        _batch(client, [{"topic": t, "id": i, "delay_ms": 0} for t, i in dead])
        _until(lambda: len(client.get("/v1/deadletters").json()["timers"]) == 3, "dead letters")
        sink.down.clear()
        _batch(client, [{"topic": "orders", "id": f"o{i}", "delay_ms": 0} for i in range(40)])
        later = [30_000, 1_800_000, 18_000_000, 259_200_000]  # minute, hour, day, beyond
        _batch(
            client,
            [
                {"topic": "reminders", "id": f"r{d}-{i}", "delay_ms": d + i}
                for d in later
                for i in range(50)
            ],
        )
        # a stream falling due while the page watches
        _batch(
            client,
            [{"topic": "stream", "id": f"s{i}", "delay_ms": 300 + i * 25} for i in range(600)],
        )
        _until(lambda: _state(client, "orders", "o39") == "delivered", "deliveries")
        yield url, client
    finally:
        client.close()
        srv.stop()


def _click(browser: Browser, selector: str) -> None:
    assert browser.js(
        f"(() => {{ const b = {selector}; if (!b) return false; b.click(); return true; }})()"
    )


@pytest.mark.browser
@pytest.mark.slow
def test_dashboard_in_chromium(server: tuple[str, httpx.Client], tmp_path: Path) -> None:
    url, client = server
    browser = Browser(_chromium(), tmp_path / "profile")
    try:
        browser.open(f"{url}/ui?refresh_ms=500")
        browser.wait_for("!document.getElementById('login').hidden")  # keys are configured
        browser.js(f"document.getElementById('login-key').value = '{KEY}'")
        _click(browser, "document.getElementById('login-submit')")
        # charts hold data: deliveries per second and lateness from the stream, due buckets
        browser.wait_for("state.history.some(p => p.rate > 0 && p.p99 !== null)")
        browser.wait_for("Number(document.getElementById('chart-rate').dataset.points) >= 2")
        browser.wait_for("Number(document.getElementById('chart-lateness').dataset.points) >= 2")
        browser.wait_for("Number(document.getElementById('chart-due').dataset.points) === 4")
        topics = browser.wait_for(
            "[...document.querySelectorAll('#topics tbody tr')].map(r => "
            "[...r.cells].map(c => c.textContent)).filter(r => r[0] === 'reminders')"
        )
        assert topics == [["reminders", "200", "0", "log", "-"]]
        rows = browser.wait_for(
            "(() => { const r = document.querySelectorAll('#deadletters tbody tr');"
            " return r.length === 3 && [...r].map(x => x.dataset.topic + '/' + x.dataset.id); })()"
        )
        assert sorted(rows) == ["dl/d1", "dl/d2", "dz/z1"]
        browser.wait_for("state.history.filter(p => p.rate > 0).length >= 8")
        assert browser.js("document.getElementById('login').offsetParent === null")  # gone
        shot = tmp_path / "dashboard.png"
        browser.screenshot(shot)
        assert shot.stat().st_size > 20_000
        print(f"screenshot: {shot}")
        if not (DOCS / "dashboard.png").exists() and DOCS.is_dir():
            shutil.copyfile(shot, DOCS / "dashboard.png")

        # replay one dead letter by its button
        _click(
            browser,
            "[...document.querySelectorAll('#deadletters tbody tr')]"
            ".find(r => r.dataset.topic === 'dl' && r.dataset.id === 'd1')"
            ".querySelector('button.replay')",
        )
        _until(
            lambda: _state(client, "dl", "d1") in ("pending", "in_flight", "delivered"), "replay"
        )
        assert _state(client, "dl", "d2") == "dead_lettered"
        browser.wait_for("document.getElementById('dl-message').textContent === 'replayed dl/d1'")
        # replay the rest of a topic by its button
        browser.wait_for("document.querySelectorAll('#deadletters tbody tr').length === 2")
        _click(browser, "document.querySelector('#dl-topics button[data-topic=\"dl\"]')")
        _until(lambda: _state(client, "dl", "d2") != "dead_lettered", "topic replay")
        # purge asks first; cancelling keeps everything
        browser.wait_for("document.querySelectorAll('#deadletters tbody tr').length === 1")
        _click(browser, "document.getElementById('dl-purge')")
        assert browser.js("!document.getElementById('dl-confirm').hidden")
        _click(browser, "document.getElementById('dl-purge-no')")
        assert _state(client, "dz", "z1") == "dead_lettered"
        _click(browser, "document.getElementById('dl-purge')")
        _click(browser, "document.getElementById('dl-purge-yes')")
        browser.wait_for(
            "document.getElementById('dl-message').textContent === 'purged 1 dead letters'"
        )
        assert client.get("/v1/deadletters").json()["timers"] == []
        assert _state(client, "dz", "z1") is None
        assert _until(lambda: _state(client, "dl", "d1") == "delivered", "replayed delivery")

        # one timer's state by topic and id
        browser.js("document.getElementById('lookup-topic').value = 'orders'")
        browser.js("document.getElementById('lookup-id').value = 'o7'")
        _click(browser, "document.getElementById('lookup-submit')")
        browser.wait_for("document.getElementById('lookup-result').dataset.state === 'delivered'")

        assert KEY not in browser.js("location.href")
        assert browser.errors() == []
    finally:
        browser.close()
