"""APScheduler 3.x one-shot date jobs: what a Python team would use instead.

One job per timer in a MemoryJobStore or a SQLAlchemyJobStore on SQLite. The scheduler
starts paused; ``start()`` resumes it. ``misfire_grace_time`` is either the library's
default (1 s) or None; jobs that miss their grace are counted as never run.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_MISSED, JobEvent
from apscheduler.jobstores.base import JobLookupError
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.schedulers.background import BackgroundScheduler

from bench.measure import lateness_summary, now_ms
from bench.systems.base import BenchSystem, BenchTimer, Delivery

_RECORDERS: dict[str, Delivery] = {}  # system name -> its deliveries (jobs are pickled refs)
_LOCK = threading.Lock()
EXECUTOR_LOGGER = "apscheduler.executors.default"  # where APScheduler reports a missed run


class MissedRunFilter(logging.Filter):
    """Drops APScheduler's 'Run time of job ... was missed by ...' warnings, one per missed
    job (362 lines between the progress bars of a quick run): the benchmark counts them
    instead, as the figure ``missed``."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "was missed by" not in record.getMessage()


MISSED_RUN_FILTER = MissedRunFilter()


def fire(system: str, timer_id: str, deliver_ms: int, scheduled_ms: int) -> None:
    """The job function: record one delivery (a module-level reference for the SQL store)."""
    late = now_ms() - max(deliver_ms, scheduled_ms)
    with _LOCK:
        _RECORDERS[system].add(timer_id, late)


class ApsSystem(BenchSystem):
    def __init__(
        self,
        name: str,
        workdir: str,
        *,
        sqlite: bool,
        grace_default: bool,
        record_ids: bool = False,
    ) -> None:
        super().__init__(name, workdir)
        self.durable = sqlite
        self.grace_default = grace_default
        self._delivery = Delivery(record_ids=record_ids)
        _RECORDERS[name] = self._delivery
        self.missed = 0
        self.errors = 0
        self._live = 0
        if sqlite:
            from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore

            url = "sqlite:///" + os.path.join(os.path.abspath(workdir), "jobs.sqlite")
            store: Any = SQLAlchemyJobStore(url=url)
        else:
            store = MemoryJobStore()
        defaults: dict[str, Any] = {"coalesce": False}
        if not grace_default:
            defaults["misfire_grace_time"] = None
        self.scheduler = BackgroundScheduler(
            jobstores={"default": store}, job_defaults=defaults, timezone=dt.UTC
        )
        self.scheduler.add_listener(
            self._on_event, EVENT_JOB_MISSED | EVENT_JOB_EXECUTED | EVENT_JOB_ERROR
        )
        logging.getLogger(EXECUTOR_LOGGER).addFilter(MISSED_RUN_FILTER)  # one filter for all
        self.scheduler.start(paused=True)

    def _on_event(self, event: JobEvent) -> None:
        if event.code == EVENT_JOB_MISSED:
            self.missed += 1
        elif event.code == EVENT_JOB_ERROR:
            self.errors += 1

    def _schedule(self, timers: Sequence[BenchTimer], now_ms_: int) -> None:
        add = self.scheduler.add_job
        for t in timers:
            run_date = dt.datetime.fromtimestamp(t.deliver_at_ms / 1000, dt.UTC)
            add(
                fire,
                "date",
                run_date=run_date,
                args=[self.name, t.id, t.deliver_at_ms, now_ms_],
                id=t.id,
            )
        self._live += len(timers)

    def cancel(self, ids: Sequence[str]) -> int:
        removed = 0
        for i in ids:
            try:
                self.scheduler.remove_job(i)
            except JobLookupError:
                continue
            removed += 1
        return removed

    def start(self) -> None:
        self.scheduler.resume()

    def delivered(self) -> int:
        return self._delivery.count

    def settled(self) -> int:
        """Jobs that ran or were dropped as missed: nothing more will happen to them."""
        return self._delivery.count + self.missed

    def lateness(self) -> dict[str, Any]:
        return lateness_summary(self._delivery.lateness_ms, self._delivery.early)

    def delivered_ids(self) -> set[str]:
        return self._delivery.ids

    def pending(self) -> int:
        return len(self.scheduler.get_jobs())

    def counters(self) -> dict[str, Any]:
        return {"missed": self.missed, "errors": self.errors, "ran": self._delivery.count}

    def close(self) -> None:
        self.scheduler.pause()
        self.scheduler.remove_all_jobs()  # a paused scheduler still fires due jobs on shutdown
        self.scheduler.shutdown(wait=True)
        _RECORDERS.pop(self.name, None)
