"""Format 3 of the RocksDB data directory: recorded, checked, refused when foreign.

(A format-2 directory is upgraded in place on open: tests/storage/test_rocks_migrate.py
runs its answers on one.)"""

from __future__ import annotations

import pytest
import rocksdict as rd

from storage.errors import StoreFormatError, StoreOpenError
from storage.protocol import LOG_SINK, NewTimer, TimerState
from storage.rocks import RocksSettings, RocksTimerStore
from storage.rocks.db import FAMILIES, FORMAT_KEY, FORMAT_VERSION

NOW = 1_700_000_000_000


def _write_format_1_directory(path: str) -> None:
    """What the first layout left on disk: its families, among them ``done``."""
    options = rd.Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    families = {n: rd.Options(raw_mode=True) for n in ("timers", "ids", "done", "meta")}
    db = rd.Rdict(path, options, column_families=families)
    db.close()


def test_a_new_directory_records_format_3(tmp_path):
    store = RocksTimerStore(RocksSettings(str(tmp_path / "r")))
    try:
        db = store.core.control_parts()[0]
        assert int.from_bytes(db.get_column_family("meta")[FORMAT_KEY], "big") == 3
        assert FORMAT_VERSION == 3
        del db
    finally:
        store.close()


def test_a_format_1_directory_is_refused_naming_the_version_and_what_to_do(tmp_path):
    path = str(tmp_path / "old")
    _write_format_1_directory(path)
    with pytest.raises(StoreFormatError) as caught:
        RocksTimerStore(RocksSettings(path))
    message = str(caught.value)
    assert path in message and "format 1" in message and "format 3" in message
    assert "timerstore migrate" in message
    assert (caught.value.found, caught.value.expected) == (1, 3)
    assert isinstance(caught.value, StoreOpenError)


def test_an_unknown_future_version_is_refused(tmp_path):
    settings = RocksSettings(str(tmp_path / "r"))
    store = RocksTimerStore(settings)
    db, _control, write_options = store.core.control_parts()
    db.get_column_family("meta").put(FORMAT_KEY, (7).to_bytes(8, "big"), write_options)
    del db, _control
    store.close()
    with pytest.raises(StoreFormatError, match="format 7"):
        RocksTimerStore(settings)


def test_a_locked_directory_is_a_store_open_error_naming_it(tmp_path):
    settings = RocksSettings(str(tmp_path / "r"))
    store = RocksTimerStore(settings)
    try:
        with pytest.raises(StoreOpenError, match=str(tmp_path / "r")) as caught:
            RocksTimerStore(settings)
        assert "lock" in str(caught.value).lower()
    finally:
        store.close()


def test_expired_delivery_record_lets_the_identity_be_scheduled_again(tmp_path):
    settings = RocksSettings(str(tmp_path / "r"), done_retention_ms=1000)
    store = RocksTimerStore(settings)
    try:
        store.schedule([NewTimer("o", "a", NOW)], NOW)
        store.commit_delivered(store.due(NOW, 10), NOW, sink=LOG_SINK)
        view = store.get("o", "a")
        assert (view.state, view.sink, view.attempts) == (TimerState.DELIVERED, LOG_SINK, 1)
        with pytest.raises(Exception, match="already delivered"):
            store.schedule([NewTimer("o", "a", NOW + 5000)], NOW + 10)
        assert store.housekeep(NOW + 999).done_expired == 0  # still within retention
        assert store.housekeep(NOW + 2000).done_expired == 1
        assert store.get("o", "a") is None
        [again] = store.schedule([NewTimer("o", "a", NOW + 5000)], NOW + 2000)
        assert (again.replaced, store.get("o", "a").state) == (False, TimerState.PENDING)
        store.commit_delivered(store.due(NOW + 5000, 10), NOW + 5000, sink="webhook")
        assert store.get("o", "a").sink == "webhook"
        assert store.stats().delivered_by_sink == {LOG_SINK: 1, "webhook": 1}
    finally:
        store.close()


def test_delivered_by_sink_survives_a_reopen(tmp_path):
    settings = RocksSettings(str(tmp_path / "r"))
    store = RocksTimerStore(settings)
    store.schedule([NewTimer("o", f"t{i}", NOW) for i in range(5)], NOW)
    due = store.due(NOW, 10)
    store.commit_delivered(due[:2], NOW, sink=LOG_SINK)
    store.commit_delivered(due[2:], NOW, sink="callback")
    store.close()
    store = RocksTimerStore(settings)
    try:
        assert store.stats().delivered_by_sink == {LOG_SINK: 2, "callback": 3}
        assert [t.log_end_offset for t in store.topics()] == [2]
    finally:
        store.close()


def test_a_journal_page_lists_idents_and_reads_back_joined_with_their_records(tmp_path):
    store = RocksTimerStore(RocksSettings(str(tmp_path / "r"), done_retention_ms=1000))
    try:
        store.schedule([NewTimer("o", "a", NOW - 50), NewTimer("p", "b", NOW)], NOW - 100)
        store.commit_delivered(store.due(NOW, 10), NOW + 7, sink=LOG_SINK)
        assert [(e.topic, e.id, e.requested_deliver_at_ms, e.key_ms, e.delivered_ms,
                 e.attempts, e.offset, e.created_at_ms) for e in store.journal()] == [
            ("o", "a", NOW - 50, NOW - 50, NOW + 7, 1, 0, NOW - 100),
            ("p", "b", NOW, NOW, NOW + 7, 1, 0, NOW - 100),
        ]  # fmt: skip
        assert store.housekeep(NOW + 2000).done_expired == 2
        assert list(store.journal()) == []  # the page went with the records it lists
    finally:
        store.close()
    db = rd.Rdict(str(tmp_path / "r"), rd.Options(raw_mode=True),
                  column_families={n: rd.Options(raw_mode=True) for n in FAMILIES})  # fmt: skip
    try:
        assert list(db.get_column_family("journal").keys()) == []
    finally:
        db.close()
