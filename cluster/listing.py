"""Answers over every partition: batches split by partition and put back in order,
errors renamed to the caller's item indexes, stats summed, and pages walked partition by
partition with a cursor that names the partition.

A cross-partition cursor is ``encode_cursor(b"\\xff" + partition (2 bytes) + inner key)``;
an empty inner key means the partition's start. A listing without a topic returns the
partitions' timers in partition order (each partition's in its own key order), not one
time order over the cluster.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence

from storage.cursors import decode_cursor, encode_cursor
from storage.errors import ConflictError, InvalidInputError, TimerStoreError
from storage.protocol import StoreStats, TimerPage, TimerView, TopicInfo

CURSOR_TAG = b"\xff"
_ITEM = re.compile(r"timers\[(\d+)\]")


def by_partition(topics: Sequence[str], partition_of: Callable[[str], int]) -> dict[int, list[int]]:
    """Each partition's item indexes, in item order."""
    groups: dict[int, list[int]] = defaultdict(list)
    for index, topic in enumerate(topics):
        groups[partition_of(topic)].append(index)
    return dict(groups)


def renumbered(error: TimerStoreError, indexes: list[int]) -> TimerStoreError:
    """``error`` of a partition's sub-batch, its ``timers[i]`` named by the caller's index."""

    def rename(text: str) -> str:
        return _ITEM.sub(lambda m: f"timers[{indexes[int(m.group(1))]}]", text)

    field = rename(error.field) if error.field else error.field
    if isinstance(error, ConflictError):
        return type(error)(rename(error.message), state=error.state, field=field)
    if isinstance(error, InvalidInputError):
        return type(error)(rename(error.message), field=field, problems=error.problems)
    return error


def merged_topics(parts: list[list[TopicInfo]]) -> list[TopicInfo]:
    """The partitions' topic lists as one, in topic order (a topic lives in one partition)."""
    return sorted((info for infos in parts for info in infos), key=lambda info: info.topic)


def summed_counts(parts: list[list[int]], cap: int, width: int) -> list[int]:
    """The partitions' ``count_pending_due_before`` columns summed, each capped at ``cap``
    (``width`` zeros when no partition answered)."""
    if not parts:
        return [0] * width
    return [min(cap, sum(column)) for column in zip(*parts, strict=True)]


def summed_stats(parts: list[StoreStats]) -> StoreStats:
    pending_by_topic: dict[str, int] = {}
    by_sink: dict[str, int] = {}
    for s in parts:
        pending_by_topic.update(s.pending_by_topic)  # a topic lives in one partition
        for sink, n in s.delivered_by_sink.items():
            by_sink[sink] = by_sink.get(sink, 0) + n
    return StoreStats(
        pending=sum(s.pending for s in parts),
        in_flight=sum(s.in_flight for s in parts),
        delivered=sum(s.delivered for s in parts),
        cancelled=sum(s.cancelled for s in parts),
        dead_lettered=sum(s.dead_lettered for s in parts),
        pending_by_topic=pending_by_topic,
        watermark_ms=min((s.watermark_ms for s in parts), default=0),
        delivered_by_sink=by_sink,
    )


def split_cursor(cursor: str | None) -> tuple[int, str | None]:
    """(partition, the partition's own cursor) of a cross-partition cursor."""
    if cursor is None:
        return 0, None
    key = decode_cursor(cursor)
    if len(key) < 3 or key[:1] != CURSOR_TAG:
        raise InvalidInputError("cursor is not a cursor of this cluster's listing", field="cursor")
    inner = key[3:]
    return int.from_bytes(key[1:3], "big"), encode_cursor(inner) if inner else None


def join_cursor(partition: int, inner: str | None) -> str:
    key = decode_cursor(inner) if inner else b""
    return encode_cursor(CURSOR_TAG + partition.to_bytes(2, "big") + key)


def walk_pages(
    partitions: int,
    cursor: str | None,
    limit: int,
    page_of: Callable[[int, str | None, int], TimerPage],
) -> TimerPage:
    """Up to ``limit`` items from the cursor on, partition after partition."""
    partition, inner = split_cursor(cursor)
    found: list[TimerView] = []
    while partition < partitions:
        page = page_of(partition, inner, limit - len(found))
        found.extend(page.timers)
        if page.next_cursor is not None:
            return TimerPage(found, join_cursor(partition, page.next_cursor))
        partition, inner = partition + 1, None
        if len(found) >= limit and partition < partitions:
            return TimerPage(found, join_cursor(partition, None))
    return TimerPage(found, None)
