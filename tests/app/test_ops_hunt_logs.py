"""A route that fails for many timers does not flood the log.

A webhook route answers timer by timer, so the dispatcher wrote a ``delivery_failed``
line per settled group and a ``dead_letter`` line per timer: 2,000 timers due to a route
that was down wrote 2,603 lines in a few seconds (``timerstore serve``, a webhook on a
closed port). The handler ``configure_logging`` installs now lets through at most
``FLOOD_LINES_PER_S`` lines a second of each such event, and the first line after a
dropped stretch says how many were dropped. The engine, routing sink and webhook sender
are the real ones, on a real RocksDB, posting to a real receiver that answers 500.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import time
from types import SimpleNamespace
from typing import Any

from app.config import HousekeepingSettings
from app.engine import EngineSettings
from app.housekeeping import Housekeeper
from app.logs import FLOOD_LINES_PER_S, FloodLimit, configure_logging
from storage.protocol import NewTimer
from tests.app.webhook_engine import webhook_engine
from tests.sinks.receiver import Receiver
from tests.waiting import wait_for

TIMERS = 400


def test_a_failing_route_writes_a_bounded_number_of_lines(
    restore_logging: None, rocks_store, clock
) -> None:
    out = io.StringIO()
    configure_logging("json", "info", out)
    receiver = Receiver("k", rule=lambda body: 500)
    url = receiver.start()
    engine, _ = webhook_engine(
        rocks_store, clock, "hooked", url, EngineSettings(backoff_base_ms=50), max_attempts=1
    )
    started = time.monotonic()
    try:
        now = clock.now_ms()
        timers = [NewTimer("hooked", f"h{i:04d}", now) for i in range(TIMERS)]
        rocks_store.schedule(timers, now)

        def all_dead() -> bool:  # run_once also records what the lane settled
            engine.run_once(clock.advance(10))
            return rocks_store.stats().dead_lettered == TIMERS

        wait_for(all_dead, timeout_s=60, what="every webhook timer dead-lettered")
    finally:
        engine.stop()
        receiver.stop()
    seconds = int(time.monotonic() - started) + 2  # the windows the run can have touched
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    for event in ("dead_letter", "delivery_failed"):
        written = [x for x in lines if x["event"] == event]
        assert 1 <= len(written) <= FLOOD_LINES_PER_S * seconds, (event, len(written))
    assert len([x for x in lines if x["event"] == "dead_letter"]) < TIMERS


class _Seconds:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _record(event: str | None, message: str = "dead-lettered %s") -> logging.LogRecord:
    extra = {} if event is None else {"event": event}
    return logging.makeLogRecord({"msg": message, "args": ("t/x",), **extra})


def test_the_first_line_after_a_dropped_stretch_counts_them() -> None:
    seconds = _Seconds()
    limit = FloodLimit(per_s=3, clock=seconds)
    passed = [limit.filter(_record("dead_letter")) for _ in range(10)]
    assert passed == [True] * 3 + [False] * 7
    assert all(limit.filter(_record(None)) for _ in range(10))  # other lines: never limited
    assert limit.filter(_record("delivery_failed"))  # each event has its own allowance
    seconds.now += 1
    record = _record("dead_letter")
    assert limit.filter(record)
    assert record.suppressed == 7  # type: ignore[attr-defined]
    assert record.getMessage() == "dead-lettered t/x (7 earlier dead_letter lines suppressed)"
    later = _record("dead_letter")
    assert limit.filter(later) and not hasattr(later, "suppressed")


def test_a_flood_that_stops_reports_its_last_dropped_lines_once(caplog) -> None:
    seconds = _Seconds()
    limit = FloodLimit(per_s=3, clock=seconds)
    assert [limit.filter(_record("dead_letter")) for _ in range(10)].count(False) == 7
    caplog.set_level(logging.WARNING, logger="app.logs")
    limit.report_suppressed()
    limit.report_suppressed()  # reported once
    [line] = [r for r in caplog.records if r.name == "app.logs"]
    assert (line.event, line.suppressed_event, line.suppressed) == (  # type: ignore[attr-defined]
        "log_suppressed",
        "dead_letter",
        7,
    )
    assert line.getMessage().startswith("7 dead_letter lines suppressed")
    assert not limit.filter(_record("dead_letter"))  # the second's allowance still holds
    seconds.now += 1
    after = _record("dead_letter")
    assert limit.filter(after) and after.suppressed == 1  # type: ignore[attr-defined]


def test_the_stats_snapshot_writes_the_count_a_stopped_flood_left(restore_logging) -> None:
    """Through ``configure_logging``'s handler and the housekeeper's snapshot job: every
    line of the flood is either written or counted, once."""
    out = io.StringIO()
    configure_logging("json", "info", out)
    flooded = logging.getLogger("tests.flood")
    calls, dropped_last = 0, False
    while not dropped_last and calls < 10 * FLOOD_LINES_PER_S:  # until one is dropped
        written = len(out.getvalue())
        flooded.warning("dead-lettered", extra={"event": "dead_letter"})
        calls += 1
        dropped_last = len(out.getvalue()) == written
    assert dropped_last
    asyncio.run(Housekeeper(_StatsOnly(), HousekeepingSettings())._snapshot())  # type: ignore[arg-type]
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    passed = [x for x in lines if x["event"] == "dead_letter"]
    [report] = [x for x in lines if x["event"] == "log_suppressed"]
    told = sum(x.get("suppressed", 0) for x in passed) + report["suppressed"]
    assert told == calls - len(passed) > 0
    assert report["suppressed_event"] == "dead_letter"


class _StatsOnly:
    """The one call of ``TimerService`` the snapshot job makes."""

    async def snapshot(self) -> Any:
        return SimpleNamespace(
            pending=0, in_flight=0, queue_depth=0, queue_capacity=1, delivered=0,
            lateness=SimpleNamespace(p99_ms=None),
        )  # fmt: skip
