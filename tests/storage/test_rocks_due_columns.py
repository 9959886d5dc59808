"""The due scan and the commit build a batch column by column (docs/perf.md): the same
timers, records, log offsets and lateness as one object per loop turn would give."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.engine.dispatcher import lateness_of
from storage import records
from storage.names import NAME_PATTERN
from storage.protocol import LOG_SINK, DueTimer, NewTimer
from storage.rocks import keys as layout
from storage.rocks.delivery import due_timers

NOW = 1_700_000_000_000

names = st.from_regex(NAME_PATTERN.replace("128", "12"), fullmatch=True)
record_values = st.builds(
    records.TimerRecord,
    payload=st.binary(max_size=40),
    headers=st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
    created_at_ms=st.integers(0, layout.MAX_TIME_MS),
    requested_deliver_at_ms=st.integers(0, layout.MAX_TIME_MS),
    attempts=st.integers(0, 50),
    binary=st.booleans(),
)
stored_timers = st.lists(
    st.tuples(st.integers(0, layout.MAX_TIME_MS), names, names, record_values), max_size=30
)


def one_by_one(key: bytes, value: bytes) -> DueTimer:
    key_ms, topic, timer_id = layout.decode_timer_key(key)
    return DueTimer(key, topic, timer_id, key_ms, records.decode_record(value), value)


@given(stored_timers)
def test_due_timers_are_the_timers_decoded_one_by_one(timers):
    keys = [layout.timer_key(ms, t.encode(), i.encode()) for ms, t, i, _ in timers]
    values = [records.encode(r) for *_, r in timers]
    assert due_timers(keys, values) == [one_by_one(k, v) for k, v in zip(keys, values, strict=True)]
    assert records.decode_records(values) == [r for *_, r in timers]


def test_a_key_written_around_the_name_rules_is_refused_not_misread():
    good = layout.timer_key(NOW, b"orders", b"a")
    value = records.encode(records.TimerRecord(b"x", {}, NOW, NOW))
    for bad in (layout.u64(NOW) + b"orders-without-separator", good + b"\x00extra"):
        with pytest.raises(ValueError, match="0x00"):
            due_timers([good, bad], [value, value])


@given(st.lists(st.tuples(st.integers(0, 10**15), st.integers(0, 10**15)), max_size=20))
def test_lateness_counts_from_the_later_of_requested_and_created(times):
    delivered_ms = 10**15
    batch = [
        DueTimer(b"k", "t", "i", 0, records.TimerRecord(b"", {}, created, requested))
        for created, requested in times
    ]
    expected = [delivered_ms - max(created, requested) for created, requested in times]
    assert lateness_of(batch, delivered_ms) == expected


def test_log_offsets_of_interleaved_topics_and_of_one_topic_batches(rocks_store):
    """A batch of several topics takes each topic's offsets in batch order; a batch of
    one topic takes a run of them; both continue from what earlier commits took."""
    rocks_store.schedule([NewTimer("a", "a0", NOW), NewTimer("b", "b0", NOW)], NOW)
    first = rocks_store.due(NOW, 10)
    assert rocks_store.commit_delivered(first, NOW, sink=LOG_SINK) == [0, 0]
    mixed = [NewTimer("ab"[i % 2], f"m{i}", NOW + 1) for i in range(6)]
    rocks_store.schedule(mixed, NOW)
    due = rocks_store.due(NOW + 1, 10)
    assert [t.topic for t in due] == ["a", "a", "a", "b", "b", "b"]  # key order: topic, id
    shuffled = [due[2], due[3], due[0], due[5], due[4], due[1]]  # batch order rules
    assert rocks_store.commit_delivered(shuffled, NOW + 1, sink=LOG_SINK) == [1, 1, 2, 2, 3, 3]
    rocks_store.schedule([NewTimer("b", f"s{i}", NOW + 2) for i in range(3)], NOW)
    single = rocks_store.due(NOW + 2, 10)
    assert rocks_store.commit_delivered(single, NOW + 2, sink=LOG_SINK) == [4, 5, 6]
    assert [m.id for m in rocks_store.read_log("a", 0, 10)] == ["a0", "m4", "m0", "m2"]
    b_log = rocks_store.read_log("b", 0, 10)
    assert [m.id for m in b_log] == ["b0", "m1", "m5", "m3", "s0", "s1", "s2"]
    assert [m.offset for m in b_log] == list(range(7))


def test_a_commit_to_another_sink_takes_no_log_offsets(rocks_store):
    rocks_store.schedule([NewTimer("a", f"w{i}", NOW) for i in range(3)], NOW)
    due = rocks_store.due(NOW, 10)
    assert rocks_store.commit_delivered(due, NOW, sink="webhook") == [-1, -1, -1]
    assert rocks_store.read_log("a", 0, 10) == []
    assert rocks_store.commit_delivered([], NOW, sink=LOG_SINK) == []
