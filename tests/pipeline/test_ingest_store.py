"""RocksTimerStore.ingest_staged on a real RocksDB, with SSTs staged in-process (no Spark)."""

from __future__ import annotations

import os

import pytest

from app.clock import FakeClock
from app.engine import Engine
from pipeline.cli import offline_floor_ms
from storage.errors import InvalidInputError
from storage.protocol import LOG_SINK, NewTimer, TimerState
from storage.rocks import RocksSettings, RocksTimerStore
from storage.rocks.ingest import MANIFEST
from tests.pipeline.helpers import LIMITS, NOW, family_items, pending_from_meta, row, stage


def new_timer(r: dict) -> NewTimer:
    return NewTimer(r["topic"], r["id"], r["deliver_at_ms"], r["payload"].encode())


@pytest.fixture
def store(tmp_path):
    s = RocksTimerStore(RocksSettings(str(tmp_path / "rocks")))
    yield s
    s.close()


def test_ingest_into_a_fresh_store_writes_what_schedule_writes(tmp_path, store):
    rows = [row(f"t{i % 3}", f"id{i}", NOW + (i * 7919) % 5000, f"x{i}") for i in range(1000)]
    stage(tmp_path / "stage", rows)
    report = store.ingest_staged(str(tmp_path / "stage"), limits=LIMITS)
    reference = RocksTimerStore(RocksSettings(str(tmp_path / "ref")))
    reference.schedule([new_timer(r) for r in rows], NOW)
    assert family_items(store, "timers") == family_items(reference, "timers")
    assert family_items(store, "ids") == family_items(reference, "ids")
    assert len(family_items(store, "timers")) == 1000
    assert store.stats().pending_by_topic == reference.stats().pending_by_topic
    assert (report.staged, report.added, report.skipped, report.files) == (1000, 1000, 0, 4)
    assert not os.path.exists(tmp_path / "stage" / "timers" / "part-00000.sst")  # moved in
    reference.close()
    assert pending_from_meta(store) == {"t0": 334, "t1": 333, "t2": 333}


def _store_with_history(store: RocksTimerStore) -> None:
    store.schedule(
        [
            NewTimer("o", "a", NOW + 100, b"old-a"),
            NewTimer("o", "b", NOW + 200, b"old-b"),
            NewTimer("o", "c", NOW, b"old-c"),
            NewTimer("o", "d", NOW, b"old-d"),
        ],
        NOW,
    )
    due = store.due(NOW, 10)  # c and d in flight
    [d] = [t for t in due if t.id == "d"]
    store.commit_delivered([d], NOW, sink=LOG_SINK)  # d delivered, c stays in flight


IMPORT = [
    row("o", "a", NOW + 900, "new-a"),  # pending, a new time
    row("o", "b", NOW + 200, "new-b"),  # pending, the same key
    row("o", "c", NOW + 50, "new-c"),  # in flight
    row("o", "d", NOW + 50, "new-d"),  # delivered
    row("o", "e", NOW + 300, "new-e"),  # new
]


def test_pending_in_flight_and_delivered_identities_are_skipped_and_reported(tmp_path, store):
    _store_with_history(store)
    stage(tmp_path / "stage", IMPORT)
    report = store.ingest_staged(str(tmp_path / "stage"), limits=LIMITS)
    assert (report.added, report.replaced, report.skipped) == (1, 0, 4)
    assert report.skipped_by_reason == {"pending": 2, "in_flight": 1, "delivered": 1}
    assert {(s.id, s.reason) for s in report.skipped_sample} == {
        ("a", "pending"),
        ("b", "pending"),
        ("c", "in_flight"),
        ("d", "delivered"),
    }
    views = {i: store.get("o", i) for i in "abcde"}
    assert (views["a"].deliver_at_ms, views["a"].payload) == (NOW + 100, b"old-a")
    assert (views["b"].deliver_at_ms, views["b"].payload) == (NOW + 200, b"old-b")
    assert views["c"].state == TimerState.IN_FLIGHT and views["c"].payload == b"old-c"
    assert views["d"].state == TimerState.DELIVERED
    assert (views["e"].deliver_at_ms, views["e"].payload) == (NOW + 300, b"new-e")
    keys = [k for k, _ in family_items(store, "timers")]
    assert len(keys) == 4  # a, b, c (in flight), e: nothing stray at a's imported time
    assert store.stats().pending_by_topic == {"o": 4}
    assert pending_from_meta(store) == {"o": 4}


def test_replace_swaps_pending_timers_but_never_in_flight_or_delivered(tmp_path, store):
    _store_with_history(store)
    stage(tmp_path / "stage", IMPORT)
    report = store.ingest_staged(str(tmp_path / "stage"), limits=LIMITS, replace=True)
    assert (report.added, report.replaced, report.skipped) == (1, 2, 2)
    assert report.skipped_by_reason == {"in_flight": 1, "delivered": 1}
    a, b, c = (store.get("o", i) for i in "abc")
    assert (a.deliver_at_ms, a.payload) == (NOW + 900, b"new-a")
    assert (b.deliver_at_ms, b.payload) == (NOW + 200, b"new-b")
    assert c.payload == b"old-c"
    assert store.due(NOW + 100, 10) == []  # a's old key is gone
    assert len(family_items(store, "timers")) == 4
    assert pending_from_meta(store) == {"o": 4}


def test_past_due_import_below_the_watermark_is_moved_up_and_delivered(tmp_path, store):
    clock = FakeClock(NOW)
    engine = Engine(store, clock)
    store.schedule([NewTimer("o", f"old{i}", NOW + i) for i in range(50)], NOW)
    assert engine.run_once(clock.advance(60_000)) == 50
    store.housekeep(clock.now_ms())
    watermark_ms = store.stats().watermark_ms
    assert watermark_ms > NOW  # housekeeping dropped everything below it

    stage(tmp_path / "stage", [row("o", "late", NOW - 3_600_000), row("o", "soon", NOW + 90_000)])
    report = store.ingest_staged(str(tmp_path / "stage"), limits=LIMITS)
    assert report.moved_past_due == 1
    late = store.get("o", "late")
    assert late.deliver_at_ms >= watermark_ms and late.requested_deliver_at_ms == NOW - 3_600_000
    store.housekeep(clock.now_ms())  # must not range-delete the import
    assert engine.run_once(late.deliver_at_ms) == 1  # the clamp floor: the next ms, as schedule
    clock.set(NOW + 89_999)
    assert engine.run_once(clock.now_ms()) == 0  # "soon" is not due yet
    assert engine.run_once(clock.advance(1)) == 1
    delivered = {m.id: m for m in store.read_log("o", 0, 100)}
    assert set(delivered) >= {"late", "soon"}
    assert delivered["soon"].delivered_at_ms == NOW + 90_000
    assert store.stats().pending == 0


def test_an_offline_import_after_the_clock_stepped_back_is_due_at_once(tmp_path):
    """The clock stepped back an hour while the service was down: past-due rows are due
    at the new now, as a schedule's timers are, not an hour later (the CLI's floor and
    the ingest's ``now_ms``)."""
    settings = RocksSettings(str(tmp_path / "rocks"))
    store = RocksTimerStore(settings)
    store.schedule([NewTimer("o", "x", NOW + 5)], NOW)
    store.commit_delivered(store.due(NOW + 100, 10), NOW + 100, sink=LOG_SINK)
    store.housekeep(NOW + 100)
    store.close()
    back = NOW - 3_600_000
    store = RocksTimerStore(settings)
    try:
        floor_ms = offline_floor_ms(store.stats().watermark_ms, back)
        stage(tmp_path / "stage", [row("o", "late", back - 10)], now_ms=back, floor_ms=floor_ms)
        store.ingest_staged(str(tmp_path / "stage"), limits=LIMITS, now_ms=back)
        assert store.get("o", "late").deliver_at_ms == back + 1
        store.housekeep(back + 1)  # must not range-delete it below the old watermark
        assert [t.id for t in store.due(back + 1, 10)] == ["late"]
    finally:
        store.close()


def test_past_due_import_behind_the_scan_cursor_rewinds_it(tmp_path, store):
    clock = FakeClock(NOW)
    engine = Engine(store, clock)
    store.schedule([NewTimer("o", "x", NOW)], NOW)
    assert engine.run_once(clock.advance(10_000)) == 1  # the scanner passed NOW + 10 s
    assert store.stats().watermark_ms <= NOW  # no housekeeping: the watermark stayed behind
    stage(tmp_path / "stage", [row("o", "behind", NOW + 5_000)])
    report = store.ingest_staged(str(tmp_path / "stage"), limits=LIMITS)
    assert report.cursor_rewound and report.moved_past_due == 0
    assert store.get("o", "behind").deliver_at_ms == NOW + 5_000  # kept its key
    assert engine.run_once(clock.now_ms()) == 1
    assert [m.id for m in store.read_log("o", 0, 10)] == ["x", "behind"]


def test_a_future_import_leaves_the_cursor_alone(tmp_path, store):
    stage(tmp_path / "stage", [row("o", "f", NOW + 5_000)])
    report = store.ingest_staged(str(tmp_path / "stage"), limits=LIMITS)
    assert not report.cursor_rewound and report.moved_past_due == 0
    assert store.due(NOW + 4_999, 10) == []
    assert [t.id for t in store.due(NOW + 5_000, 10)] == ["f"]


def test_a_broken_stage_is_refused_before_anything_is_written(tmp_path, store):
    with pytest.raises(InvalidInputError, match=r"no manifest\.json"):
        store.ingest_staged(str(tmp_path), limits=LIMITS)
    stage(tmp_path / "stage", [row("o", "a", NOW), row("o", "b", NOW)])
    os.remove(tmp_path / "stage" / "ids" / "part-00001.sst")
    with pytest.raises(InvalidInputError, match="missing"):
        store.ingest_staged(str(tmp_path / "stage"), limits=LIMITS)
    stage(tmp_path / "other", [row("o", "a", NOW)], parts=1)
    text = (tmp_path / "other" / MANIFEST).read_text().replace('"o": 1', '"o": 2')
    (tmp_path / "other" / MANIFEST).write_text(text)
    with pytest.raises(InvalidInputError, match="inconsistent"):
        store.ingest_staged(str(tmp_path / "other"), limits=LIMITS)
    assert family_items(store, "timers") == [] and store.stats().pending == 0


def test_an_identity_delivered_by_a_range_page_is_skipped_and_stays_delivered(tmp_path, store):
    """Format 3 leaves a range delivery's pending key time in ids: ingest still sees it."""
    store.schedule([NewTimer("o", "x", NOW), NewTimer("o", "y", NOW)], NOW)
    store.commit_delivered(store.due(NOW, 10), NOW, sink=LOG_SINK)  # one clean range
    assert len(family_items(store, "ranges")) == 1
    stage(tmp_path / "stage", [row("o", "x", NOW), row("o", "y", NOW + 500), row("o", "z", NOW)])
    report = store.ingest_staged(str(tmp_path / "stage"), limits=LIMITS, replace=True)
    assert (report.added, report.skipped_by_reason) == (1, {"delivered": 2})
    x, y = store.get("o", "x"), store.get("o", "y")
    assert (x.state, y.state) == (TimerState.DELIVERED, TimerState.DELIVERED)
    assert [k[8:] for k, _ in family_items(store, "timers")] == [b"o\0z"]
    assert pending_from_meta(store) == {"o": 1}
