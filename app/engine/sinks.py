"""Where due timers go. The embedded topic log is the default sink.

A sink's ``deliver`` raises on failure; the dispatcher then retries the batch with
back-off and finally dead-letters it. The sink named ``LOG_SINK`` ("log") does
its delivery inside the store's commit (one WriteBatch deletes the timer and appends
it to the topic log), which makes embedded delivery exactly-once across crashes.
External sinks are at-least-once: what was in flight at a crash is delivered again,
with the same (topic, id) for the consumer to drop duplicates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from storage.protocol import LOG_SINK, DueTimer


class Sink(Protocol):
    """A stage the dispatcher calls: ``start`` opens what it needs (a connection pool),
    ``stop`` closes it; it has no ``run_once`` because it does no work unless handed a batch.
    """

    name: str  # recorded with each delivery; LOG_SINK makes the store append to the topic log

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def deliver(self, batch: Sequence[DueTimer]) -> None: ...


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
