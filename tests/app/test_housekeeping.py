"""The housekeeper's jobs on a real APScheduler and event loop, against a stub service.

The stub stands in for ``TimerService`` only where the test needs control: a store call
that runs in a worker thread until the test lets it finish.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import UTC, datetime, timedelta

import anyio.to_thread

from app.clock import FakeClock
from app.config import HousekeepingSettings
from app.housekeeping import Housekeeper
from app.native_memory import MemorySettings
from storage.protocol import HousekeepingReport

FAKE_NOW_MS = 1_700_000_000_000  # November 2023


class BlockingService:
    """Its housekeeping call blocks a worker thread until ``release`` is set."""

    def __init__(self) -> None:
        self.clock = FakeClock(FAKE_NOW_MS)  # years behind: the housekeeper must not use it
        self.entered = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()

    def _compact(self) -> None:
        self.entered.set()
        self.release.wait(30)
        self.finished.set()

    async def housekeep(self) -> None:
        await anyio.to_thread.run_sync(self._compact)

    async def stats(self) -> None:
        raise AssertionError("not scheduled within the test")


async def _stop_during_a_run(service: BlockingService) -> Housekeeper:
    housekeeper = Housekeeper(
        service,  # type: ignore[arg-type]
        HousekeepingSettings(interval_ms=20, stats_snapshot_interval_ms=3_600_000),
    )
    housekeeper.start()
    await anyio.to_thread.run_sync(service.entered.wait, 30)
    await housekeeper.stop()  # APScheduler cancels the job in progress
    service.release.set()
    for _ in range(200):  # bounded: the job task ends once the thread returns
        await asyncio.sleep(0.01)
        if not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
            break
    return housekeeper


def test_a_shutdown_during_a_run_ends_it_quietly_after_its_store_call(caplog):
    caplog.set_level(logging.INFO)
    service = BlockingService()
    asyncio.run(_stop_during_a_run(service))
    assert service.finished.is_set()  # the store call was not cut short
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]
    stopped = [r for r in caplog.records if getattr(r, "event", None) == "job_stopped"]
    assert [(r.levelno, getattr(r, "job", None)) for r in stopped] == [
        (logging.INFO, "housekeeping")
    ]


async def _first_housekeeping_run(settings: HousekeepingSettings) -> tuple[datetime, ...]:
    housekeeper = Housekeeper(BlockingService(), settings)  # type: ignore[arg-type]
    before = datetime.now(UTC)
    housekeeper.start()
    after = datetime.now(UTC)
    next_run = housekeeper.scheduler.get_job("housekeep").next_run_time
    await housekeeper.stop()
    return before, next_run, after


def test_the_first_run_is_anchored_on_the_wall_clock_not_the_service_clock():
    """APScheduler fires on wall time; a run anchored on a fake clock years behind made it
    walk millions of missed intervals before the app could start."""
    settings = HousekeepingSettings(interval_ms=30_000, stats_snapshot_interval_ms=3_600_000)
    before, next_run, after = asyncio.run(_first_housekeeping_run(settings))
    assert before + timedelta(seconds=5) <= next_run <= after + timedelta(seconds=5)


class FailingOnceService:
    """Its first housekeeping call fails as a full disk would; the later ones succeed."""

    def __init__(self) -> None:
        self.calls = 0

    async def housekeep(self) -> object:
        self.calls += 1
        if self.calls == 1:
            raise OSError(28, "No space left on device")
        return HousekeepingReport(1, True, 0, 0)

    async def stats(self) -> None:
        raise AssertionError("not scheduled within the test")


async def _runs_after_a_failure(service: FailingOnceService) -> Housekeeper:
    housekeeper = Housekeeper(
        service,  # type: ignore[arg-type]
        HousekeepingSettings(interval_ms=20, stats_snapshot_interval_ms=3_600_000),
    )
    housekeeper.start()
    for _ in range(500):  # bounded: the second run follows 20 ms after the first
        await asyncio.sleep(0.01)
        if housekeeper.runs >= 1:
            break
    await housekeeper.stop()
    return housekeeper


def test_a_failed_run_is_one_error_line_naming_the_job_and_the_next_run_goes_on(caplog):
    caplog.set_level(logging.INFO)
    service = FailingOnceService()
    housekeeper = asyncio.run(_runs_after_a_failure(service))
    assert housekeeper.runs >= 1  # the job kept its schedule after the failure
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [(r.name, getattr(r, "event", None), getattr(r, "job", None)) for r in errors] == [
        ("app.housekeeping", "error", "housekeeping")
    ]
    assert "No space left on device" in errors[0].getMessage()
    assert errors[0].exc_info is not None  # the JSON line carries exc_type and exc


async def _trims_within(memory: MemorySettings) -> Housekeeper:
    housekeeper = Housekeeper(
        BlockingService(),  # type: ignore[arg-type]
        HousekeepingSettings(interval_ms=3_600_000, stats_snapshot_interval_ms=3_600_000),
        memory,
    )
    housekeeper.start()
    for _ in range(500):  # bounded: a trim every 20 ms
        await asyncio.sleep(0.01)
        if housekeeper.trims >= 2:
            break
    await housekeeper.stop()
    return housekeeper


def test_the_malloc_trim_job_runs_at_its_interval_and_not_at_all_when_zero() -> None:
    trimming = asyncio.run(_trims_within(MemorySettings(malloc_trim_interval_ms=20)))
    assert trimming.trims >= 2
    never = Housekeeper(
        BlockingService(),  # type: ignore[arg-type]
        HousekeepingSettings(),
        MemorySettings(malloc_trim_interval_ms=0),
    )

    async def jobs() -> list[str]:
        never.start()
        ids = [job.id for job in never.scheduler.get_jobs()]
        await never.stop()
        return ids

    assert asyncio.run(jobs()) == ["housekeep", "stats-snapshot"]
