"""``OwnedReadings``: the stats snapshot's and the gauges' reads on a cluster node, over
the partitions it owns only (``storage.protocol.StoreReadings``).

Each node reports its own share and forwards nothing, so a scrape or the periodic snapshot
costs a node what its partitions hold, not the cluster's. A partition lost between the
listing and the read is left out of this reading (its new owner reports it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

from cluster.listing import merged_topics, summed_counts, summed_stats
from cluster.ownership import Ownership
from cluster.partition import OwnedPartition
from storage.errors import TimerStoreError
from storage.protocol import StoreStats, TopicInfo

log = logging.getLogger(__name__)
T = TypeVar("T")


class OwnedReadings:
    name = "cluster"

    def __init__(self, ownership: Ownership) -> None:
        self.ownership = ownership

    def _each(self, read: Callable[[OwnedPartition], T]) -> list[T]:
        found: list[T] = []
        for part in self.ownership.live_partitions():
            try:
                part.check()
                found.append(read(part))
            except TimerStoreError as e:  # closed or lost meanwhile: its new owner has it
                log.info("readings: partition %d skipped: %s", part.partition, e.message)
        return found

    def stats(self) -> StoreStats:
        return summed_stats(self._each(lambda part: part.store.stats()))

    def topics(self) -> list[TopicInfo]:
        return merged_topics(self._each(lambda part: part.store.topics()))

    def count_pending_due_before(self, deadlines_ms: Sequence[int], cap: int) -> list[int]:
        deadlines = list(deadlines_ms)
        counts = self._each(lambda part: part.store.count_pending_due_before(deadlines, cap))
        return summed_counts(counts, cap, len(deadlines))

    def oldest_pending_due_ms(self) -> int | None:
        pages = self._each(lambda part: part.store.list_pending(limit=1))
        heads = [page.timers[0].deliver_at_ms for page in pages if page.timers]
        return min(heads, default=None)
