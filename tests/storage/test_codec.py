"""Property tests of the key codec: byte order is time order, round-trips, validation."""

from __future__ import annotations

import string

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage import records
from storage.errors import InvalidInputError
from storage.names import all_valid, validate_idents, validate_name
from storage.records import TimerRecord
from storage.rocks import keys as layout

SAFE = string.ascii_letters + string.digits + "._:-"
names = st.text(alphabet=SAFE, min_size=1, max_size=128)
times = st.integers(min_value=0, max_value=layout.U64_MAX)


@given(st.lists(st.tuples(times, names, names), min_size=2, max_size=50))
def test_key_byte_order_equals_time_topic_id_order(items):
    keys = [layout.timer_key(ms, t.encode(), i.encode()) for ms, t, i in items]
    by_bytes = sorted(range(len(items)), key=lambda n: keys[n])
    by_tuple = sorted(range(len(items)), key=lambda n: (items[n][0], items[n][1], items[n][2]))
    assert [items[n] for n in by_bytes] == [items[n] for n in by_tuple]


@given(times, names, names)
def test_timer_key_round_trips(ms, topic, timer_id):
    key = layout.timer_key(ms, topic.encode(), timer_id.encode())
    assert layout.decode_timer_key(key) == (ms, topic, timer_id)
    # the hot paths build a timer key as key time | ident (storage.rocks.writes)
    assert key == layout.u64(ms) + layout.ident_key(topic.encode(), timer_id.encode())
    assert layout.split_ident(layout.ident_key(topic.encode(), timer_id.encode())) == (
        topic,
        timer_id,
    )


@given(
    st.binary(max_size=2048),
    st.dictionaries(st.text(max_size=20), st.text(max_size=50), max_size=5),
    times,
    times,
    st.integers(min_value=0, max_value=100),
    st.booleans(),
)
def test_record_round_trips(payload, headers, created, requested, attempts, binary):
    record = TimerRecord(payload, headers, created, requested, attempts, binary)
    assert records.decode_record(records.encode(record)) == record


@given(
    names,
    times,
    st.integers(min_value=1, max_value=100),
    st.builds(TimerRecord, st.binary(max_size=64), st.just({"k": "v"}), times, times),
)
def test_a_page_written_with_raw_bytes_reads_as_a_log_page(timer_id, key_ms, attempts, record):
    """The commit writes RawLogPage/RawLogEntry; readers decode LogPage/LogEntry: same array."""
    raw = msgspec.Raw(records.encode(record))
    written = records.RawLogPage(key_ms, [records.RawLogEntry(timer_id, key_ms, attempts, raw)])
    page = records.decode_log_page(records.encode(written))
    assert page == records.LogPage(key_ms, [records.LogEntry(timer_id, key_ms, attempts, record)])


@given(names)
def test_valid_names_pass(name):
    assert validate_name("topic", name) == name.encode()


@pytest.mark.parametrize("field", ["topic", "id"])
@given(
    bad=st.one_of(
        st.just(""),
        st.text(alphabet=SAFE, min_size=129, max_size=200),
        st.text(min_size=1, max_size=20).filter(lambda s: any(c not in SAFE for c in s)),
    )
)
def test_invalid_names_rejected_with_field_named(field, bad):
    with pytest.raises(InvalidInputError) as info:
        validate_name(field, bad)
    assert info.value.field == field
    assert field in info.value.message


@given(st.lists(st.tuples(names, names), max_size=30), st.integers(min_value=0, max_value=29))
def test_a_batch_of_names_validates_like_each_name(pairs, bad_at):
    """The one-regex path of validate_idents agrees with validate_name and builds the
    identities the key layout does, and its fallback names the field of the first bad id."""
    topics, ids = [t for t, _ in pairs], [i for _, i in pairs]
    assert validate_idents(topics, ids) == [
        layout.ident_key(validate_name("topic", t), validate_name("id", i)) for t, i in pairs
    ]
    if pairs:
        ids[bad_at % len(ids)] = "bad\nid"
        with pytest.raises(InvalidInputError) as caught:
            validate_idents(topics, ids)
        assert caught.value.field == "id"


_awkward = st.sampled_from(["", "a b", "two\nlines", "\n", "x\n", "é", "t" * 129, "a\x00b"])


@given(
    st.lists(
        st.tuples(st.one_of(names, _awkward), st.one_of(names, _awkward, st.just("a\nt\x00b"))),
        min_size=1,
        max_size=20,
    )
)
def test_a_batch_refuses_exactly_the_batches_with_a_bad_name(pairs):
    """A newline or 0x00 inside a name must not let the joined batch pass as other pairs
    (``a\\nt\\x00b`` as an id would read as two valid pairs without the count of lines)."""
    topics, ids = [t for t, _ in pairs], [i for _, i in pairs]
    every_name_follows = all(map(_follows_the_rule, topics + ids))
    try:
        idents = validate_idents(topics, ids)
    except InvalidInputError as refused:
        assert not every_name_follows
        assert refused.field in ("topic", "id")
    else:
        assert every_name_follows
        assert len(idents) == len(pairs)


def test_a_name_that_is_not_a_string_is_refused_by_field():
    with pytest.raises(InvalidInputError) as caught:
        validate_idents(["orders", 7], ["a", "b"])  # type: ignore[list-item]
    assert caught.value.field == "topic"
    with pytest.raises(InvalidInputError) as caught:
        validate_idents(["orders"], [b"a"])  # type: ignore[list-item]
    assert caught.value.field == "id"


def _follows_the_rule(name: str) -> bool:
    try:
        validate_name("topic", name)
    except InvalidInputError:
        return False
    return True


@given(
    st.lists(
        st.one_of(names, st.sampled_from(["", "a b", "two\nlines", "\n", "x\n", "é", "t" * 129])),
        max_size=20,
    )
)
def test_all_valid_agrees_with_each_name(batch):
    """The one-regex check of a batch's names says yes exactly when every name passes
    ``validate_name`` (a newline inside a name must not pass as two names)."""
    assert all_valid(batch) == all(map(_follows_the_rule, batch))
