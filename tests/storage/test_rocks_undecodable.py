"""A stored record that does not decode stalls nothing (issue 36, part 1): the due scan
moves it to the dead letters with the reason and hands out the rest; reads show it.
Real RocksDB in tmp_path; the value is written straight into the ``timers`` family."""

from __future__ import annotations

import time

import httpx

from app.clock import FakeClock
from app.engine import Engine
from storage.protocol import NewTimer, TimerState
from storage.rocks import RocksSettings, RocksTimerStore
from storage.rocks import keys as layout
from tests.api.helpers import ThreadServer, make_settings, now_ms

NOW = 1_700_000_000_000
CORRUPT = b"\xc1"  # a msgpack byte that is never valid


def corrupt(store: RocksTimerStore, topic: str, timer_id: str, key_ms: int) -> bytes:
    key = layout.timer_key(key_ms, topic.encode(), timer_id.encode())
    assert store.handles.cfs["timers"].get(key) is not None
    store.handles.cfs["timers"][key] = CORRUPT
    return key


def test_an_undecodable_record_goes_to_the_dead_letters_and_the_rest_flows(tmp_path):
    settings = RocksSettings(str(tmp_path / "rocks"))
    store = RocksTimerStore(settings)
    store.schedule([NewTimer("o", f"t{i}", NOW + i, b"p") for i in range(3)], NOW)
    corrupt(store, "o", "t1", NOW + 1)
    seen = store.get("o", "t1")  # before it is due: shown, with the reason
    assert seen is not None and seen.state is TimerState.PENDING
    assert seen.payload == CORRUPT and "does not decode" in (seen.last_error or "")
    assert [v.id for v in store.list_pending(limit=10).timers] == ["t0", "t1", "t2"]
    clock = FakeClock(NOW + 10)
    assert Engine(store, clock).run_once(clock.now_ms()) == 2
    assert [m.id for m in store.read_log("o", 0, 10)] == ["t0", "t2"]
    dead = store.get("o", "t1")
    assert dead is not None and dead.state is TimerState.DEAD_LETTERED
    assert "does not decode" in (dead.last_error or "") and dead.payload == CORRUPT
    stats = store.stats()
    assert (stats.pending, stats.dead_lettered, stats.delivered) == (0, 1, 2)
    store.close()
    again = RocksTimerStore(settings)  # and after a restart
    try:
        assert again.stats().dead_lettered == 1
        assert [v.id for v in again.dead_letters(topic=None, limit=10).timers] == ["t1"]
        assert again.get("o", "t1") is not None
    finally:
        again.close()


def test_a_live_server_delivers_the_rest_and_answers_for_the_bad_one(tmp_path):
    srv = ThreadServer(make_settings(tmp_path / "live", engine={"tick_ms": 5}))
    client = httpx.Client(base_url=srv.start(), timeout=30)
    try:
        due_ms = now_ms() + 400
        timers = [{"topic": "o", "id": f"t{i}", "deliver_at_ms": due_ms} for i in range(20)]
        assert client.post("/v1/timers/batch", json={"timers": timers}).status_code == 200
        corrupt(srv.service.store, "o", "t7", due_ms)  # type: ignore[arg-type]
        got = client.get("/v1/timers/o/t7")
        assert got.status_code == 200 and got.json()["state"] == "pending", got.text
        messages: list[dict] = []
        deadline = time.monotonic() + 20
        while len(messages) < 19 and time.monotonic() < deadline:
            r = client.get(
                "/v1/topics/o/messages", params={"offset": len(messages), "wait_ms": 1000}
            )
            assert r.status_code == 200, r.text
            messages += r.json()["messages"]
        assert sorted(m["id"] for m in messages) == sorted(f"t{i}" for i in range(20) if i != 7)
        stats = client.get("/v1/stats")
        assert stats.status_code == 200 and stats.json()["dead_lettered"] == 1, stats.text
        got = client.get("/v1/timers/o/t7")
        assert got.status_code == 200 and got.json()["state"] == "dead_lettered", got.text
        assert "does not decode" in got.json()["last_error"]
    finally:
        client.close()
        srv.stop()
