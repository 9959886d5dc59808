"""Semantics of the RocksDB store on a real RocksDB in a temporary directory."""

from __future__ import annotations

import pytest

from storage.cursors import encode_cursor
from storage.errors import ConflictError, InvalidInputError, NotFoundError
from storage.protocol import LOG_SINK, CancelOutcome, NewTimer, TimerState
from storage.rocks import RocksSettings, RocksTimerStore

NOW = 1_700_000_000_000


def nt(timer_id: str, deliver_ms: int, topic: str = "orders", payload: bytes = b"p") -> NewTimer:
    return NewTimer(topic, timer_id, deliver_ms, payload, {"k": "v"})


def reopen(store: RocksTimerStore) -> RocksTimerStore:
    store.close()
    return RocksTimerStore(store.settings)


def test_schedule_then_get_returns_the_pending_timer(rocks_store):
    [result] = rocks_store.schedule([nt("a", NOW + 500, payload=b"hello")], NOW)
    assert (result.deliver_at_ms, result.replaced) == (NOW + 500, False)
    view = rocks_store.get("orders", "a")
    assert view.state == TimerState.PENDING
    assert (view.payload, view.headers, view.deliver_at_ms) == (b"hello", {"k": "v"}, NOW + 500)
    assert rocks_store.stats().pending == 1


def test_reschedule_replaces_and_never_duplicates(rocks_store):
    rocks_store.schedule([nt("a", NOW + 500)], NOW)
    [again] = rocks_store.schedule([nt("a", NOW + 900, payload=b"new")], NOW)
    rocks_store.schedule([nt("a", NOW + 900, payload=b"new")], NOW)  # the same request resent
    assert again.replaced
    page = rocks_store.list_pending(limit=10)
    assert [(v.id, v.deliver_at_ms, v.payload) for v in page.timers] == [("a", NOW + 900, b"new")]
    assert rocks_store.stats().pending_by_topic == {"orders": 1}
    assert rocks_store.due(NOW + 899, 10) == []  # the old time is gone


def test_past_due_keeps_requested_time_and_is_clamped_behind_the_scanner(rocks_store):
    rocks_store.schedule([nt("x", NOW)], NOW)
    assert [t.id for t in rocks_store.due(NOW, 10)] == ["x"]  # the scanner passed NOW
    [late] = rocks_store.schedule([nt("late", NOW - 60_000)], NOW)
    assert late.deliver_at_ms > NOW - 60_000  # clamped to where the scanner will look
    assert rocks_store.get("orders", "late").requested_deliver_at_ms == NOW - 60_000
    assert [t.id for t in rocks_store.due(late.deliver_at_ms, 10)] == ["late"]


def test_cancel_answers_removed_unknown_too_late(rocks_store):
    rocks_store.schedule([nt("p", NOW + 10), nt("f", NOW), nt("d", NOW)], NOW)
    [delivered, flight] = rocks_store.due(NOW, 10)  # key order: d before f
    rocks_store.commit_delivered([delivered], NOW, sink=LOG_SINK)
    results = rocks_store.cancel(
        [("orders", "p"), ("orders", "nope"), (flight.topic, flight.id), ("orders", "d")]
    )
    assert [(r.outcome, r.state) for r in results] == [
        (CancelOutcome.REMOVED, None),
        (CancelOutcome.UNKNOWN, None),
        (CancelOutcome.TOO_LATE, TimerState.IN_FLIGHT),
        (CancelOutcome.TOO_LATE, TimerState.DELIVERED),
    ]
    assert rocks_store.get("orders", "p") is None
    assert rocks_store.due(NOW + 10, 10) == []  # the removed timer never comes back
    stats = rocks_store.stats()
    assert (stats.cancelled, stats.pending, stats.in_flight, stats.delivered) == (1, 1, 1, 1)


def test_schedule_refuses_in_flight_and_delivered_identities(rocks_store):
    rocks_store.schedule([nt("f", NOW), nt("d", NOW)], NOW)
    [delivered, _in_flight] = rocks_store.due(NOW, 10)  # key order: d before f
    rocks_store.commit_delivered([delivered], NOW, sink=LOG_SINK)
    for timer_id, state in (("f", TimerState.IN_FLIGHT), ("d", TimerState.DELIVERED)):
        with pytest.raises(ConflictError) as info:
            rocks_store.schedule([nt("ok", NOW + 5), nt(timer_id, NOW + 5)], NOW)
        assert info.value.state == state
        assert info.value.field == "timers[1]"
    assert rocks_store.get("orders", "ok") is None  # nothing of the refused batch was stored


def test_commit_appends_to_topic_log_and_records_done(rocks_store):
    rocks_store.schedule([nt("a", NOW, payload=b"1"), nt("b", NOW + 1, payload=b"2")], NOW)
    due = rocks_store.due(NOW + 1, 10)
    assert rocks_store.commit_delivered(due, NOW + 3, sink=LOG_SINK) == [0, 1]
    log = rocks_store.read_log("orders", 0, 10)
    assert [(m.offset, m.id, m.payload, m.delivered_at_ms) for m in log] == [
        (0, "a", b"1", NOW + 3),
        (1, "b", b"2", NOW + 3),
    ]
    assert rocks_store.read_log("orders", 1, 10)[0].id == "b"
    view = rocks_store.get("orders", "b")
    assert (view.state, view.offset, view.delivered_at_ms) == (TimerState.DELIVERED, 1, NOW + 3)
    assert [(t.topic, t.pending, t.log_end_offset) for t in rocks_store.topics()] == [
        ("orders", 0, 2)
    ]
    assert [e.id for e in rocks_store.journal()] == ["a", "b"]


def test_due_respects_limit_in_flight_and_upper_bound(rocks_store):
    rocks_store.schedule([nt(f"t{i}", NOW + i) for i in range(10)], NOW)
    first = rocks_store.due(NOW + 5, 4)
    assert [t.id for t in first] == ["t0", "t1", "t2", "t3"]
    second = rocks_store.due(NOW + 5, 100)
    assert [t.id for t in second] == ["t4", "t5"]  # in-flight ones are not handed out twice
    assert rocks_store.due(NOW + 5, 100) == []
    rocks_store.release(first)
    assert [t.id for t in rocks_store.due(NOW + 5, 100)] == ["t0", "t1", "t2", "t3"]


def test_list_pending_pages_with_a_stable_cursor_and_topic_filter(rocks_store):
    rocks_store.schedule([nt(f"a{i:02d}", NOW + 10 * i) for i in range(25)], NOW)
    rocks_store.schedule([nt(f"b{i}", NOW + 10 * i + 5, topic="mail") for i in range(5)], NOW)
    seen, cursor, last_page = [], None, False
    for _ in range(10):  # bounded: 3 pages are expected; a cursor that never ends fails
        page = rocks_store.list_pending(topic="orders", limit=10, cursor=cursor)
        seen += [v.id for v in page.timers]
        # timers added before the cursor and deliveries do not disturb the next pages
        rocks_store.schedule([nt(f"early{len(seen)}", NOW - 1_000_000)], NOW)
        if page.next_cursor is None:
            last_page = True
            break
        cursor = page.next_cursor
    assert last_page, f"paging did not end after 10 pages; ids seen: {seen[:40]}"
    assert seen == [f"a{i:02d}" for i in range(25)]
    window = rocks_store.list_pending(from_ms=NOW + 20, to_ms=NOW + 40, topic="orders")
    assert [v.id for v in window.timers] == ["a02", "a03", "a04"]
    for bad in ("%%%not-base64", "%%%not-a-cursor", "AB", "", "AAAA", "AAAAAAAAAAAA"):
        with pytest.raises(InvalidInputError) as info:
            rocks_store.list_pending(cursor=bad)
        assert info.value.field == "cursor"
    # a cursor of a key is a position: the listing goes on after the key it names
    at_a09 = encode_cursor((NOW + 90).to_bytes(8, "big") + b"orders\x00a09")
    after = rocks_store.list_pending(topic="orders", cursor=at_a09)
    assert [v.id for v in after.timers] == [f"a{i:02d}" for i in range(10, 25)]
    first = rocks_store.list_pending(cursor=encode_cursor(b"\x00")).timers[0]
    assert first.id.startswith("early")


def test_invalid_names_rejected_naming_the_field_and_nothing_stored(rocks_store):
    with pytest.raises(InvalidInputError) as info:
        rocks_store.schedule([nt("good", NOW), NewTimer("orders", "bad id!", NOW)], NOW)
    assert info.value.field == "id"
    with pytest.raises(InvalidInputError) as info:
        rocks_store.schedule([NewTimer("t" * 129, "x", NOW)], NOW)
    assert info.value.field == "topic"
    assert rocks_store.stats().pending == 0


def test_failures_retry_with_attempts_then_dead_letter_replay_and_purge(rocks_store):
    rocks_store.schedule([nt("a", NOW), nt("b", NOW)], NOW)
    [a, b] = rocks_store.due(NOW, 10)
    rocks_store.retry_later([a], NOW + 1000, "boom")
    assert rocks_store.due(NOW + 999, 10) == []
    [a_again] = rocks_store.due(NOW + 1000, 10)
    assert a_again.record.attempts == 1
    rocks_store.dead_letter([a_again, b], NOW + 1000, "boom")
    assert rocks_store.stats().dead_lettered == 2
    assert rocks_store.stats().pending == 0
    page = rocks_store.dead_letters(topic="orders")
    assert [(v.id, v.state, v.last_error) for v in page.timers] == [
        ("a", TimerState.DEAD_LETTERED, "boom"),
        ("b", TimerState.DEAD_LETTERED, "boom"),
    ]
    replayed = rocks_store.replay_dead_letter("orders", "a", NOW + 2000)
    assert replayed.deliver_at_ms >= NOW + 2000
    assert rocks_store.get("orders", "a").state == TimerState.PENDING
    assert [t.id for t in rocks_store.due(NOW + 2000, 10)] == ["a"]
    with pytest.raises(NotFoundError):
        rocks_store.replay_dead_letter("orders", "a", NOW)
    assert rocks_store.purge_dead_letters("orders") == 1
    assert rocks_store.stats().dead_lettered == 0


def test_counters_and_log_offsets_survive_reopen(rocks_store):
    rocks_store.schedule([nt(f"t{i}", NOW + i) for i in range(5)], NOW)
    rocks_store.cancel([("orders", "t4")])
    rocks_store.commit_delivered(rocks_store.due(NOW + 1, 10), NOW + 1, sink=LOG_SINK)
    before = rocks_store.stats()
    store = reopen(rocks_store)
    try:
        after = store.stats()
        assert (after.pending, after.delivered, after.cancelled) == (2, 2, 1)
        assert (before.pending, before.delivered) == (after.pending, after.delivered)
        assert after.pending_by_topic == before.pending_by_topic == {"orders": 2}
        store.commit_delivered(store.due(NOW + 3, 10), NOW + 3, sink=LOG_SINK)
        assert [m.offset for m in store.read_log("orders", 0, 10)] == [0, 1, 2, 3]
        store = reopen(store)
        assert store.stats().pending_by_topic == {}  # a topic at 0 pending is not listed
        assert [(t.topic, t.pending, t.log_end_offset) for t in store.topics()] == [
            ("orders", 0, 4)
        ]
    finally:
        store.close()


def test_housekeeping_expires_done_and_topic_log_after_retention(tmp_path):
    settings = RocksSettings(str(tmp_path / "r"), done_retention_ms=1000, log_retention_ms=5000)
    store = RocksTimerStore(settings)
    try:
        store.schedule([nt("a", NOW), nt("b", NOW)], NOW)
        store.commit_delivered(store.due(NOW, 10), NOW, sink=LOG_SINK)
        store.schedule([nt("c", NOW + 3000)], NOW)
        store.commit_delivered(store.due(NOW + 3000, 10), NOW + 3000, sink=LOG_SINK)
        report = store.housekeep(NOW + 2000)
        assert report.done_expired == 2
        assert store.get("orders", "a") is None  # retention over: unknown again
        assert store.get("orders", "c").state == TimerState.DELIVERED
        assert store.housekeep(NOW + 6000).log_messages_expired == 2
        assert [m.id for m in store.read_log("orders", 0, 10)] == ["c"]
        assert store.topics()[0].log_end_offset == 3
    finally:
        store.close()


def _family_options(path) -> dict[str, dict[str, str]]:
    """The column-family options RocksDB wrote to its newest OPTIONS file."""
    options_file = max(path.glob("OPTIONS-*"))  # zero-padded numbers: the newest sorts last
    families: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in options_file.read_text().splitlines():
        line = line.strip()
        if line.startswith('[CFOptions "'):
            current = families.setdefault(line.split('"')[1], {})
        elif line.startswith("["):
            current = None
        elif current is not None and "=" in line:
            name, _, value = line.partition("=")
            current[name] = value
    return families


def test_memtable_sizes_and_the_scaled_level0_triggers_reach_rocksdb(tmp_path):
    """Read back from the OPTIONS file RocksDB writes: the settings reach the database,
    and a smaller memtable keeps as many L0 bytes before compaction and stalls."""
    settings = RocksSettings(
        str(tmp_path / "r"), write_buffer_bytes=4 << 20, timers_write_buffer_bytes=8 << 20
    )
    RocksTimerStore(settings).close()
    families = _family_options(tmp_path / "r")
    for name in ("ids", "topiclog", "deadletter", "journal", "meta", "control"):
        assert int(families[name]["write_buffer_size"]) == 4 << 20, name
    for name in ("topiclog", "deadletter", "journal", "meta", "control"):
        assert int(families[name]["level0_file_num_compaction_trigger"]) == 32, name
        assert int(families[name]["level0_slowdown_writes_trigger"]) == 160, name
        assert int(families[name]["level0_stop_writes_trigger"]) == 288, name
    ids = families["ids"]  # four 4 MiB memtables to a flush: 16 MiB L0 files
    assert int(ids["level0_file_num_compaction_trigger"]) == 8
    assert int(ids["level0_slowdown_writes_trigger"]) == 40
    assert int(ids["level0_stop_writes_trigger"]) == 72
    timers = families["timers"]
    assert int(timers["write_buffer_size"]) == 8 << 20
    assert int(timers["level0_file_num_compaction_trigger"]) == 16
    assert int(timers["level0_slowdown_writes_trigger"]) == 192  # 4 x 48
    assert int(timers["level0_stop_writes_trigger"]) == 320  # 4 x 80


def test_default_memtables_small_for_ids_and_later_write_stalls_for_timers(tmp_path):
    RocksTimerStore(RocksSettings(str(tmp_path / "r"))).close()
    families = _family_options(tmp_path / "r")
    ids = families["ids"]
    assert int(ids["write_buffer_size"]) == 8 << 20
    assert int(ids["min_write_buffer_number_to_merge"]) == 4  # one L0 file: 32 MiB
    assert int(ids["max_write_buffer_number"]) == 6
    assert int(ids["level0_file_num_compaction_trigger"]) == 4  # RocksDB's defaults, as
    assert int(ids["level0_slowdown_writes_trigger"]) == 20  # for 32 MiB memtables
    assert int(ids["level0_stop_writes_trigger"]) == 36
    assert int(families["deadletter"]["min_write_buffer_number_to_merge"]) == 1
    timers = families["timers"]
    assert int(timers["write_buffer_size"]) == 32 << 20
    assert int(timers["level0_file_num_compaction_trigger"]) == 4  # RocksDB's default
    assert int(timers["level0_slowdown_writes_trigger"]) == 48  # RocksDB's: 20
    assert int(timers["level0_stop_writes_trigger"]) == 80  # RocksDB's: 36


def test_ids_flushes_four_memtables_into_one_level0_file(tmp_path):
    """RocksDB merges four full ``ids`` memtables in one flush: a quarter of the L0 files
    that a schedule's lookup of new names passes through. Compaction is off, so every
    flushed file stays in L0 as it was written."""
    memtable_bytes = 64 << 10
    settings = RocksSettings(
        str(tmp_path / "r"), write_buffer_bytes=memtable_bytes, disable_auto_compactions=True
    )
    store = RocksTimerStore(settings)
    try:
        for start in range(0, 40_000, 1000):
            names = range(start, start + 1000)
            store.schedule([NewTimer("t", f"name-{i:08d}", NOW + i, b"") for i in names], NOW)
        files = store.core.handles.db.live_files()
    finally:
        store.close()
    # an ids key is the identity, "t" 0x00 name (a timers key starts with its due time)
    ids_files = [f for f in files if f["start_key"].startswith(b"t\x00")]
    # an entry takes at least its 15-byte key, 8-byte value and 8-byte sequence number
    one_memtable_holds_at_most = memtable_bytes // (15 + 8 + 8)
    assert len(ids_files) >= 2
    assert all(f["level"] == 0 for f in ids_files)
    assert min(f["num_entries"] for f in ids_files) > 3 * one_memtable_holds_at_most


def test_new_identities_and_a_batch_that_repeats_one_leave_the_same_bytes(tmp_path):
    """A batch of only new, distinct identities is written by its own code path (the bulk
    case, built a step at a time over the whole batch); any other batch by the general
    one. The same timers through either must leave the same bytes in every family."""
    timers = [
        NewTimer(f"topic-{i % 3}", f"t{i:03d}", NOW - 50 + (i * 7919) % 5000,
                 bytes([i % 256]) * i, {"n": str(i)} if i % 2 else {}, binary=i % 5 == 0)
        for i in range(60)
    ]  # fmt: skip
    bulk = RocksTimerStore(RocksSettings(str(tmp_path / "bulk")))
    general = RocksTimerStore(RocksSettings(str(tmp_path / "general")))
    try:
        bulk.due(NOW, 1)  # the scan cursor moves: the past-due timers below are clamped
        general.due(NOW, 1)
        bulk_results = bulk.schedule(timers, NOW)
        general_results = general.schedule([*timers, timers[7]], NOW)  # a repeat
        assert bulk_results == general_results[:-1]
        clamped = [
            r
            for r, t in zip(bulk_results, timers, strict=True)
            if r.deliver_at_ms > t.deliver_at_ms
        ]
        assert clamped  # past-due timers are among them
        for family in ("timers", "ids", "meta"):
            assert list(bulk.handles.cfs[family].items()) == list(
                general.handles.cfs[family].items()
            ), family
        assert bulk.stats().pending_by_topic == {"topic-0": 20, "topic-1": 20, "topic-2": 20}
    finally:
        bulk.close()
        general.close()
