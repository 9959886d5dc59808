"""The rules a stored timer's fields keep, shared by every writer of one.

The API (``app.timer_requests``), the import's rows (``pipeline.rows``) and a bulk
ingest of staged files (``storage.rocks.ingest``) check with these, so a timer that one
of them refuses cannot come in through another. Names follow ``storage.names``.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import msgspec

from storage.errors import InvalidInputError
from storage.records import TimerRecord

MAX_TIME_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: far beyond any real delay
# A delay this long from any time before year 8999 stays below MAX_TIME_MS, so every
# delay the document allows is accepted (1000 years of 365.25 days).
MAX_DELAY_MS = 1000 * 31_557_600_000


class RecordLimits(msgspec.Struct, frozen=True):
    """What one timer may carry. No defaults here: they live in the settings section
    ``limits`` (``app.timer_requests.RequestLimits``), which builds this."""

    max_payload_bytes: int
    max_headers: int
    max_headers_bytes: int


def check_payload_size(size: int, limits: RecordLimits, field: str = "payload") -> None:
    if size > limits.max_payload_bytes:
        raise InvalidInputError(
            f"{field} must be at most {limits.max_payload_bytes} bytes, got {size}",
            field=field,
        )


def check_headers(headers: dict[str, str], limits: RecordLimits) -> None:
    """At most ``max_headers`` entries of at most ``max_headers_bytes`` of UTF-8 in all."""
    if len(headers) > limits.max_headers:
        raise InvalidInputError(
            f"headers may have at most {limits.max_headers} entries, got {len(headers)}",
            field="headers",
        )
    try:
        size = sum(len(k.encode()) + len(v.encode()) for k, v in headers.items())
    except UnicodeEncodeError:
        raise InvalidInputError("headers must be valid UTF-8 text", field="headers") from None
    if size > limits.max_headers_bytes:
        raise InvalidInputError(
            f"headers must be at most {limits.max_headers_bytes} bytes in all, got {size}",
            field="headers",
        )


def check_time(value: int, field: str) -> None:
    if not 0 <= value <= MAX_TIME_MS:
        raise InvalidInputError(f"{field} must be between 0 and {MAX_TIME_MS}", field=field)


def records_fit(
    found: Sequence[TimerRecord], key_times: Sequence[int], limits: RecordLimits
) -> bool:
    """Whether ``check_record`` passes for each record and its key time: the same rules,
    column by column, each a C-level call over the batch (a bulk ingest checks millions);
    ``check_record`` then names the rule a record breaks."""
    if not found:
        return True
    requested = [r.requested_deliver_at_ms for r in found]
    created = [r.created_at_ms for r in found]
    due_again = [r.due_again_at_ms for r in found]
    headers = [r.headers for r in found if r.headers]
    return (
        min(requested) >= 0
        and max(key_times) <= MAX_TIME_MS
        and all(map(operator.le, requested, key_times))
        and 0 <= min(created) <= max(created) <= MAX_TIME_MS
        and 0 <= min(due_again) <= max(due_again) <= MAX_TIME_MS
        and min([r.attempts for r in found]) >= 0
        and max([len(r.payload) for r in found]) <= limits.max_payload_bytes
        and all(_headers_fit(h, limits) for h in headers)
        and _all_utf8([r.payload for r in found if not r.binary])
    )


def _headers_fit(headers: dict[str, str], limits: RecordLimits) -> bool:
    try:
        check_headers(headers, limits)
    except InvalidInputError:
        return False
    return True


def _all_utf8(texts: list[bytes]) -> bool:
    """Whether each is UTF-8, in one decode: joined by an ASCII byte, which can neither
    end a sequence cut short nor continue one, the whole is UTF-8 exactly when each is."""
    try:
        b"\n".join(texts).decode()
    except UnicodeDecodeError:
        return False
    return True


def check_record(record: TimerRecord, key_ms: int, limits: RecordLimits) -> None:
    """A stored record (and its key time) as a schedule would have written it, or
    InvalidInputError naming the field and the rule it breaks."""
    check_time(key_ms, "key time")
    if key_ms < record.requested_deliver_at_ms:
        raise InvalidInputError(
            f"the key time {key_ms} is before requested_deliver_at_ms "
            f"{record.requested_deliver_at_ms}: it would be delivered early",
            field="key time",
        )
    check_time(record.requested_deliver_at_ms, "requested_deliver_at_ms")
    check_time(record.created_at_ms, "created_at_ms")
    check_time(record.due_again_at_ms, "due_again_at_ms")
    if record.attempts < 0:
        raise InvalidInputError("attempts must be at least 0", field="attempts")
    check_payload_size(len(record.payload), limits)
    if not record.binary:
        try:
            record.payload.decode()
        except UnicodeDecodeError:
            raise InvalidInputError(
                "payload must be valid UTF-8 text (or the record marked binary)", field="payload"
            ) from None
    check_headers(record.headers, limits)
