"""A request performed on an owned partition's RocksTimerStore, and the operation that
records what it did (``cluster.records``): apply first, so the store decides conflicts,
clamps and offsets exactly as on a single node; the caller appends the operation and
answers only once JetStream has acknowledged it. None: the request changed nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from cluster.records import (
    CancelOp,
    DeadLetterOp,
    DeliveredOp,
    DueRef,
    Op,
    PurgeOp,
    ReplayOp,
    RetryOp,
    ScheduledTimer,
    ScheduleOp,
)
from storage.protocol import CancelOutcome, CancelResult, DueTimer, NewTimer, ScheduleResult
from storage.rocks.store import RocksTimerStore

_encode = msgspec.msgpack.Encoder().encode


def refs(timers: Sequence[DueTimer]) -> list[DueRef]:
    return [DueRef(t.key, t.topic, t.id, t.key_ms, t.raw or _encode(t.record)) for t in timers]


def schedule(
    store: RocksTimerStore, timers: Sequence[NewTimer], now_ms: int
) -> tuple[list[ScheduleResult], Op | None]:
    results = store.schedule(timers, now_ms)
    stored = [
        ScheduledTimer(t.topic, t.id, r.deliver_at_ms, t.payload, t.headers, t.binary)
        for t, r in zip(timers, results, strict=True)
    ]
    return results, ScheduleOp(now_ms, stored) if stored else None


def cancel(
    store: RocksTimerStore, idents: Sequence[tuple[str, str]]
) -> tuple[list[CancelResult], Op | None]:
    results = store.cancel(idents)
    removed = [
        (t, i)
        for (t, i), r in zip(idents, results, strict=True)
        if r.outcome is CancelOutcome.REMOVED
    ]
    return results, CancelOp(removed) if removed else None


def commit_delivered(
    store: RocksTimerStore, timers: Sequence[DueTimer], delivered_ms: int, sink: str
) -> tuple[list[int], Op | None]:
    offsets = store.commit_delivered(timers, delivered_ms, sink=sink)
    return offsets, DeliveredOp(delivered_ms, sink, refs(timers), offsets) if timers else None


def retry_later(
    store: RocksTimerStore, timers: Sequence[DueTimer], retry_at_ms: int, error: str, attempt: bool
) -> tuple[None, Op | None]:
    store.retry_later(timers, retry_at_ms, error, attempt=attempt)
    if not timers:
        return None, None
    moved = store.get(timers[0].topic, timers[0].id)  # the store clamps every one alike
    key_ms = moved.deliver_at_ms if moved is not None else retry_at_ms
    return None, RetryOp(key_ms, attempt, refs(timers))


def dead_letter(
    store: RocksTimerStore, timers: Sequence[DueTimer], now_ms: int, error: str
) -> tuple[None, Op | None]:
    store.dead_letter(timers, now_ms, error)
    return None, DeadLetterOp(now_ms, error, refs(timers)) if timers else None


def replay_dead_letter(
    store: RocksTimerStore, topic: str, timer_id: str, now_ms: int
) -> tuple[ScheduleResult, Op | None]:
    result = store.replay_dead_letter(topic, timer_id, now_ms)
    return result, ReplayOp(topic, timer_id, result.deliver_at_ms)


def purge_dead_letters(store: RocksTimerStore, topic: str | None) -> tuple[int, Op | None]:
    purged = store.purge_dead_letters(topic)
    return purged, PurgeOp(topic) if purged else None
