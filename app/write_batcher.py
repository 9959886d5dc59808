"""Group commit of single schedules: concurrent ``schedule_one`` calls, one store write.

Each single ``POST /v1/timers`` used to make its own worker-thread hop and its own
``store.schedule([timer])``: under 64 concurrent clients that was 64 threads taking
turns at the GIL and at the store's lock for one tiny WriteBatch each (issue 36, part 3).
Here the timers that arrive while the event loop runs one turn (and, while a group is
being written, every timer that arrives meanwhile, up to ``max_items``) go to the store
in one ``store.schedule(timers, now_ms)`` call, in one worker-thread hop.

It sits above the ``TimerStore`` protocol, so every store gets grouped calls (the
RocksDB store, the wheel, a cluster store). Durability is the store's as configured: a
caller's future is resolved only after the store call that holds its timer returned.

Single requests stay independent. A store call is atomic (one write, all or nothing), so
when the grouped call raises a domain error (one timer is in flight or delivered: a
409), nothing of the group was stored, and the group is written again one timer at a
time in the same hop: each caller gets its own result or its own error, as if it had
been alone. Any other error (the store failed) is every caller's error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from storage.errors import TimerStoreError
from storage.grouping import Outcome
from storage.protocol import NewTimer, ScheduleResult, TimerStore

# runs a blocking function in a worker thread (``TimerService.call``)
RunInThread = Callable[..., Awaitable[list[Outcome]]]
Waiting = tuple[NewTimer, int, "asyncio.Future[ScheduleResult]"]  # timer, now_ms, its answer
DEFAULT_MAX_ITEMS = 1000  # a group's WriteBatch stays far below the GIL-holding sizes


def write_group(store: TimerStore, timers: Sequence[NewTimer], now_ms: int) -> list[Outcome]:
    """Store ``timers`` (of independent callers) in one call (a worker thread): each
    outcome is the timer's result, or the domain error it would have got alone."""
    return store.schedule_each(timers, now_ms)


class WriteBatcher:
    """Collects single schedules on the event loop and writes them in groups."""

    def __init__(
        self,
        store: Callable[[], TimerStore],
        run_in_thread: RunInThread,
        max_items: int = DEFAULT_MAX_ITEMS,
    ) -> None:
        self._store = store
        self._run_in_thread = run_in_thread
        self._max_items = max_items
        self._waiting: list[Waiting] = []
        self._writing = False  # a group is in its store call
        self._flush_soon = False  # a flush is scheduled for the end of this loop turn

    async def schedule(self, timer: NewTimer, now_ms: int) -> ScheduleResult:
        """The timer's result once the store call holding it returned, or its error."""
        return await self.submit(timer, now_ms)

    def submit(self, timer: NewTimer, now_ms: int) -> asyncio.Future[ScheduleResult]:
        """Queue the timer for the next group (on the event loop); the future of its result,
        done once the store call holding it returned (a callback can wait for it, no task)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ScheduleResult] = loop.create_future()
        self._waiting.append((timer, now_ms, future))
        if not self._writing and not self._flush_soon:
            self._flush_soon = True
            loop.call_soon(self._start_group)
        return future

    def _start_group(self) -> None:
        self._flush_soon = False
        if self._writing or not self._waiting:
            return
        group = self._waiting[: self._max_items]
        del self._waiting[: self._max_items]
        self._writing = True
        task = asyncio.get_running_loop().create_task(self._write(group))
        task.add_done_callback(self._group_done)

    def _group_done(self, task: asyncio.Task[None]) -> None:
        self._writing = False
        if self._waiting:  # what arrived while the group was written goes next
            self._start_group()

    async def _write(self, group: list[Waiting]) -> None:
        timers = [timer for timer, _, _ in group]
        now_ms = max(now for _, now, _ in group)
        try:
            outcomes = await self._run_in_thread(write_group, self._store(), timers, now_ms)
        except asyncio.CancelledError:  # the loop is ending: so are the callers
            for _, _, future in group:
                future.cancel()
            raise
        except Exception as exc:  # not swallowed: the store's failure is each caller's error
            for _, _, future in group:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, _, future), outcome in zip(group, outcomes, strict=True):
            if future.done():  # its caller went away; the timer is stored all the same
                continue
            if isinstance(outcome, TimerStoreError):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
