"""Single schedules (one timer a request): validated on the event loop, stored in groups.

A single ``POST /v1/timers`` is the request most users meet first (issue 36, part 3), so
it is split in two steps the HTTP layer can drive without a task of its own:

- ``submit``: the clock, the id, the checks of ``app.timer_requests`` (a bad request
  raises here, before anything is stored), then the timer joins the next group commit
  (``app.write_batcher``) and a ``PendingSingle`` holds its future;
- ``result``: once that future is done, the stored result, or the request's own domain
  error (a conflict names the ``id``, as a single request has no ``timers[0]``).

``schedule`` is both in one coroutine. Durability is the group commit's: a future is done
only after the store call that holds its timer returned.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from app.clock import Clock
from app.telemetry import Telemetry
from app.timer_requests import IdMaker, RequestLimits, TimerRequest, to_new_timer
from app.write_batcher import WriteBatcher
from storage.errors import ConflictError
from storage.protocol import NewTimer, ScheduleResult


@dataclass(slots=True)
class PendingSingle:
    """A submitted single schedule: its timer and the future of its group's write."""

    timer: NewTimer
    future: asyncio.Future[ScheduleResult]
    started: float  # time.perf_counter() at submit, for the latency histogram


@dataclass
class SingleSchedules:
    """Turns single requests into grouped store writes (the service's ``schedule_one``)."""

    clock: Clock
    ids: IdMaker
    limits: RequestLimits
    telemetry: Telemetry
    batcher: WriteBatcher

    def submit(self, req: TimerRequest) -> PendingSingle:
        """Check ``req`` (its domain error raises here) and queue it for the next group."""
        now_ms = self.clock.now_ms()
        timer_id = req.id if req.id is not None else self.ids.make(now_ms)[0]
        started = time.perf_counter()
        timer = to_new_timer(req, now_ms, timer_id, self.limits)
        return PendingSingle(timer, self.batcher.submit(timer, now_ms), started)

    def result(self, pending: PendingSingle) -> ScheduleResult:
        """The done future's result, or its error as a single request's error."""
        try:
            result = pending.future.result()
        except ConflictError as exc:
            raise as_single(exc) from None
        return self._counted(pending, result)

    async def schedule(self, req: TimerRequest) -> tuple[ScheduleResult, NewTimer]:
        """``submit`` and ``result`` in one coroutine (the ASGI route)."""
        pending = self.submit(req)
        try:
            result = await pending.future
        except ConflictError as exc:
            raise as_single(exc) from None
        return self._counted(pending, result), pending.timer

    def _counted(self, pending: PendingSingle, result: ScheduleResult) -> ScheduleResult:
        seconds = time.perf_counter() - pending.started
        self.telemetry.scheduled(1, int(result.replaced), "one", seconds)
        return result


def as_single(exc: ConflictError) -> ConflictError:
    """The store names a conflicting item by its index in the call (``timers[0]``); a
    single-timer request has no ``timers``: name its ``id``."""
    message = exc.message.removeprefix("timers[0]: ")
    return ConflictError(message, state=exc.state, field="id")
