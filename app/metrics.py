"""Lateness over a recent window: p50/p99/max of (delivered - due) in milliseconds."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable

import msgspec


class LatenessSummary(msgspec.Struct, frozen=True):
    window: int
    p50_ms: int | None
    p99_ms: int | None
    max_ms: int | None
    early: int  # deliveries before their due time: must stay 0


def percentile(sorted_values: list[int], fraction: float) -> int:
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, -(-len(sorted_values) * fraction // 1))
    return sorted_values[int(rank) - 1]


class LatenessWindow:
    def __init__(self, size: int = 100_000) -> None:
        self._values: deque[int] = deque(maxlen=size)
        self._lock = threading.Lock()
        self.early = 0

    def record(self, lateness_ms: Iterable[int]) -> None:
        values = list(lateness_ms)
        with self._lock:
            self._values.extend(values)
            self.early += sum(1 for v in values if v < 0)

    def summary(self) -> LatenessSummary:
        with self._lock:
            values = sorted(self._values)
        if not values:
            return LatenessSummary(0, None, None, None, self.early)
        return LatenessSummary(
            len(values), percentile(values, 0.5), percentile(values, 0.99), values[-1], self.early
        )
