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

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def deliver(self, batch: Sequence[DueTimer]) -> None:
        if self.down.is_set():
            raise ConnectionError("broker down")


def _until(check: Any, what: str, timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := check()):
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.05)
    return value


class _Stream:
    """A thread scheduling a few timers due 200 ms later every 100 ms, until stopped.

    However long Chromium takes to start, deliveries go on while the page watches. The
    loop is bounded (``MAX_ROUNDS``: 5 minutes) and ``__exit__`` stops and joins it.
    """

    MAX_ROUNDS = 3000

    def __init__(self, url: str) -> None:
        self.client = httpx.Client(
            base_url=url, timeout=30, headers={"Authorization": f"Bearer {KEY}"}
        )
        self.stop = threading.Event()
        self.sent = 0
        self.failure: Exception | None = None  # raised again by __exit__
        self.thread = threading.Thread(target=self._run, name="stream", daemon=True)

    def _run(self) -> None:
        try:
            self._send_rounds()
        except Exception as exc:  # an assert in a thread is only a warning: keep it
            self.failure = exc

    def _send_rounds(self) -> None:
        for round_no in range(self.MAX_ROUNDS):
            timers = [
                {"topic": "stream", "id": f"s{round_no}-{i}", "delay_ms": 200 + 10 * i}
                for i in range(5)
            ]
            _batch(self.client, timers)
            self.sent += len(timers)
            if self.stop.wait(0.1):  # pacing of the load, not an ordering wait
                return

    def __enter__(self) -> _Stream:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)
        self.client.close()
        assert not self.thread.is_alive(), "the stream thread did not stop"
        if self.failure is not None:
            raise AssertionError(f"the stream failed: {self.failure!r}") from self.failure


# pixels of a canvas within a small distance of a colour: the chart drew something
PIXELS = """((id, r, g, b) => {{
  const c = document.getElementById(id);
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) {{
    const off = Math.abs(d[i] - r) + Math.abs(d[i + 1] - g) + Math.abs(d[i + 2] - b);
    if (d[i + 3] > 200 && off < 60) n++;
  }}
  return n;
}})('{0}', {1}, {2}, {3})"""


def _pixels(browser: Browser, canvas: str, rgb: tuple[int, int, int]) -> int:
    return int(browser.js(PIXELS.format(canvas, *rgb)))


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
        _until(lambda: _state(client, "orders", "o39") == "delivered", "deliveries")
        commit = client.post("/v1/topics/orders/groups/billing/commit", json={"offset": 15})
        assert commit.status_code == 200, commit.text
        hook = {"sink": "webhook", "url": "http://127.0.0.1:9/hook", "secret": "ui-hook"}
        assert client.put("/v1/topics/hooked/route", json=hook).status_code == 200
        with _Stream(url) as stream:  # timers falling due for as long as the page watches
            _until(lambda: stream.sent > 0, "the stream")
            yield url, client
    finally:
        client.close()
        srv.stop()


def _click(browser: Browser, selector: str) -> None:
    assert browser.js(
        f"(() => {{ const b = {selector}; if (!b) return false; b.click(); return true; }})()"
    )


def _sign_in(browser: Browser) -> None:
    browser.wait_for("!document.getElementById('login').hidden")  # keys are configured
    # nothing drawn before signing in: the colour probes below start from zero
    assert _pixels(browser, "chart-rate", (0x2F, 0x9E, 0x44)) == 0
    assert _pixels(browser, "chart-due", (0x5B, 0x6F, 0xD8)) == 0
    browser.js(f"document.getElementById('login-key').value = '{KEY}'")
    _click(browser, "document.getElementById('login-submit')")


def _check_charts(browser: Browser) -> None:
    """Deliveries per second and lateness from the stream, and the due buckets, drawn."""
    browser.wait_for("state.history.some(p => p.rate > 0 && p.p99 !== null)")
    browser.wait_for("Number(document.getElementById('chart-rate').dataset.points) >= 2")
    browser.wait_for("Number(document.getElementById('chart-lateness').dataset.points) >= 2")
    browser.wait_for("Number(document.getElementById('chart-due').dataset.points) === 4")
    # the bars are the store's bucket counts: 50 reminders each in the hour, day, beyond
    due = browser.js("JSON.parse(document.getElementById('chart-due').dataset.values)")
    assert due[1:] == [50, 50, 50] and due[0] >= 50, due
    # and the charts drew them: the series' colours are on the canvases
    assert _pixels(browser, "chart-rate", (0x2F, 0x9E, 0x44)) > 20
    assert _pixels(browser, "chart-lateness", (0xD8, 0x57, 0x2F)) > 20  # p99
    assert _pixels(browser, "chart-due", (0x5B, 0x6F, 0xD8)) > 4 * 100


def _check_tables(browser: Browser) -> None:
    topics = browser.wait_for(
        "[...document.querySelectorAll('#topics tbody tr')].map(r => "
        "[...r.cells].map(c => c.textContent))"
        ".filter(r => ['reminders', 'orders', 'hooked'].includes(r[0]))"
    )
    assert topics == [
        ["hooked", "0", "0", "webhook", "-"],
        ["orders", "0", "40", "log", "billing: 25"],
        ["reminders", "200", "0", "log", "-"],
    ]
    rows = browser.wait_for(
        "(() => { const r = document.querySelectorAll('#deadletters tbody tr');"
        " return r.length === 3 && [...r].map(x => x.dataset.topic + '/' + x.dataset.id); })()"
    )
    assert sorted(rows) == ["dl/d1", "dl/d2", "dz/z1"]


def _screenshot(browser: Browser, tmp_path: Path) -> None:
    """After a few refreshes; docs/dashboard.png is written from it when missing."""
    browser.wait_for("state.history.filter(p => p.rate > 0).length >= 8")
    assert browser.js("document.getElementById('login').offsetParent === null")  # gone
    shot = tmp_path / "dashboard.png"
    browser.screenshot(shot)
    assert shot.stat().st_size > 20_000
    print(f"screenshot: {shot}")
    if not (DOCS / "dashboard.png").exists() and DOCS.is_dir():
        shutil.copyfile(shot, DOCS / "dashboard.png")


def _replay_dead_letters(browser: Browser, client: httpx.Client) -> None:
    """One dead letter by its button, then the rest of its topic by the topic's button."""
    _click(
        browser,
        "[...document.querySelectorAll('#deadletters tbody tr')]"
        ".find(r => r.dataset.topic === 'dl' && r.dataset.id === 'd1')"
        ".querySelector('button.replay')",
    )
    _until(lambda: _state(client, "dl", "d1") in ("pending", "in_flight", "delivered"), "replay")
    assert _state(client, "dl", "d2") == "dead_lettered"
    browser.wait_for("document.getElementById('dl-message').textContent === 'replayed dl/d1'")
    browser.wait_for("document.querySelectorAll('#deadletters tbody tr').length === 2")
    _click(browser, "document.querySelector('#dl-topics button[data-topic=\"dl\"]')")
    _until(lambda: _state(client, "dl", "d2") != "dead_lettered", "topic replay")


def _purge_dead_letters(browser: Browser, client: httpx.Client) -> None:
    """Purge asks first; cancelling keeps everything, confirming removes the last one."""
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


def _look_up(browser: Browser) -> None:
    browser.js("document.getElementById('lookup-topic').value = 'orders'")
    browser.js("document.getElementById('lookup-id').value = 'o7'")
    _click(browser, "document.getElementById('lookup-submit')")
    browser.wait_for("document.getElementById('lookup-result').dataset.state === 'delivered'")


@pytest.mark.browser
@pytest.mark.slow
def test_dashboard_in_chromium(server: tuple[str, httpx.Client], tmp_path: Path) -> None:
    url, client = server
    browser = Browser(_chromium(), tmp_path / "profile")
    try:
        browser.open(f"{url}/ui?refresh_ms=500")
        _sign_in(browser)
        _check_charts(browser)
        _check_tables(browser)
        _screenshot(browser, tmp_path)
        _replay_dead_letters(browser, client)
        _purge_dead_letters(browser, client)
        _look_up(browser)
        assert KEY not in browser.js("location.href")
        assert browser.errors() == []
    finally:
        browser.close()
