"""Shared fixtures: a real RocksDB store in a temporary directory and a fake clock; and
the suite's order and grouping under pytest-xdist (docs/testing.md)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from hypothesis import settings

from app.clock import FakeClock
from storage.protocol import LOG_SINK
from storage.rocks import RocksSettings, RocksTimerStore

# The order in which the modules start under `make test` (pytest-xdist, ``--dist
# loadfile --no-loadscope-reorder``): the longest work first, so that the workers finish
# together instead of one of them starting the docker test when the others are done.
START_ORDER = ("docker", "spark", "browser", "slow")


def pytest_configure(config: pytest.Config) -> None:
    """Hypothesis without its per-example deadline (200 ms of wall clock): beside two other
    workers, or on a loaded machine, a correct example failed it (tests/app/test_ids.py,
    27 Nov). Speed is measured in bench/, not asserted in tests."""
    settings.register_profile("timerstore", deadline=None)
    settings.load_profile("timerstore")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules ordered by ``START_ORDER``, each kept in one piece."""
    rank: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        rank[module] = min(rank.get(module, len(START_ORDER)), _start_rank(item))
    first_seen = {module: i for i, module in enumerate(dict.fromkeys(rank))}
    items.sort(key=lambda item: _module_key(item.nodeid.split("::")[0], rank, first_seen))


def _start_rank(item: pytest.Item) -> int:
    names = {mark.name for mark in item.iter_markers()}
    if "spark" in getattr(item, "fixturenames", ()):
        names.add("spark")
    return min((i for i, name in enumerate(START_ORDER) if name in names), default=len(START_ORDER))


def _module_key(module: str, rank: dict[str, int], first_seen: dict[str, int]) -> tuple[int, int]:
    return rank[module], first_seen[module]


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
