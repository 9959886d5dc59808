"""A pipeline stage running ``run_once`` in its own thread until stopped."""

from __future__ import annotations

import logging
import threading

from app.clock import Clock
from storage.errors import HandedOverError

log = logging.getLogger(__name__)


class StageThread:
    """Base of scanner and dispatcher: ``start``, ``stop`` and a guarded loop.

    Subclasses implement ``step() -> bool`` (True when it did work, so the loop goes
    on at once) and ``idle()`` (how to wait when there was nothing to do).

    A step that raises starts (or continues) a failure: ``failing_since_ms`` is when the
    first of an unbroken run of failed steps began, ``last_error`` what the last one
    raised. A step that returns ends it, unless it found nothing to do and
    ``idle_step_ends_failure`` is False (the dispatcher: a turn with an empty queue says
    nothing of whether its commits work again). Readiness reads them (``app.service``).
    A step that raises ``HandedOverError`` (a cluster partition moved away in the middle
    of it) neither starts nor ends a failure: that work is the new owner's now, and a
    dispatcher with nothing more to deliver must not stay unready for it.
    """

    name = "stage"
    idle_step_ends_failure = True

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failing_since_ms: int | None = None
        self.last_error: str | None = None

    def note_failure(self, exc: BaseException) -> None:
        if self.failing_since_ms is None:
            self.failing_since_ms = self.clock.now_ms()
        self.last_error = f"{type(exc).__name__}: {exc}"

    def note_success(self) -> None:
        self.failing_since_ms = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                worked = self.step()
            except HandedOverError as exc:  # the work passed to another node: not a failure
                log.warning("%s step: %s", self.name, exc, extra={"event": "handed_over"})
                worked = False
            except Exception as exc:  # the top of a thread loop: log, back off one tick, go on
                log.exception(
                    "%s step failed", self.name, extra={"event": "error", "stage": self.name}
                )
                self.note_failure(exc)
                worked = False
            else:
                if worked or self.idle_step_ends_failure:
                    self.note_success()
            if not worked:
                self.idle(self._stop)

    def step(self) -> bool:
        raise NotImplementedError

    def idle(self, stop: threading.Event) -> None:
        raise NotImplementedError
