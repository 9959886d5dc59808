"""A call run on a partition this node owns: writes through the fenced, group-committed
appender (``cluster.partition``, ``cluster.effects``), reads on the local store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cluster import effects
from cluster.partition import OwnedPartition


def _schedule(part: OwnedPartition, args: tuple[Any, ...]) -> Any:
    return part.write(lambda s: effects.schedule(s, *args))


def _cancel(part: OwnedPartition, args: tuple[Any, ...]) -> Any:
    return part.write(lambda s: effects.cancel(s, *args))


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
