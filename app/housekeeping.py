"""Periodic jobs of the running service on APScheduler's AsyncIOScheduler.

- ``housekeep``: the store's watermark advance + range delete + compaction and the
  retention of ``done`` records and topic logs. It runs in a worker thread (through the
  service), so the event loop keeps serving while RocksDB compacts.
- ``malloc-trim``: glibc's free heap pages given back to the system every
  ``memory.malloc_trim_interval_ms`` (``app.native_memory``: RSS otherwise keeps the
  high-water mark of every malloc arena), in a worker thread.
- ``snapshot``: a stats snapshot, logged at debug level and kept for ``/v1/stats``; it
  also counts the failure log lines dropped that no line has counted yet
  (``app.logs.FloodLimit``), so a flood that stops says how many it dropped at its end.

Both are coroutine jobs with ``max_instances=1`` and ``coalesce``: a slow compaction
never piles up runs. The store is never closed under a running compaction: the service
waits for every store call in progress before it closes the store, and a job the
shutdown cut short ends with one info line, not an error.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from app import native_memory
from app.config import HousekeepingSettings
from app.logs import report_suppressed_lines
from app.native_memory import MemorySettings
from app.service import TimerService
from storage.errors import StoreClosedError

log = logging.getLogger(__name__)
FIRST_RUN_AFTER_MS = 5000  # the first housekeeping run comes soon after start


class Housekeeper:
    def __init__(
        self,
        service: TimerService,
        settings: HousekeepingSettings,
        memory: MemorySettings | None = None,
    ) -> None:
        self.service = service
        self.settings = settings
        self.memory = memory or MemorySettings()
        self.scheduler = AsyncIOScheduler(timezone=UTC)
        self.runs = 0
        self.snapshots = 0
        self.trims = 0

    def start(self) -> None:
        """Schedule the jobs; call from inside the running event loop.

        APScheduler fires on the wall clock, so the first run is anchored there and not
        on the service's injected clock: a fake clock years behind made APScheduler walk
        every missed interval since then on the event loop (3 million at 30 s, six
        seconds of startup) before it coalesced them into one run.
        """
        interval_ms = self.settings.interval_ms
        first_run_after = timedelta(milliseconds=min(FIRST_RUN_AFTER_MS, interval_ms))
        common = {"max_instances": 1, "coalesce": True, "misfire_grace_time": None}
        self.scheduler.add_job(
            self.housekeep,
            "interval",
            seconds=interval_ms / 1000,
            next_run_time=datetime.now(UTC) + first_run_after,
            id="housekeep",
            **common,
        )
        self.scheduler.add_job(
            self.snapshot,
            "interval",
            seconds=self.settings.stats_snapshot_interval_ms / 1000,
            id="stats-snapshot",
            **common,
        )
        if self.memory.malloc_trim_interval_ms:
            self.scheduler.add_job(
                self.trim,
                "interval",
                seconds=self.memory.malloc_trim_interval_ms / 1000,
                id="malloc-trim",
                **common,
            )
        self.scheduler.start()

    async def stop(self) -> None:
        """Stop scheduling. A job in progress keeps its store call until it returns (anyio
        defers cancellation of a worker thread), and ``TimerService.stop`` waits for it."""
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    async def housekeep(self) -> None:
        await self._run("housekeeping", self._housekeep)

    async def snapshot(self) -> None:
        await self._run("stats snapshot", self._snapshot)

    async def trim(self) -> None:
        await self._run("malloc trim", self._trim)

    async def _run(self, name: str, job: Callable[[], Awaitable[None]]) -> None:
        """Run a job; a shutdown ends it quietly (the next start runs it again), and an
        error is one ``error`` line naming the job (APScheduler's own line named the
        trigger, not the error), after which the job keeps its schedule.

        ``stop`` makes APScheduler cancel a job in progress: its store call still runs
        to the end in its worker thread (anyio defers the cancellation), and the job then
        ends with CancelledError, which APScheduler would log as a failure with a
        traceback. The job is this task's top: ending it here is what the cancel asked.
        """
        try:
            await job()
        except (StoreClosedError, asyncio.CancelledError):
            extra = {"event": "job_stopped", "job": name}
            log.info("%s stopped by the shutdown", name, extra=extra)
        except Exception as exc:  # the job's top: one error line; the next run comes as usual
            log.error(
                "%s failed: %s: %s (tried again at the next interval)",
                name,
                type(exc).__name__,
                exc,
                exc_info=True,
                extra={"event": "error", "job": name},
            )

    async def _housekeep(self) -> None:
        report = await self.service.housekeep()
        self.runs += 1
        log.info(
            "housekeeping: watermark %d%s, %d done records and %d log messages expired",
            report.watermark_ms,
            " (advanced)" if report.watermark_advanced else "",
            report.done_expired,
            report.log_messages_expired,
            extra={
                "event": "housekeeping",
                "watermark_ms": report.watermark_ms,
                "watermark_advanced": report.watermark_advanced,
                "done_expired": report.done_expired,
                "log_messages_expired": report.log_messages_expired,
            },
        )

    async def _trim(self) -> None:
        """In a worker thread: ``malloc_trim`` walks every arena under its lock, and the
        event loop must not wait for it (ctypes lets go of the GIL for the call)."""
        started = time.perf_counter()
        released = await asyncio.to_thread(native_memory.trim)
        self.trims += 1
        log.debug(
            "malloc trim: %s in %.1f ms",
            "memory released" if released else "nothing to release",
            (time.perf_counter() - started) * 1000,
        )

    async def _snapshot(self) -> None:
        report_suppressed_lines()  # failure lines dropped that no line has counted yet
        stats = await self.service.snapshot()
        self.snapshots += 1
        log.debug(
            "stats: pending %d, in flight %d, queue %d/%d, delivered %d, lateness p99 %s ms",
            stats.pending,
            stats.in_flight,
            stats.queue_depth,
            stats.queue_capacity,
            stats.delivered,
            stats.lateness.p99_ms,
        )
