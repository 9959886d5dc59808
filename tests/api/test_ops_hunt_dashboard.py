"""/ui with more topics than its table shows, in headless Chromium against a real server.

Topic names are client input. The page rebuilt a row per topic on every refresh: with
50,000 topics that was about 2 s of the tab's main thread each time (a refresh every 2 s,
so it never caught up) and its first refresh took 12 s. The table now keeps the
``MAX_TOPIC_ROWS`` topics with the most pending, in name order, and says how many more
there are: one page of ``GET /v1/topics?order=pending``, not every topic on every refresh.

And with more dead letters than the table's 100, the "Purge all" confirmation said
"Delete 100+ dead letters" when it was about to delete 150 (or 4,000): it now says the
number the service counts (the ``timerstore_dead_letters`` gauge), and so does the header.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.cdp import Browser
from tests.api.helpers import ThreadServer, make_settings
from tests.api.test_dashboard_browser import SwitchSink, _until
from tests.api.test_docs_browser import _chromium

MAX_TOPIC_ROWS = 100  # ui.js
SMALL = MAX_TOPIC_ROWS + 100
ROWS = "[...document.querySelectorAll('#topics tbody tr')].map(r => r.cells[0].textContent)"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    srv = ThreadServer(make_settings(tmp_path / "data"))
    try:
        yield srv.start()
    finally:
        srv.stop()


@pytest.mark.browser
@pytest.mark.slow
def test_many_topics_show_the_largest_and_say_how_many_more(server: str, tmp_path: Path) -> None:
    timers = [{"topic": f"t{i:04d}", "id": "x", "delay_ms": 3_600_000} for i in range(SMALL)]
    # the last one by name has the most pending: it must be in the table
    timers += [{"topic": "zz-big", "id": f"b{i}", "delay_ms": 3_600_000} for i in range(3)]
    r = httpx.post(f"{server}/v1/timers/batch", json={"timers": timers}, timeout=30)
    assert r.status_code == 200, r.text
    browser = Browser(_chromium(), tmp_path / "profile")
    try:
        browser.open(f"{server}/ui")
        browser.wait_for("document.getElementById('status').textContent.startsWith('updated')")
        rows = browser.js(ROWS)
        assert len(rows) == MAX_TOPIC_ROWS
        assert rows == sorted(rows)  # name order, as the API lists them
        assert rows[-1] == "zz-big"
        more = browser.js("document.getElementById('topics-more').textContent")
        assert more.startswith(f"{SMALL + 1 - MAX_TOPIC_ROWS} more topics not shown"), more
        assert browser.errors() == []
    finally:
        browser.close()


@pytest.mark.browser
@pytest.mark.slow
def test_purge_all_says_how_many_dead_letters_it_deletes(tmp_path: Path) -> None:
    sink = SwitchSink()
    settings = make_settings(tmp_path / "data", engine={"tick_ms": 5, "max_attempts": 1})
    srv = ThreadServer(settings, sink=sink)
    browser = Browser(_chromium(), tmp_path / "profile")
    try:
        url = srv.start()
        sink.down.set()
        batch = {"timers": [{"topic": "t", "id": f"d{i:03d}", "delay_ms": 0} for i in range(150)]}
        assert httpx.post(f"{url}/v1/timers/batch", json=batch, timeout=10).status_code == 200

        def dead_letters() -> bool:
            stats = httpx.get(f"{url}/v1/stats", timeout=10).json()
            return bool(stats["dead_lettered"] == 150)

        _until(dead_letters, "150 dead letters")
        browser.open(f"{url}/ui")
        browser.wait_for("document.querySelectorAll('#deadletters tbody tr').length === 100")
        header = browser.js("document.getElementById('dl-count').textContent")
        assert header == "(150, the first 100 below)", header
        browser.js("document.getElementById('dl-purge').click()")
        count = browser.js("document.getElementById('dl-confirm-count').textContent")
        assert count == "150", count
        assert browser.errors() == []
    finally:
        browser.close()
        srv.stop()


@pytest.mark.browser
@pytest.mark.slow
def test_timers_past_the_count_cap_are_not_drawn_as_later(tmp_path: Path) -> None:
    """With ``housekeeping.stats_count_cap`` reached, the "later" bar held every timer
    past the cap (they are due within the hour here); the page now says how many were
    not counted."""
    settings = make_settings(tmp_path / "data", housekeeping={"stats_count_cap": 10})
    srv = ThreadServer(settings)
    browser = Browser(_chromium(), tmp_path / "profile")
    try:
        url = srv.start()
        timers = [{"topic": "a", "id": f"i{i:02d}", "delay_ms": 1_800_000} for i in range(25)]
        r = httpx.post(f"{url}/v1/timers/batch", json={"timers": timers}, timeout=10)
        assert r.status_code == 200, r.text
        browser.open(f"{url}/ui?refresh_ms=250")
        note = browser.wait_for(
            "(t => t.includes('not counted') && t)(document.getElementById('due-when').textContent)"
        )
        assert note.endswith("; 15 more not counted (housekeeping.stats_count_cap)"), note
        bars = browser.js("JSON.parse(document.getElementById('chart-due').dataset.values)")
        assert bars == [0, 10, 0, 0], bars  # minute, hour, day, later
        assert browser.errors() == []
    finally:
        browser.close()
        srv.stop()
