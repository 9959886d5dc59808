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

import io
import json
import logging
import time

from app.engine import EngineSettings
from app.logs import FLOOD_LINES_PER_S, FloodLimit, configure_logging
from storage.protocol import NewTimer
from tests.app.webhook_engine import webhook_engine
from tests.sinks.receiver import Receiver, wait_for

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
