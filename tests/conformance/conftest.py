"""One fixture, both stores: every conformance test runs on RocksDB and on the wheel.

The wheel is shaped small for tests (10 ms slots, a 1000 s wheel, a 10 minute roll
window) so that rolls, wrap-around and recovery happen in milliseconds of fake time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.clock import FakeClock
from storage.protocol import TimerStore
from storage.rocks import RocksSettings, RocksTimerStore
from storage.wheel import WheelSettings, WheelTimerStore

NOW = 1_700_000_000_000
STORES = ("rocks", "wheel")
WHEEL_PRECISION_MS = 10


def wheel_settings(path: str) -> WheelSettings:
    return WheelSettings(
        path,
        precision_ms=WHEEL_PRECISION_MS,
        slots=100_000,
        roll_window_ms=600_000,
        msglog_segment_bytes=256 << 10,
        timerlog_segment_bytes=52 * 1000,
        checkpoint_interval_ms=500,
    )


def open_store(kind: str, path: str) -> TimerStore:
    if kind == "rocks":
        return RocksTimerStore(RocksSettings(path))
    return WheelTimerStore(wheel_settings(path))


def ready_ms(store: TimerStore, deliver_ms: int) -> int:
    """The earliest clock at which ``store`` promises to hand out a timer due at ``deliver_ms``.

    RocksDB: the delivery time itself. Wheel: the last millisecond of the timer's slot,
    because a slot is read once every time in it has come (documented precision).
    """
    if store.name == "wheel":
        p = WHEEL_PRECISION_MS
        return deliver_ms // p * p + p - 1
    return deliver_ms


@pytest.fixture(params=STORES)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def opener(kind: str, tmp_path: Path) -> Iterator[Callable[[], TimerStore]]:
    """Opens the store of this parametrization at one path; closes whatever is left open."""
    opened: list[TimerStore] = []

    def open_() -> TimerStore:
        store = open_store(kind, str(tmp_path / kind))
        opened.append(store)
        return store

    yield open_
    for store in opened:
        with contextlib.suppress(Exception):  # already closed by the test
            store.close()


@pytest.fixture
def store(opener: Callable[[], TimerStore]) -> TimerStore:
    return opener()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)
