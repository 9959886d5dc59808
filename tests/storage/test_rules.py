"""``records_fit`` (the bulk ingest's fast check) agrees with ``check_record`` (the rule
that names what broke) on every record, so the fast path never lets through what the
named rules refuse."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from storage.errors import InvalidInputError
from storage.records import TimerRecord
from storage.rules import MAX_TIME_MS, RecordLimits, check_record, records_fit

LIMITS = RecordLimits(max_payload_bytes=8, max_headers=2, max_headers_bytes=12)
times = st.one_of(st.integers(-2, 3), st.integers(MAX_TIME_MS - 2, MAX_TIME_MS + 2))
texts = st.text(max_size=8)
records = st.builds(
    TimerRecord,
    payload=st.one_of(st.binary(max_size=10), texts.map(str.encode)),
    headers=st.dictionaries(texts, texts, max_size=3),
    created_at_ms=times,
    requested_deliver_at_ms=times,
    attempts=st.integers(-1, 2),
    binary=st.booleans(),
    due_again_at_ms=times,
)


def passes(record: TimerRecord, key_ms: int) -> bool:
    try:
        check_record(record, key_ms, LIMITS)
    except InvalidInputError:
        return False
    return True


@settings(deadline=None)  # the shared machine's load, not the check, sets the time
@given(st.lists(st.tuples(records, times), min_size=1, max_size=4))
def test_the_fast_check_agrees_with_the_named_rules(batch):
    found, key_times = [r for r, _ in batch], [k for _, k in batch]
    assert records_fit(found, key_times, LIMITS) == all(passes(r, k) for r, k in batch)
