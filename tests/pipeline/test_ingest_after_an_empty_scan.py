"""An SST ingest may link files in without a write through the store, so the due scan's
look ahead (``storage.rocks.look_ahead``) must not hide what it brought in."""

from __future__ import annotations

from storage.protocol import NewTimer
from storage.rocks import RocksSettings, RocksTimerStore
from tests.pipeline.helpers import LIMITS, NOW, row, stage


def test_timers_ingested_below_the_noted_key_are_due_at_their_time(tmp_path):
    store = RocksTimerStore(RocksSettings(str(tmp_path / "rocks")))
    try:
        store.schedule([NewTimer("o", "far", NOW + 60_000)], NOW)
        assert store.due(NOW, 10) == [] and store.due(NOW + 1, 10) == []  # notes "far"
        stage(tmp_path / "stage", [row("o", "in", NOW + 500)], now_ms=NOW)
        store.ingest_staged(str(tmp_path / "stage"), limits=LIMITS, now_ms=NOW + 2)
        assert store.due(NOW + 499, 10) == []
        assert [t.id for t in store.due(NOW + 500, 10)] == ["in"]
    finally:
        store.close()
