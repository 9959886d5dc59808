"""The scanner: moves due timers from the store into the bounded delivery queue."""

from __future__ import annotations

import threading
import time

from app.clock import Clock
from app.engine.delivery_queue import DeliveryQueue
from app.engine.stage import StageThread
from storage.protocol import TimerStore


class Scanner(StageThread):
    name = "timerstore-scanner"

    def __init__(
        self,
        store: TimerStore,
        queue: DeliveryQueue,
        clock: Clock,
        *,
        tick_ms: int = 10,
        batch_size: int = 1000,
    ) -> None:
        super().__init__(clock)
        self.store = store
        self.queue = queue
        self.tick_ms = tick_ms
        self.batch_size = batch_size
        self.last_scan_ms = 0.0  # wall duration of the last run_once, for /v1/stats
        self.last_scan_count = 0

    def run_once(self, now_ms: int | None = None) -> int:
        """Fill the queue with timers due at ``now_ms`` as far as it has room; return the count."""
        now_ms = self.clock.now_ms() if now_ms is None else now_ms
        started = time.perf_counter()
        moved = 0
        while (free := self.queue.free()) > 0:
            batch = self.store.due(now_ms, min(self.batch_size, free))
            if not batch:
                break
            self.queue.put(batch)
            moved += len(batch)
        self.last_scan_ms = (time.perf_counter() - started) * 1000
        self.last_scan_count = moved
        return moved

    def step(self) -> bool:
        self.run_once()
        return False  # always wait: for space when full, else for the next tick

    def idle(self, stop: threading.Event) -> None:
        tick_s = self.tick_ms / 1000
        if self.queue.free() <= 0:
            self.queue.wait_for_space(tick_s)  # flow control: the dispatcher is behind
        else:
            stop.wait(tick_s)
