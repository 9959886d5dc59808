"""Shared fixtures: a real RocksDB store in a temporary directory and a fake clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.clock import FakeClock
from storage.rocks import RocksSettings, RocksTimerStore


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_700_000_000_000)


@pytest.fixture
def rocks_store(tmp_path) -> Iterator[RocksTimerStore]:
    store = RocksTimerStore(RocksSettings(str(tmp_path / "rocks"), statistics=True))
    yield store
    store.close()
