"""A call run on a partition this node owns: writes through the fenced, group-committed
appender (``cluster.partition``, ``cluster.effects``), reads on the local store; and a
batch's write over several owned partitions at once (``write_parts``)."""

from __future__ import annotations

import concurrent.futures
import functools
from collections.abc import Callable, Sequence
from typing import Any

from cluster import effects
from cluster.partition import OwnedPartition, start_flushes
from cluster.records import Op
from storage.errors import TimerStoreError
from storage.rocks.store import RocksTimerStore

Begun = tuple[Any, concurrent.futures.Future[None] | None] | TimerStoreError
Perform = Callable[[RocksTimerStore], tuple[Any, Op | None]]  # see OwnedPartition.begin
# the writes a batch splits by partition (``write_parts``), and what performs each
WRITES: dict[str, Callable[..., Any]] = {"schedule": effects.schedule, "cancel": effects.cancel}


def _schedule(part: OwnedPartition, args: tuple[Any, ...]) -> Any:
    return part.write(lambda s: effects.schedule(s, *args))


def _cancel(part: OwnedPartition, args: tuple[Any, ...]) -> Any:
    return part.write(lambda s: effects.cancel(s, *args))


def write_parts(method: str, parts: Sequence[tuple[OwnedPartition, tuple[Any, ...]]]) -> list[Any]:
    """``method`` (one of WRITES) on each owned partition: each applied in this thread and
    its operation queued, their flushes started with one wake-up of the loop, then every
    acknowledgement awaited together (no thread per partition). Each partition's result or
    its TimerStoreError, in order; a partition lost meanwhile answers PartitionMovedError
    (not stored: the router may send it to the new owner)."""
    perform = WRITES[method]
    return write_each([(part, functools.partial(_perform, perform, args)) for part, args in parts])


def write_each(writes: Sequence[tuple[OwnedPartition, Perform]]) -> list[Any]:
    """Each ``(partition, perform)`` applied in this thread and its operation queued,
    their flushes started with one wake-up of the loop, then every acknowledgement
    awaited together: the appends of different partitions overlap instead of each
    waiting for the one before. Each result or its TimerStoreError, in order."""
    starts: list[OwnedPartition] = []
    begun: list[Begun] = []
    try:
        for part, perform in writes:
            try:
                begun.append(part.begin(perform, starts))
            except TimerStoreError as e:
                begun.append(e)
    finally:
        start_flushes(starts)
    return [_acknowledged(b) for b in begun]


def _perform(perform: Callable[..., Any], args: tuple[Any, ...], store: RocksTimerStore) -> Any:
    return perform(store, *args)


def _acknowledged(begun: Begun) -> Any:
    if isinstance(begun, TimerStoreError):
        return begun
    result, waiter = begun
    if waiter is not None:
        try:
            waiter.result()
        except TimerStoreError as e:
            return e
    return result


def _replay(part: OwnedPartition, args: tuple[Any, ...]) -> Any:
    return part.write(lambda s: effects.replay_dead_letter(s, *args))


def _purge(part: OwnedPartition, args: tuple[Any, ...]) -> Any:
    return part.write(lambda s: effects.purge_dead_letters(s, *args))


def _list_pending(part: OwnedPartition, args: tuple[Any, ...]) -> Any:
    from_ms, to_ms, topic, limit, cursor, max_bytes = args
    return part.store.list_pending(
        from_ms=from_ms, to_ms=to_ms, topic=topic, limit=limit, cursor=cursor, max_bytes=max_bytes
    )


def _dead_letters(part: OwnedPartition, args: tuple[Any, ...]) -> Any:
    topic, limit, after, max_bytes = args
    return part.store.dead_letters(topic=topic, limit=limit, after=after, max_bytes=max_bytes)


LOCAL: dict[str, Callable[[OwnedPartition, tuple[Any, ...]], Any]] = {
    "schedule": _schedule,
    "cancel": _cancel,
    "replay_dead_letter": _replay,
    "purge_dead_letters": _purge,
    "get": lambda part, args: part.store.get(*args),
    "list_pending": _list_pending,
    "read_log": lambda part, args: part.store.read_log(*args),
    "dead_letters": _dead_letters,
    "topics": lambda part, args: part.store.topics(),
    "stats": lambda part, args: part.store.stats(),
    "count_pending_due_before": lambda part, args: part.store.count_pending_due_before(*args),
}


def run_local(part: OwnedPartition, method: str, args: tuple[Any, ...]) -> Any:
    part.check()
    return LOCAL[method](part, args)
