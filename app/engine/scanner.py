"""The scanner: moves due timers from the store into the bounded delivery queue."""

from __future__ import annotations

import logging
import threading
import time

from app.clock import Clock
from app.engine.delivery_queue import DeliveryQueue
from app.engine.stage import StageThread
from app.telemetry import Telemetry
from storage.protocol import TimerStore

log = logging.getLogger(__name__)


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
        telemetry: Telemetry | None = None,
    ) -> None:
        super().__init__(clock)
        self.store = store
        self.queue = queue
        self.tick_ms = tick_ms
        self.batch_size = batch_size
        self.last_scan_ms = 0.0  # wall duration of the last run_once, for /v1/stats
        self.last_scan_count = 0
        self.telemetry = telemetry
        # everything due at or before this time has been handed to the queue (None: no scan
        # yet); ``now - cursor_ms`` is the scan cursor lag of /metrics
        self.cursor_ms: int | None = None
        self._last_now_ms: int | None = None  # the clock at the last scan

    def _note_clock(self, now_ms: int) -> None:
        """Warn once per step when the clock stepped back: the store moves its scan cursor
        back with it (new timers wait their own delay), but timers asked for before the
        step wait for the clock to reach their time again: operators should know why."""
        last = self._last_now_ms
        self._last_now_ms = now_ms
        if last is not None and now_ms < last:
            log.warning(
                "the clock stepped back by %d ms: timers asked for before the step wait "
                "for the clock to reach their time again",
                last - now_ms,
                extra={"event": "clock_stepped_back", "step_ms": last - now_ms},
            )

    def run_once(self, now_ms: int | None = None) -> int:
        """Fill the queue with timers due at ``now_ms`` as far as it has room; return the count."""
        now_ms = self.clock.now_ms() if now_ms is None else now_ms
        self._note_clock(now_ms)
        started = time.perf_counter()
        moved = 0
        while (free := self.queue.free()) > 0:
            scan_started = time.perf_counter()
            batch = self.store.due(now_ms, min(self.batch_size, free))
            if self.telemetry is not None:
                self.telemetry.scanned(time.perf_counter() - scan_started, len(batch))
            if not batch:
                self.cursor_ms = now_ms  # caught up: nothing more is due at now_ms
                break
            self.queue.put(batch)
            moved += len(batch)
            self.cursor_ms = max(self.cursor_ms or 0, batch[-1].key_ms)
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
