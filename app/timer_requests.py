"""Turning schedule requests into ``NewTimer``s: the rules no schema can express.

The API decodes bodies with msgspec (types, name charset, unknown fields); what is left
here depends on the settings or on several fields at once: exactly one of
``deliver_at_ms``/``delay_ms``, payload and header limits, UTF-8 text. A batch is
checked as a whole and every bad item is reported (index, field, rule; up to
``MAX_BATCH_PROBLEMS`` of them) before anything is stored. Ids the client left out are
made here: sortable and unique (see ``IdMaker``).
"""

from __future__ import annotations

import random
import secrets
import threading
from collections.abc import Sequence
from typing import Protocol

import msgspec

from storage.errors import InvalidInputError, Problem
from storage.names import all_valid, validate_name
from storage.protocol import NewTimer
from storage.rules import MAX_TIME_MS, RecordLimits, check_headers, check_payload_size


class TimerRequest(Protocol):
    """What a schedule request carries (``api.schemas.TimerCreate`` has this shape)."""

    topic: str
    id: str | None
    deliver_at_ms: int | None
    delay_ms: int | None
    payload: str | None
    payload_b64: bytes | None
    headers: dict[str, str] | None


DEFAULT_PAGE_LIMIT = 100  # a GET listing's `limit` when none is given


class RequestLimits(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What one request may carry; the settings section ``limits``."""

    max_payload_bytes: int = 1 << 20
    max_headers: int = 64
    max_headers_bytes: int = 16 << 10
    max_batch_timers: int = 10_000
    max_body_bytes: int = 32 << 20
    max_wait_ms: int = 30_000  # longest long-poll
    max_page_limit: int = 1000  # GET listings: largest `limit` (at least DEFAULT_PAGE_LIMIT)
    # GET listings (timers, dead letters, topic-log messages): a page ends once its payloads
    # and headers reach this many bytes, so a page of 1 MiB payloads is not a gigabyte
    max_page_bytes: int = 16 << 20
    # Deprecated and ignored: a batch is one atomic store write (all or nothing, a 409
    # included). Still accepted so a configuration that sets it starts; a warning says so.
    store_chunk_timers: int | None = None

    def record_limits(self) -> RecordLimits:
        """What one timer may carry, as the store's and the pipeline's checks take it."""
        return RecordLimits(self.max_payload_bytes, self.max_headers, self.max_headers_bytes)


# A 422 lists at most this many bad items of a batch (the first ones, by index): enough to
# fix a batch by, and it bounds the work and the answer for a batch of 10,000 bad items.
MAX_BATCH_PROBLEMS = 100


class InvalidBatchError(InvalidInputError):
    """Several problems at once; ``field``/``message`` describe the first."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        first = problems[0]
        if len(problems) >= MAX_BATCH_PROBLEMS:
            more = f" (the first {len(problems)} bad items are listed; there may be more)"
        else:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(first.message + more, field=first.field, problems=tuple(problems))


def check_batch_size(count: int, limits: RequestLimits) -> None:
    """A batch holds 1 to ``max_batch_timers`` items. The API checks this as soon as it
    knows the count, before it decodes any item on its own."""
    if not 1 <= count <= limits.max_batch_timers:
        raise InvalidInputError(
            f"timers must hold 1 to {limits.max_batch_timers} items, got {count}",
            field="timers",
        )


class IdMaker:
    """ULID-like ids: 12 hex digits of epoch ms, then 20 hex digits of a random counter.

    Fixed width, lowercase hex: byte order is creation order. Within one millisecond the
    counter goes up by one from a random start, so ids made by this process never repeat
    and stay sorted; across processes the 80 random bits make a clash negligible.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._counter = 0
        # the counter's random starts: a generator seeded once from the OS, not a
        # ``secrets`` call (an os.urandom syscall) every millisecond: on the event loop of
        # single schedules that syscall let the worker threads take the GIL each time. The
        # ids need uniqueness, not secrecy: 80 bits from a seed of 128 random bits.
        self._random = random.Random(secrets.randbits(128))

    def make(self, now_ms: int, count: int = 1) -> list[str]:
        with self._lock:
            if now_ms > self._last_ms:
                self._last_ms = now_ms
                self._counter = self._random.getrandbits(79)  # headroom: cannot overflow
            first = (self._last_ms << 80) | self._counter  # counter < 2**80: no carry
            self._counter += count
        return hex_ids(first, count)


_RUN_BITS = 16  # hex_ids formats the top 28 hex digits once per run of 2**16 ids


def hex_ids(first: int, count: int) -> list[str]:
    """``"%032x" % n`` for ``n`` from ``first`` to ``first + count - 1``.

    The 128-bit number is formatted once per run of ids that share all but their last 4
    hex digits, and only those 4 per id: 0.18 against 0.48 us an id (a 1000-timer batch
    of server-made ids).
    """
    ids: list[str] = []
    n, end = first, first + count
    while n < end:
        high, low = n >> _RUN_BITS, n & ((1 << _RUN_BITS) - 1)
        stop = min(end, (high + 1) << _RUN_BITS)
        prefix = "%028x" % high  # noqa: UP031  # %-formatting: 10% faster than f-strings here
        ids += [prefix + "%04x" % j for j in range(low, low + stop - n)]  # noqa: UP031
        n = stop
    return ids


def _payload(req: TimerRequest, limits: RequestLimits) -> tuple[bytes, bool]:
    if req.payload is not None and req.payload_b64 is not None:
        raise InvalidInputError("give either payload or payload_b64, not both", field="payload")
    if req.payload_b64 is not None:
        data, binary, name = req.payload_b64, True, "payload_b64"
    else:
        try:
            data = (req.payload or "").encode()
        except UnicodeEncodeError:
            raise InvalidInputError("payload must be valid UTF-8 text", field="payload") from None
        binary, name = False, "payload"
    check_payload_size(len(data), limits.record_limits(), name)
    return data, binary


def _deliver_at_ms(req: TimerRequest, now_ms: int) -> int:
    if (req.deliver_at_ms is None) == (req.delay_ms is None):
        raise InvalidInputError(
            "give exactly one of deliver_at_ms and delay_ms", field="deliver_at_ms"
        )
    if req.delay_ms is not None:
        if req.delay_ms < 0:
            raise InvalidInputError("delay_ms must be at least 0", field="delay_ms")
        deliver_at_ms = now_ms + req.delay_ms
        if deliver_at_ms > MAX_TIME_MS:
            raise InvalidInputError(f"delay_ms reaches past {MAX_TIME_MS}", field="delay_ms")
        return deliver_at_ms
    assert req.deliver_at_ms is not None
    if not 0 <= req.deliver_at_ms <= MAX_TIME_MS:
        raise InvalidInputError(
            f"deliver_at_ms must be between 0 and {MAX_TIME_MS}", field="deliver_at_ms"
        )
    return req.deliver_at_ms


def to_new_timer(
    req: TimerRequest,
    now_ms: int,
    timer_id: str,
    limits: RequestLimits,
    *,
    names_checked: bool = False,
) -> NewTimer:
    """One request as a NewTimer, or InvalidInputError naming the field and the rule.

    The common shapes (a delay or a time in range, a text payload within the limit) are
    checked inline: this runs once per timer of a 10,000-timer batch. Anything else goes
    through the checks that name the field and the rule. ``names_checked``: the caller
    has found the topic and id valid already (a batch checks all of them in one call).
    """
    if not names_checked:
        _check_names(req)
    delay_ms, deliver_at_ms = req.delay_ms, req.deliver_at_ms
    if deliver_at_ms is None and delay_ms is not None and 0 <= delay_ms <= MAX_TIME_MS - now_ms:
        deliver_at_ms = now_ms + delay_ms
    elif delay_ms is not None or deliver_at_ms is None or not 0 <= deliver_at_ms <= MAX_TIME_MS:
        deliver_at_ms = _deliver_at_ms(req, now_ms)  # raises, naming the field
    text, data = req.payload, req.payload_b64
    if text is not None and data is None:
        try:
            payload, binary = text.encode(), False
        except UnicodeEncodeError:
            payload, binary = _payload(req, limits)  # raises, naming the field
    elif text is None and data is None:  # no payload: an empty text one
        payload, binary = b"", False
    else:
        payload, binary = _payload(req, limits)
    if len(payload) > limits.max_payload_bytes:
        payload, binary = _payload(req, limits)  # raises, naming the field
    headers = req.headers
    if headers:
        check_headers(headers, limits.record_limits())
    return NewTimer(req.topic, timer_id, deliver_at_ms, payload, headers or {}, binary)


def _check_names(req: TimerRequest) -> None:
    """The name rule (``storage.names``). The API's schema documents it as a pattern but
    does not have msgspec enforce it: msgspec runs a Python regex per field, which cost
    0.4 us of the 0.6 us a batch item took to decode (docs/perf.md)."""
    validate_name("topic", req.topic)
    if req.id is not None:
        validate_name("id", req.id)


def to_new_timers(
    reqs: Sequence[TimerRequest | None],
    now_ms: int,
    ids: IdMaker,
    limits: RequestLimits,
    problems: Sequence[Problem] = (),
) -> list[NewTimer]:
    """Every request as a NewTimer; InvalidBatchError lists every bad item otherwise (the
    first ``MAX_BATCH_PROBLEMS`` of them).

    ``None`` items failed to decode; ``problems`` already describes them (a caller that
    stopped decoding after ``MAX_BATCH_PROBLEMS`` problems leaves the rest None as well).
    """
    check_batch_size(len(reqs), limits)
    given = [r for r in reqs if r is not None]
    client_ids = [r.id for r in given if r.id is not None]
    names_checked = all_valid(list({r.topic for r in given})) and all_valid(client_ids)
    missing = len(given) - len(client_ids)
    fresh = iter(ids.make(now_ms, missing) if missing else ())
    timers: list[NewTimer] = []
    found = list(problems)
    for i, req in enumerate(reqs):
        if req is None:
            continue
        try:
            timer_id = req.id if req.id is not None else next(fresh)
            timers.append(to_new_timer(req, now_ms, timer_id, limits, names_checked=names_checked))
        except InvalidInputError as exc:
            field = f"timers[{i}].{exc.field}"
            found.append(Problem(field, f"{field}: {exc.message}", i))
    if found:
        found.sort(key=lambda p: -1 if p.index is None else p.index)
        raise InvalidBatchError(found[:MAX_BATCH_PROBLEMS])
    return timers


class TimerRefRequest(Protocol):
    """An identity to cancel (``api.schemas.TimerRef`` has this shape)."""

    topic: str
    id: str


def to_idents(
    refs: Sequence[TimerRefRequest | None], limits: RequestLimits, problems: Sequence[Problem] = ()
) -> list[tuple[str, str]]:
    """Every identity as ``(topic, id)``; InvalidBatchError lists every bad item otherwise
    (``None`` items failed to decode, and ``problems`` says why, as in ``to_new_timers``).
    The names are checked in one call for the batch; only when that fails, one by one."""
    check_batch_size(len(refs), limits)
    given = [r for r in refs if r is not None]
    topics, ids = [r.topic for r in given], [r.id for r in given]
    if not problems and all_valid(list(set(topics))) and all_valid(ids):
        return list(zip(topics, ids, strict=True))
    found = list(problems)
    for i, ref in enumerate(refs):
        if ref is None:
            continue
        for field, value in (("topic", ref.topic), ("id", ref.id)):
            try:
                validate_name(field, value)
            except InvalidInputError as exc:
                name = f"timers[{i}].{field}"
                found.append(Problem(name, f"{name}: {exc.message}", i))
    if not found:  # the joined check is stricter than none of the single ones
        return list(zip(topics, ids, strict=True))
    found.sort(key=lambda p: -1 if p.index is None else p.index)
    raise InvalidBatchError(found[:MAX_BATCH_PROBLEMS])
