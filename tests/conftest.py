"""Shared fixtures: a real RocksDB store in a temporary directory and a fake clock."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from app.clock import FakeClock
from storage.protocol import LOG_SINK
from storage.rocks import RocksSettings, RocksTimerStore


class FlakySink:
    """A topic-log sink whose first ``failures`` deliveries raise, like a broker that is down."""

    name = LOG_SINK  # delivers into the embedded topic log once it stops failing

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def deliver(self, batch: object) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError("broker down")


@pytest.fixture
def flaky_sink() -> type[FlakySink]:
    return FlakySink


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_700_000_000_000)


@pytest.fixture
def rocks_store(tmp_path) -> Iterator[RocksTimerStore]:
    store = RocksTimerStore(RocksSettings(str(tmp_path / "rocks"), statistics=True))
    yield store
    store.close()


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Put back the logging that ``configure_logging`` changes (handlers, levels)."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    names = ("uvicorn", "uvicorn.error", "uvicorn.access", "apscheduler", "httpx", "httpcore")
    loggers = {n: logging.getLogger(n) for n in names}
    kept = {n: (list(g.handlers), g.propagate, g.level) for n, g in loggers.items()}
    yield
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    for name, (handlers, propagate, level) in kept.items():
        loggers[name].handlers[:] = handlers
        loggers[name].propagate = propagate
        loggers[name].setLevel(level)
