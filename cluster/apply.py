"""Replay: a changelog record applied to a partition's RocksTimerStore through its public
methods, so that records applied in order rebuild what the owner had (``cluster.records``).

``guard``: the record may have been applied (in part) already, which only the first
record after a restored local directory's marker can be (the marker is written after each
record). Then an outcome (delivered, retry, dead letter) applies only to the timers still
pending at the key it names, and a replay or purge that finds nothing to do is skipped, so
a second application changes nothing: schedules and cancels are idempotent as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

from cluster.records import (
    CancelOp,
    DeadLetterOp,
    DeliveredOp,
    DueRef,
    FenceOp,
    Op,
    PurgeOp,
    Record,
    ReplayOp,
    RetryOp,
    ScheduleOp,
)
from storage import records as stored
from storage.errors import ConflictError, NotFoundError, StoreCorruptError
from storage.protocol import DueTimer, NewTimer, TimerState
from storage.rocks.store import RocksTimerStore

_LIVE = (TimerState.PENDING, TimerState.IN_FLIGHT)


def apply_record(store: RocksTimerStore, record: Record, *, guard: bool = False) -> None:
    for op in record.ops:
        apply_op(store, op, guard=guard)


def apply_op(store: RocksTimerStore, op: Op, *, guard: bool = False) -> None:
    if isinstance(op, ScheduleOp):
        timers = [
            NewTimer(t.topic, t.id, t.key_ms, t.payload, t.headers, t.binary) for t in op.timers
        ]
        store.schedule(timers, op.now_ms)
    elif isinstance(op, CancelOp):
        store.cancel(op.idents)
    elif isinstance(op, DeliveredOp):
        _apply_delivered(store, op, guard)
    elif isinstance(op, RetryOp):
        store.retry_later(_due(store, op.timers, guard), op.key_ms, "", attempt=op.attempt)
    elif isinstance(op, DeadLetterOp):
        store.dead_letter(_due(store, op.timers, guard), op.now_ms, op.error)
    elif isinstance(op, ReplayOp):
        try:
            store.replay_dead_letter(op.topic, op.id, op.key_ms)
        except (NotFoundError, ConflictError):
            if not guard:
                raise
    elif isinstance(op, PurgeOp):
        store.purge_dead_letters(op.topic)
    else:
        assert isinstance(op, FenceOp)  # changes no timer: it only moves the writer


def _apply_delivered(store: RocksTimerStore, op: DeliveredOp, guard: bool) -> None:
    timers = _due(store, op.timers, guard)
    offsets = store.commit_delivered(timers, op.delivered_ms, sink=op.sink)
    if not guard and offsets != op.offsets:
        raise StoreCorruptError(
            f"replay assigned topic-log offsets {offsets[:3]}... where the owner "
            f"assigned {op.offsets[:3]}...: the local store is not the changelog's state"
        )


def _due(store: RocksTimerStore, refs: Sequence[DueRef], guard: bool) -> list[DueTimer]:
    if guard:
        refs = [r for r in refs if _pending_at(store, r)]
    return [
        DueTimer(r.key, r.topic, r.id, r.key_ms, stored.decode_record(r.raw), r.raw) for r in refs
    ]


def _pending_at(store: RocksTimerStore, ref: DueRef) -> bool:
    view = store.get(ref.topic, ref.id)
    return view is not None and view.state in _LIVE and view.deliver_at_ms == ref.key_ms
