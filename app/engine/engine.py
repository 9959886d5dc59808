"""The delivery engine: scanner -> delivery queue -> dispatcher -> sink.

Memory is bounded by configuration: at most ``queue_capacity`` timers are queued, plus
one batch in the dispatcher's hands, plus what each external route's lane holds (at most
``sinks.max_in_flight``, or one batch; see docs/semantics.md); the number of pending
timers never matters.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgspec

from app.clock import Clock
from app.engine.delivery_queue import DeliveryQueue
from app.engine.dispatcher import Dispatcher
from app.engine.scanner import Scanner
from app.engine.sinks import SettlingSink, Sink, TopicLogSink
from app.metrics import LatenessWindow
from app.telemetry import Telemetry
from storage.protocol import TimerStore

log = logging.getLogger(__name__)


class EngineSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    tick_ms: int = 10
    scan_batch: int = 1000
    queue_capacity: int = 100_000
    max_attempts: int = 5
    backoff_base_ms: int = 1000
    backoff_max_ms: int = 600_000
    lateness_window: int = 100_000
    stop_drain_ms: int = 10_000  # on stop, queued batches may commit for this long
    # /readyz answers 503 once a stage (scanner, dispatcher) has failed every step for
    # longer than this, and 200 again after its first step that succeeds
    stage_failure_unready_ms: int = 5_000


class Engine:
    def __init__(
        self,
        store: TimerStore,
        clock: Clock,
        settings: EngineSettings | None = None,
        sink: Sink | SettlingSink | None = None,
        on_delivered: Callable[[set[str]], None] | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.settings = s = settings or EngineSettings()
        self.telemetry = telemetry
        self.store = store
        self.clock = clock
        self.queue = DeliveryQueue(s.queue_capacity)
        self.lateness = LatenessWindow(s.lateness_window)
        self.scanner = Scanner(
            store,
            self.queue,
            clock,
            tick_ms=s.tick_ms,
            batch_size=s.scan_batch,
            telemetry=telemetry,
        )
        self.sink: Sink | SettlingSink = sink or TopicLogSink()
        self.dispatcher = Dispatcher(
            store,
            self.queue,
            self.sink,
            clock,
            max_attempts=s.max_attempts,
            backoff_base_ms=s.backoff_base_ms,
            backoff_max_ms=s.backoff_max_ms,
            lateness=self.lateness,
            on_delivered=on_delivered,
            telemetry=telemetry,
        )

    @property
    def running(self) -> bool:
        return self.scanner.running and self.dispatcher.running

    def failing_stages(self, now_ms: int) -> list[tuple[str, int, str]]:
        """(stage, milliseconds it has failed every step for, its last error) of each
        stage in a run of failed steps."""
        found = []
        for stage in (self.scanner, self.dispatcher):
            since_ms = stage.failing_since_ms  # once: the stage's thread may clear it
            if since_ms is not None:
                found.append((stage.name, max(0, now_ms - since_ms), stage.last_error or ""))
        return found

    def start(self) -> None:
        """Start the stages from the sink up, so nothing is handed to a stage not yet open."""
        self.sink.start()
        self.queue.start()
        self.dispatcher.start()
        self.scanner.start()

    def run_once(self, now_ms: int) -> int:
        """Scan and drain until nothing is due at ``now_ms``; return how many were handled."""
        delivered = 0
        while True:
            scanned = self.scanner.run_once(now_ms)
            drained = 0
            while n := self.dispatcher.run_once(now_ms):
                drained += n
            delivered += drained
            if not scanned and not drained:
                return delivered

    def stop(self) -> None:
        """Stop scanning, let queued batches commit for a while, return the rest to pending."""
        self.scanner.stop()
        if self.dispatcher.running:
            self.queue.wait_until_empty(self.settings.stop_drain_ms / 1000)
        self.dispatcher.stop()
        self.queue.stop()
        self.sink.stop()
        try:
            if isinstance(self.sink, SettlingSink):  # what settled while stopping
                self.dispatcher.settle(self.sink.collect())
        finally:  # a store error settling must not strand the queued batches in flight
            leftovers = self.queue.drain()
            for batch in leftovers:
                self.store.release(batch)
            if leftovers:
                log.info("engine stopped with %d batches still pending", len(leftovers))
