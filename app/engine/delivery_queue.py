"""The bounded delivery queue between the scanner and the dispatcher.

Capacity is counted in timers, not batches, so memory is bounded by configuration
whatever the burst: when a million timers fall due in the same second, the scanner
fills the queue and then waits for the dispatcher (the flow control of RocketMQ
4.9.3's bounded pending queue, seed 004).
"""

from __future__ import annotations

import threading
from collections import deque

from storage.protocol import DueTimer

Batch = list[DueTimer]


class DeliveryQueue:
    """A passive stage: it does no work of its own, so it has no ``run_once``.

    ``stop`` closes it: every waiter wakes at once and no call waits any more (``get``
    still hands out what is queued, for the engine's drain); ``start`` opens it again.
    A new queue is open, so ``Engine.run_once`` works without starting anything.
    """

    def __init__(self, capacity_timers: int) -> None:
        if capacity_timers < 1:
            raise ValueError("capacity_timers must be at least 1")
        self.capacity = capacity_timers
        self._batches: deque[Batch] = deque()
        self._depth = 0
        self._cond = threading.Condition()
        self._closed = False

    def start(self) -> None:
        with self._cond:
            self._closed = False

    def stop(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def depth(self) -> int:
        return self._depth

    def free(self) -> int:
        return self.capacity - self._depth

    def put(self, batch: Batch) -> None:
        """Append a batch; the scanner sizes batches to ``free()`` so this never blocks."""
        if not batch:
            return
        with self._cond:
            self._batches.append(batch)
            self._depth += len(batch)
            self._cond.notify_all()

    def get(self, timeout_s: float = 0.0) -> Batch | None:
        """The oldest batch, waiting up to ``timeout_s`` for one; None when none came."""
        with self._cond:
            if not self._batches and timeout_s > 0:
                self._cond.wait_for(lambda: bool(self._batches) or self._closed, timeout_s)
            if not self._batches:
                return None
            batch = self._batches.popleft()
            self._depth -= len(batch)
            self._cond.notify_all()
            return batch

    def wait_for_space(self, timeout_s: float) -> bool:
        with self._cond:
            return self._cond.wait_for(
                lambda: self._depth < self.capacity or self._closed, timeout_s
            )

    def wait_until_empty(self, timeout_s: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._depth == 0 or self._closed, timeout_s)

    def drain(self) -> list[Batch]:
        """Take every queued batch at once (engine stop)."""
        with self._cond:
            batches = list(self._batches)
            self._batches.clear()
            self._depth = 0
            self._cond.notify_all()
            return batches
