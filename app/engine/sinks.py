"""Where due timers go. The embedded topic log is the default sink.

A sink's ``deliver`` raises on failure; the dispatcher then retries the batch with
back-off and finally dead-letters it. The sink named ``LOG_SINK`` ("log") does
its delivery inside the store's commit (one WriteBatch deletes the timer and appends
it to the topic log), which makes embedded delivery exactly-once across crashes.
External sinks are at-least-once: what was in flight at a crash is delivered again,
with the same (topic, id) for the consumer to drop duplicates.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from storage.protocol import LOG_SINK, DueTimer


class Sink(Protocol):
    """A stage the dispatcher calls: ``start`` opens what it needs (a connection pool),
    ``stop`` closes it; it has no ``run_once`` because it does no work unless handed a batch.
    """

    name: str  # recorded with each delivery; LOG_SINK makes the store append to the topic log

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def deliver(self, batch: Sequence[DueTimer]) -> None: ...


class Outcome(enum.Enum):
    DELIVERED = "delivered"  # commit as delivered by ``Settled.sink``
    FAILED = "failed"  # an attempt failed: back-off, or dead letters after max_attempts
    DEFERRED = "deferred"  # not attempted (route saturated): try again later, no attempt counted
    RELEASED = "released"  # not attempted (sink stopping): back to pending


@dataclass(frozen=True, slots=True)
class Settled:
    """What became of some timers a settling sink was handed."""

    timers: Sequence[DueTimer]
    outcome: Outcome
    sink: str = LOG_SINK
    error: str = ""
    max_attempts: int | None = None  # the route's; None means the engine's
    defer_ms: int = 0
    # how long each send that settled these timers took (a webhook POST, a Redis pipeline)
    sends_s: tuple[float, ...] = ()


@runtime_checkable
class SettlingSink(Protocol):
    """A sink that settles timers one by one and later, not a batch at once and now.

    ``submit`` hands over a batch without waiting for slow endpoints and answers what is
    settled already (the embedded-log part, a saturated route's deferral); ``collect``
    answers what has settled since the last call, and ``wait_settled`` waits for there to
    be some. Every timer submitted is answered exactly once, by one or the other, until
    ``stop`` returns.
    """

    name: str

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def submit(self, batch: Sequence[DueTimer]) -> list[Settled]: ...

    def collect(self) -> list[Settled]: ...

    def wait_settled(self, timeout_s: float) -> bool:
        """True as soon as something settled since the last ``collect`` (at once when it
        has), False after ``timeout_s`` without."""
        ...


class TopicLogSink:
    """The embedded per-topic log: delivery happens atomically in the store's commit."""

    name = LOG_SINK

    def start(self) -> None:
        return None  # the store is the log: nothing to open

    def stop(self) -> None:
        return None

    def deliver(self, batch: Sequence[DueTimer]) -> None:
        return None


class CallbackSink:
    """Hands each batch to a function (an external broker client, a webhook, a test)."""

    name = "callback"

    def __init__(self, callback: Callable[[Sequence[DueTimer]], None]) -> None:
        self._callback = callback

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def deliver(self, batch: Sequence[DueTimer]) -> None:
        self._callback(batch)
