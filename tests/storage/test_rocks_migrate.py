"""`timerstore migrate`: a directory the format-1 code wrote answers the same after it.

The migration writes format 2's records; every test runs twice: on its output, and on
that output made a true format-2 directory (no ``ranges``, version 2) that the current
version upgrades in place on open.

The fixture (tests/storage/fixtures/rocks-format-1) was written by the format-1 store
itself at commit e027ce7, with what that store answered about every timer in
``expected.json`` (``make_rocks_format_1.py`` says how to make it again).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest
import rocksdict as rd

from storage import records
from storage.errors import ConflictError, StoreCorruptError, StoreFormatError, StoreOpenError
from storage.protocol import LOG_SINK, NewTimer, TimerState
from storage.rocks import RocksSettings, RocksTimerStore
from storage.rocks import keys as layout
from storage.rocks import migrate as migration
from storage.rocks.db import FORMAT_KEY, FORMAT_VERSION, is_format_1
from tests.conformance.child_lines import ChildLines, stop_child

FIXTURE = Path(__file__).parent / "fixtures" / "rocks-format-1"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())
NOW_MS = EXPECTED["now_ms"]
REPO = Path(__file__).resolve().parents[2]
# journal entries are arrays (topic, id, requested, key_ms, delivered, attempts, offset,
# created) in both formats
TOPIC, ID, ATTEMPTS = 0, 1, 5


def _format_1_copy(tmp_path: Path) -> RocksSettings:
    path = tmp_path / "data" / "rocks"
    shutil.copytree(FIXTURE / "data", path)
    return RocksSettings(str(path))


def _builtins(value: object) -> object:
    return json.loads(json.dumps(msgspec.to_builtins(value), sort_keys=True))


def _page(page: object) -> object:
    """A TimerPage as format 1 wrote it: its views had no ``sink`` (None here)."""
    out = _builtins(page)
    assert isinstance(out, dict)
    for view in out["timers"]:
        assert view.pop("sink") is None
    return out


def _journal_attempts() -> dict[str, int]:
    return {f"{e[TOPIC]}/{e[ID]}": e[ATTEMPTS] for e in EXPECTED["journal"]}


def _as_format_2(path: str) -> None:
    """Make the migrated directory what format 2's own code left: no ``ranges`` family
    (the migration writes format 2's records only, so it is empty) and version 2."""
    db = _open_raw(path)
    assert list(db.get_column_family("ranges").keys()) == []
    db.drop_column_family("ranges")
    db.get_column_family("meta").put(FORMAT_KEY, (2).to_bytes(8, "big"))
    db.close()
    assert "ranges" not in rd.Rdict.list_cf(path)


@pytest.fixture(params=["migrated", "format 2 upgraded on open"])
def migrated(tmp_path, request):
    settings = _format_1_copy(tmp_path)
    report = migration.migrate_format_1(settings)
    if request.param != "migrated":
        _as_format_2(settings.path)
    store = RocksTimerStore(settings)
    yield store, report
    store.close()


def test_the_directory_is_marked_with_the_current_format(migrated):
    store, _report = migrated
    db = store.core.control_parts()[0]
    assert int.from_bytes(db.get_column_family("meta")[FORMAT_KEY], "big") == FORMAT_VERSION
    del db


def test_the_report_counts_what_was_migrated(migrated):
    _store, report = migrated
    stats = EXPECTED["stats"]
    assert report.pending == stats["pending"] == 8
    assert report.dead_letters == stats["dead_lettered"] == 2
    assert report.log_messages == sum(t["log_end_offset"] for t in EXPECTED["topics"]) == 16
    assert report.delivered_records == len(EXPECTED["journal"]) == 18
    assert Path(report.backup).is_dir() and is_format_1(report.backup)


def test_every_timer_answers_as_format_1_did(migrated):
    store, _report = migrated
    attempts = _journal_attempts()
    for name, before in EXPECTED["views"].items():
        topic, _, timer_id = name.partition("/")
        after = _builtins(store.get(topic, timer_id))
        if before is None:
            assert after is None, name
            continue
        assert isinstance(after, dict)
        sink = after.pop("sink")
        if before["state"] == "delivered":  # format 1 did not keep these two
            assert (after.pop("attempts"), sink) == (
                attempts[name],
                LOG_SINK if before["offset"] is not None else migration.CALLBACK_SINK,
            ), name
            before = {k: v for k, v in before.items() if k != "attempts"}
        else:
            assert sink is None
        assert after == before, name


def test_the_retried_delivery_keeps_its_attempt_count(migrated):
    store, _report = migrated
    view = store.get("reminders", "o-10")
    assert (view.state, view.attempts, view.offset) == (TimerState.DELIVERED, 2, 5)


def test_topic_logs_dead_letters_pending_and_journal_read_the_same(migrated):
    store, _report = migrated
    for topic, messages in EXPECTED["logs"].items():
        assert _builtins(store.read_log(topic, 0, 100)) == messages, topic
        for offset in range(len(messages)):  # a read may start inside a page
            assert _builtins(store.read_log(topic, offset, 1)) == messages[offset : offset + 1]
    assert _page(store.dead_letters(limit=100)) == EXPECTED["dead_letters"]
    assert _page(store.list_pending(limit=100)) == EXPECTED["pending"]
    assert _builtins(list(store.journal(0))) == EXPECTED["journal"]


def test_counters_carry_over_with_the_sink_split(migrated):
    store, _report = migrated
    stats = _builtins(store.stats())
    assert isinstance(stats, dict)
    assert stats.pop("delivered_by_sink") == {LOG_SINK: 16, migration.CALLBACK_SINK: 2}
    assert stats == EXPECTED["stats"]
    assert _builtins(store.topics()) == EXPECTED["topics"]


def test_the_migrated_store_goes_on_delivering_after_its_log(migrated):
    store, _report = migrated
    due = store.due(NOW_MS + 100_000, 100)
    assert sorted(t.id for t in due) == sorted(t["id"] for t in EXPECTED["pending"]["timers"])
    offsets = store.commit_delivered(due, NOW_MS + 100_000, sink=LOG_SINK)
    by_topic = {t["topic"]: t["log_end_offset"] for t in EXPECTED["topics"]}
    for timer, offset in zip(due, offsets, strict=True):
        assert offset >= by_topic[timer.topic]
    orders = store.read_log("orders", 0, 100)
    assert [m.offset for m in orders] == list(range(len(orders)))
    assert len(orders) == by_topic["orders"] + EXPECTED["stats"]["pending_by_topic"]["orders"]


def test_a_migrated_delivery_is_409_until_it_expires_then_schedulable(migrated):
    store, _report = migrated
    with pytest.raises(ConflictError, match="delivered"):
        store.schedule([NewTimer("orders", "o-00", NOW_MS + 200_000)], NOW_MS + 30_000)
    report = store.housekeep(NOW_MS + 20_100 + store.settings.done_retention_ms + 1)
    assert report.done_expired == 18  # bounded: walked through the migrated journal pages
    store.schedule([NewTimer("orders", "o-00", NOW_MS + 200_000)], NOW_MS + 30_000)
    assert store.get("orders", "o-00").state is TimerState.PENDING


def test_a_migrated_dead_letter_can_be_replayed(migrated):
    store, _report = migrated
    store.replay_dead_letter("orders", "o-12", NOW_MS + 30_000)
    view = store.get("orders", "o-12")
    assert (view.state, view.payload) == (TimerState.PENDING, b"payload 12")


def test_a_failed_migration_leaves_the_format_1_directory_as_it_was(tmp_path, monkeypatch):
    settings = _format_1_copy(tmp_path)

    def broken_log_copy(*_args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(migration, "_copy_topic_log", broken_log_copy)
    with pytest.raises(OSError, match="disk full"):
        migration.migrate_format_1(settings)
    assert is_format_1(settings.path)
    assert not Path(settings.path + migration.BACKUP_SUFFIX).exists()
    with pytest.raises(StoreFormatError):
        RocksTimerStore(settings)
    monkeypatch.undo()  # the next run starts the half-written directory afresh
    report = migration.migrate_format_1(settings)
    assert report.log_messages == 16 and not Path(settings.path + ".migrating").exists()


def test_a_delivery_record_missing_from_the_journal_stops_the_migration(tmp_path):
    settings = _format_1_copy(tmp_path)
    db = _open_raw(settings.path)
    journal = db.get_column_family("journal")
    first = next(iter(journal.keys()))
    journal.delete(first)
    del journal
    db.close()
    with pytest.raises(StoreCorruptError, match="delivery records"):
        migration.migrate_format_1(settings)
    assert is_format_1(settings.path)


def test_the_refusal_names_the_migrate_command(tmp_path):
    settings = _format_1_copy(tmp_path)
    with pytest.raises(StoreFormatError, match="timerstore migrate"):
        RocksTimerStore(settings)


def _migrate_command(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "timerstore", "migrate", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def test_the_command_migrates_then_finds_nothing_to_do(tmp_path):
    settings = _format_1_copy(tmp_path)
    first = _migrate_command(tmp_path / "data")
    assert first.returncode == 0, first.stderr
    assert "8 pending" in first.stdout and "rocks.format-1" in first.stdout
    store = RocksTimerStore(settings)
    try:
        db = store.core.control_parts()[0]
        assert int.from_bytes(db.get_column_family("meta")[FORMAT_KEY], "big") == FORMAT_VERSION
        del db
    finally:
        store.close()
    again = _migrate_command(tmp_path / "data")
    assert again.returncode == 0 and "nothing to migrate" in again.stdout


def test_log_pages_keep_the_creation_time_and_attempts_of_each_message(migrated):
    store, _report = migrated
    pages = store.core.handles.cfs["topiclog"]
    entries = [e for _key, raw in pages.items() for e in records.decode_log_page(raw).entries]
    assert len(entries) == 16
    assert {e.record.created_at_ms for e in entries} == {NOW_MS}  # from each delivery record
    retried = [e for e in entries if e.id == "o-10"]
    assert [(e.attempts, e.record.attempts) for e in retried] == [(2, 1)]


HOLD_OPEN = """
import sys, rocksdict as rd
path = sys.argv[1]
families = {n: rd.Options(raw_mode=True) for n in rd.Rdict.list_cf(path) if n != "default"}
db = rd.Rdict(path, rd.Options(raw_mode=True), column_families=families)
print("open", flush=True)
sys.stdin.readline()
db.close()
"""


def test_a_directory_another_process_holds_open_is_not_migrated(tmp_path):
    settings = _format_1_copy(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_OPEN, settings.path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        first = ChildLines(holder.stdout).next_line(time.monotonic() + 30)
        assert first == "open", f"the holder did not report 'open' within 30 s: {first!r}"
        with pytest.raises(StoreOpenError, match="in use by another process"):
            migration.migrate_format_1(settings)
        assert is_format_1(settings.path)
        assert not Path(settings.path + migration.BACKUP_SUFFIX).exists()
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired):  # keeps the first error shown
            holder.communicate("\n", timeout=30)  # lets it close the database and exit
        stop_child(holder)  # killed if it did not end in time
    assert holder.returncode == 0, f"the holder did not exit by itself: {holder.returncode}"
    assert migration.migrate_format_1(settings).pending == 8  # free again: it goes through


def _open_raw(path: str) -> rd.Rdict:
    families = {n: rd.Options(raw_mode=True) for n in rd.Rdict.list_cf(path) if n != "default"}
    return rd.Rdict(path, rd.Options(raw_mode=True), column_families=families)


def test_journal_entries_an_interrupted_format_1_expiry_left_are_skipped(tmp_path):
    """Format 1's expiry could stop between a page's done deletes and the page's own: the
    page is still there, its identities have no record or a later delivery's."""
    settings = _format_1_copy(tmp_path)
    db = _open_raw(settings.path)
    stale = [
        records.JournalEntry("orders", "o-00", NOW_MS, NOW_MS, NOW_MS + 1, 1, 0, NOW_MS),
        records.JournalEntry("orders", "o-99", NOW_MS, NOW_MS, NOW_MS + 1, 1, 1, NOW_MS),
    ]
    journal = db.get_column_family("journal")
    journal.put(layout.journal_key(NOW_MS + 1, 999), records.encode(stale))
    del journal
    db.close()
    report = migration.migrate_format_1(settings)
    assert (report.delivered_records, report.journal_pages) == (18, 3)
    store = RocksTimerStore(settings)
    try:
        view = store.get("orders", "o-00")
        assert (view.delivered_at_ms, view.offset) == (NOW_MS + 11_500, 0)  # the real one
        assert store.get("orders", "o-99") is None
    finally:
        store.close()
