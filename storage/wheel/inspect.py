"""Read paths of the wheel store: get, list, counts, the topic log, dead letters.

Costs, for the benchmark's honesty: ``get`` is one dict lookup and one body read.
``list_pending`` and ``count_pending_due_before`` go through the whole pending index in
memory (O(pending) CPU per page), because the wheel has no time-ordered key space: a
rolled timer sits in a slot far before its delivery time, so even a walk over the slots
of a time range would miss it. The RocksDB store answers both with one bounded scan.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator, Sequence

from storage.cursors import PageBudget, decode_cursor, encode_cursor
from storage.errors import InvalidInputError
from storage.names import validate_name
from storage.protocol import LoggedMessage, TimerPage, TimerState, TimerView
from storage.rocks import keys as layout
from storage.wheel.core import WheelCore
from storage.wheel.layout import DeadRec, DeliveredRec, SchedRec

_Key = tuple[int, str, str]  # (key_ms, topic, id): sorts as the RocksDB timer key's bytes


def _after(cursor_key: bytes, key: _Key) -> bool:
    """Whether a pending timer's RocksDB timer key sorts after ``cursor_key``.

    Names are ASCII without 0x00, so (key_ms, topic, id) tuples sort as those keys do;
    only a timer in the cursor's millisecond needs its key built to compare the bytes.
    """
    cursor_ms = int.from_bytes(cursor_key[:8].ljust(8, b"\0"), "big")
    if key[0] != cursor_ms:
        return key[0] > cursor_ms
    return _timer_key(key) > cursor_key


def _timer_key(key: _Key) -> bytes:
    ms, topic, timer_id = key
    return layout.timer_key(ms, topic.encode(), timer_id.encode())


def pending_view(core: WheelCore, topic: str, timer_id: str) -> TimerView | None:
    entry = core.index.get((topic, timer_id))
    if entry is None:
        return None
    body = core.msglog.read(entry.body_pos, entry.body_size)
    assert isinstance(body, SchedRec)
    r = body.record
    state = TimerState.IN_FLIGHT if entry.seq in core.in_flight else TimerState.PENDING
    return TimerView(
        topic, timer_id, state, entry.key_ms, r.requested_deliver_at_ms, r.created_at_ms,
        r.attempts, r.payload, r.headers, r.binary,
    )  # fmt: skip


def dead_view(rec: DeadRec) -> TimerView:
    letter, r = rec.letter, rec.letter.record
    return TimerView(rec.topic, rec.id, TimerState.DEAD_LETTERED, letter.key_ms,
                     r.requested_deliver_at_ms, r.created_at_ms, r.attempts, r.payload, r.headers,
                     r.binary, last_error=letter.last_error)  # fmt: skip


def get(core: WheelCore, topic: str, timer_id: str) -> TimerView | None:
    view = pending_view(core, topic, timer_id)
    if view is not None:
        return view
    dead = core.dead.get((topic, timer_id))
    return None if dead is None else dead_view(dead)


def list_pending(
    core: WheelCore,
    from_ms: int,
    to_ms: int | None,
    topic: str | None,
    limit: int,
    cursor: str | None,
    max_bytes: int | None = None,
) -> TimerPage:
    if topic is not None:
        validate_name("topic", topic)
    if limit < 1:
        raise InvalidInputError("limit must be at least 1", field="limit")
    cursor_key = None if cursor is None else decode_cursor(cursor)
    high = (1 << 63) if to_ms is None else to_ms
    keys: Iterator[_Key] = (
        (entry.key_ms, t, i)
        for (t, i), entry in core.index.items()
        if from_ms <= entry.key_ms <= high and (topic is None or t == topic)
    )
    if cursor_key is not None:
        keys = (k for k in keys if _after(cursor_key, k))
    page = heapq.nsmallest(limit + 1, keys)
    views, budget = [], PageBudget(max_bytes)
    for key in page[:limit]:
        view = pending_view(core, key[1], key[2])
        assert view is not None  # the index holds it: it was just read from there
        views.append(view)
        if budget.spend(view.payload, view.headers):
            break
    last = page[len(views) - 1] if len(page) > len(views) else None
    next_cursor = None if last is None else encode_cursor(_timer_key(last))
    return TimerPage(views, next_cursor)


def count_due_before(core: WheelCore, deadlines_ms: Sequence[int], cap: int) -> list[int]:
    """Pending timers with a delivery time below each ascending deadline, capped."""
    below = [0] * (len(deadlines_ms) + 1)
    for entry in core.index.values():
        below[bisect.bisect_right(deadlines_ms, entry.key_ms)] += 1
    counts, running = [], 0
    for n in below[:-1]:
        running += n
        counts.append(min(running, cap))
    return counts


def read_log(
    core: WheelCore, topic: str, offset: int, limit: int, max_bytes: int | None = None
) -> list[LoggedMessage]:
    start = max(offset, core.log_start.get(topic, 0))
    out, budget = [], PageBudget(max_bytes)
    for n, (pos, size) in enumerate(core.cq.entries(topic, start, limit)):
        rec = core.msglog.read(pos, size)
        assert isinstance(rec, DeliveredRec) and rec.message is not None
        m = rec.message
        out.append(LoggedMessage(start + n, m.id, m.payload, m.headers, m.binary,
                                 m.requested_deliver_at_ms, m.delivered_ms))  # fmt: skip
        if budget.spend(m.payload, m.headers):
            break
    return out


def dead_letters(
    core: WheelCore, topic: str | None, limit: int, after: str | None, max_bytes: int | None = None
) -> TimerPage:
    """Dead letters in (topic, id) order; the cursor is the RocksDB store's (ident key)."""
    start = b"" if after is None else decode_cursor(after)
    keys = sorted(
        layout.ident_key(t.encode(), i.encode())
        for t, i in core.dead
        if topic is None or t == topic
    )
    keys = [k for k in keys if k > start]
    views, budget = [], PageBudget(max_bytes)
    for key in keys[:limit]:
        views.append(view := dead_view(core.dead[layout.split_ident(key)]))
        if budget.spend(view.payload, view.headers):
            break
    more = len(keys) > len(views)
    next_cursor = encode_cursor(keys[len(views) - 1]) if more and views else None
    return TimerPage(views, next_cursor)
