"""How much of this node's traffic went to another node's partition owner.

Every call and batch part for a partition owned elsewhere crosses NATS twice more and is
decoded twice more than one sent to its owner; an operator reads the count, by method,
as ``timerstore_cluster_forwarded_parts_total`` (a partition-aware client, such as
``client`` with ``route_batches``, keeps it near zero for batches).
"""

from __future__ import annotations

import threading
from collections import Counter


class ForwardCounts:
    """Calls and batch parts forwarded since the node started, by method."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_method: Counter[str] = Counter()

    def add(self, method: str, parts: int = 1) -> None:
        with self._lock:
            self._by_method[method] += parts

    def by_method(self) -> dict[str, int]:
        with self._lock:
            return dict(self._by_method)
