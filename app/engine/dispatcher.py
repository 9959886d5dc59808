"""The dispatcher: takes batches off the delivery queue, delivers, commits.

On success one store commit removes the batch (and, for the embedded sink, appends it
to the topic log in the same WriteBatch). On failure each timer is moved to
``now + backoff(attempts)`` in the store, durably, with its attempt count raised; after
``max_attempts`` it goes to the dead-letter family instead.

A settling sink (the routing sink of external routes) answers per timer and later: the
dispatcher hands it a batch without waiting, so a slow endpoint never holds it up. What
settles (delivered, failed) is committed by the dispatcher's settler thread as soon as
the sink answers it, not on the dispatcher's next turn (which came up to 50 ms later when
no batch was queued: a webhook delivery was committed, its lateness measured, that late);
``run_once`` commits what has settled too (it is all there is when nothing is started).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import cast

from app.clock import Clock
from app.engine.delivery_queue import Batch, DeliveryQueue
from app.engine.sinks import Outcome, Settled, SettlingSink, Sink
from app.engine.stage import StageThread
from app.metrics import LatenessWindow
from app.telemetry import Telemetry
from storage.protocol import DueTimer, TimerStore

log = logging.getLogger(__name__)

SETTLER_WAIT_S = 0.05  # the settler waits this long at a time for answers, then checks stop


def backoff_ms(attempt: int, base_ms: int, max_ms: int) -> int:
    """Exponential back-off after the ``attempt``-th failure (1-based), capped."""
    return int(min(max_ms, base_ms * 2 ** max(0, attempt - 1)))


def lateness_of(batch: Sequence[DueTimer], delivered_ms: int) -> list[int]:
    """Each timer's lateness: ``delivered_ms`` less the time this attempt fell due. A
    first attempt (deferred or not) is late from the later of its requested and created
    times (a timer asked for in the past is late only from its creation); a retry from
    the end of its back-off, a replayed dead letter from its replay
    (``TimerRecord.due_again_at_ms``): a webhook down for an hour is not an hour of the
    service's lateness. Conditional expressions, not ``max`` or a call: 0.08 against
    0.18 us a timer (``timeit``), in the burst's busiest loop outside the store."""
    found = [t.record for t in batch]
    return [
        delivered_ms
        - (
            r.due_again_at_ms
            or (
                r.created_at_ms
                if r.created_at_ms > r.requested_deliver_at_ms
                else r.requested_deliver_at_ms
            )
        )
        for r in found
    ]


class Dispatcher(StageThread):
    name = "timerstore-dispatcher"
    idle_step_ends_failure = False  # an empty queue says nothing of the commits

    def __init__(
        self,
        store: TimerStore,
        queue: DeliveryQueue,
        sink: Sink | SettlingSink,
        clock: Clock,
        *,
        max_attempts: int = 5,
        backoff_base_ms: int = 1000,
        backoff_max_ms: int = 600_000,
        lateness: LatenessWindow | None = None,
        on_delivered: Callable[[set[str]], None] | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        super().__init__(clock)
        self.store = store
        self.queue = queue
        self.sink = sink
        self._settling = sink if isinstance(sink, SettlingSink) else None
        self.max_attempts = max_attempts
        self.backoff_base_ms = backoff_base_ms
        self.backoff_max_ms = backoff_max_ms
        self.lateness = lateness or LatenessWindow()
        self.on_delivered = on_delivered
        self.telemetry = telemetry
        self.delivered = 0
        self.failed_batches = 0
        # one thread at a time records what a settling sink answered (the dispatcher's,
        # the settler's), and none while the dispatcher hands the sink a batch
        self._settle_lock = threading.Lock()
        self._settler: threading.Thread | None = None

    def start(self) -> None:
        super().start()
        if self._settling is not None and self._settler is None:
            self._settler = threading.Thread(
                target=self._settle_loop,
                args=(self._settling,),
                name="timerstore-settler",
                daemon=True,
            )
            self._settler.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        super().stop(timeout_s)  # sets the stop event the settler checks too
        if self._settler is not None:
            self._settler.join(timeout_s)
            self._settler = None

    def _settle_loop(self, sink: SettlingSink) -> None:
        """Commit what the sink answers as soon as it answers it (woken by the sink)."""
        while not self._stop.is_set():
            try:
                if sink.wait_settled(SETTLER_WAIT_S):
                    self._settle_collected(None)
            except Exception as exc:  # the top of a thread loop: log, back off one wait, go on
                # logged as the dispatcher's (docs/operations.md names the stages)
                log.exception(
                    "%s settling failed", self.name, extra={"event": "error", "stage": self.name}
                )
                self.note_failure(exc)
                self._stop.wait(SETTLER_WAIT_S)

    def _settle_collected(self, now_ms: int | None) -> None:
        assert self._settling is not None
        with self._settle_lock:
            self.settle(self._settling.collect(), now_ms)

    def run_once(self, now_ms: int | None = None, timeout_s: float = 0.0) -> int:
        """Deliver one queued batch; return how many timers it held (0 when none)."""
        if self._settling is not None:
            self._settle_collected(now_ms)
        batch = self.queue.get(timeout_s)
        if batch is None:
            return 0
        self.deliver(batch, now_ms)
        return len(batch)

    def deliver(self, batch: Batch, now_ms: int | None = None) -> None:
        started = time.perf_counter()
        if self._settling is not None:
            with self._settle_lock:
                self.settle(self._settling.submit(batch), now_ms)
            return
        sink = cast(Sink, self.sink)
        try:
            sink.deliver(batch)
        except Exception as exc:  # any sink failure is a failed delivery attempt
            self.failed_batches += 1
            error = f"{type(exc).__name__}: {exc}"
            self._fail(batch, self._now(now_ms), error, self.max_attempts, sink.name)
            return
        self._commit(batch, self._now(now_ms), sink.name, started)

    def settle(self, items: Sequence[Settled], now_ms: int | None = None) -> None:
        """Record what a settling sink answered: commit, back off, defer or release.

        Each item on its own: the sink has handed all of them over, so a store error on
        one (a full disk) must not drop the others. The failed item's timers are released
        (pending again, delivered again later, never stranded in flight) and the first
        error is raised once every item is settled (the stage loop logs it); any later
        one is logged here.
        """
        failure: Exception | None = None
        for item in items:
            try:
                self._settle_one(item, now_ms)
            # broad: the sink boundary (recording what the sink answered) and rocksdict
            # raises a bare Exception for every RocksDB error; the first is raised after
            # the rest are settled, any later one is logged
            except Exception as exc:
                self.store.release(item.timers)  # a no-op for timers already settled
                if failure is None:
                    failure = exc
                else:
                    log.error("settling also failed", exc_info=exc, extra={"event": "error"})
        if failure is not None:
            raise failure

    def _settle_one(self, item: Settled, now_ms: int | None) -> None:
        if not item.timers:  # a lane that had answered every timer before it failed
            return
        started, timers, now = time.perf_counter(), item.timers, self._now(now_ms)
        if self.telemetry is not None:
            for send_s in item.sends_s:
                self.telemetry.sent(item.sink, item.outcome is Outcome.DELIVERED, send_s)
        if item.outcome is Outcome.DELIVERED:
            self._commit(timers, now, item.sink, started)
        elif item.outcome is Outcome.FAILED:
            attempts = item.max_attempts or self.max_attempts
            self._fail(timers, now, item.error, attempts, item.sink)
        elif item.outcome is Outcome.DEFERRED:
            with self._released_on_error(timers, "deferral"):
                self.store.retry_later(timers, now + item.defer_ms, item.error, attempt=False)
        else:
            self.store.release(timers)

    @contextmanager
    def _released_on_error(self, timers: Sequence[DueTimer], what: str) -> Iterator[None]:
        """A store write that raises names its timers, releases them and re-raises: the
        scanner skips timers in flight, so one left there would never be tried again."""
        try:
            yield
        except Exception as exc:  # re-raised: the caller (the stage loop) logs the trace
            _log_store_failed(what, timers, exc)
            self.store.release(timers)
            raise

    def _commit(
        self, batch: Sequence[DueTimer], delivered_ms: int, sink: str, started: float
    ) -> None:
        with self._released_on_error(batch, "commit of delivered timers"):
            self.store.commit_delivered(batch, delivered_ms, sink=sink)
        self.delivered += len(batch)
        lateness_ms = lateness_of(batch, delivered_ms)
        self.lateness.record(lateness_ms)
        if self.telemetry is not None:
            seconds = time.perf_counter() - started
            self.telemetry.committed(batch, sink, seconds, lateness_ms)
        if self.on_delivered is not None:
            self.on_delivered({t.topic for t in batch})

    def _now(self, now_ms: int | None) -> int:
        return self.clock.now_ms() if now_ms is None else now_ms

    def _fail(
        self, batch: Sequence[DueTimer], now_ms: int, error: str, max_attempts: int, sink: str
    ) -> None:
        """A failed attempt: each timer backs off, or goes to the dead letters after
        ``max_attempts``."""
        _log_delivery_failed(sink, batch, error)
        retry: dict[int, list[DueTimer]] = defaultdict(list)
        dead = []
        for timer in batch:
            attempt = timer.record.attempts + 1
            if attempt >= max_attempts:
                dead.append(timer)
            else:
                retry[attempt].append(timer)
        with self._released_on_error(batch, "back-off or dead-lettering of failed timers"):
            for attempt, timers in retry.items():
                delay = backoff_ms(attempt, self.backoff_base_ms, self.backoff_max_ms)
                self.store.retry_later(timers, now_ms + delay, error)
            if dead:
                self.store.dead_letter(dead, now_ms, error)
        if dead:
            _log_dead_letters(dead, error)
        if self.telemetry is not None:
            self.telemetry.delivery_failed(sink, len(batch), len(dead))

    def step(self) -> bool:
        return self.run_once(timeout_s=0.05) > 0

    def idle(self, stop: threading.Event) -> None:
        return None  # run_once already waited on the queue


def _log_delivery_failed(sink: str, batch: Sequence[DueTimer], error: str) -> None:
    """One line per failed attempt of a batch (a sink that raised, or a route's settled
    failures: they are merged per error on each dispatcher turn), naming the first timer."""
    log.warning(
        "sink %s failed for %d timers (first %s/%s): %s",
        sink,
        len(batch),
        batch[0].topic,
        batch[0].id,
        error,
        extra={
            "event": "delivery_failed",
            "sink": sink,
            "count": len(batch),
            "topic": batch[0].topic,
            "timer_id": batch[0].id,
            "topics": sorted({t.topic for t in batch}),
            "error": error,
        },
    )


def _log_store_failed(what: str, batch: Sequence[DueTimer], exc: Exception) -> None:
    """The store refused a write: name the timers (the stage loop logs the traceback)."""
    log.error(
        "%s failed for %d timers (first %s/%s): %s; released for another attempt",
        what,
        len(batch),
        batch[0].topic,
        batch[0].id,
        exc,
        extra={
            "event": "error",
            "count": len(batch),
            "topic": batch[0].topic,
            "timer_id": batch[0].id,
            "topics": sorted({t.topic for t in batch}),
        },
    )


LOGGED_DEAD_LETTERS = 20  # per batch; the rest are counted in one summary line


def _log_dead_letters(dead: Sequence[DueTimer], error: str) -> None:
    """One line per dead-lettered timer (its topic and id), at most LOGGED_DEAD_LETTERS."""
    for timer in dead[:LOGGED_DEAD_LETTERS]:
        log.warning(
            "dead-lettered %s/%s after %d attempts: %s",
            timer.topic,
            timer.id,
            timer.record.attempts + 1,
            error,
            extra={"event": "dead_letter", "topic": timer.topic, "timer_id": timer.id},
        )
    if len(dead) > LOGGED_DEAD_LETTERS:
        log.warning(
            "dead-lettered %d more timers of this batch",
            len(dead) - LOGGED_DEAD_LETTERS,
            extra={"event": "dead_letter", "count": len(dead) - LOGGED_DEAD_LETTERS},
        )
