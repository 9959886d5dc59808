"""Opening the configured store: the only place that knows which stores exist."""

from __future__ import annotations

from app.config import Settings
from storage.protocol import TimerStore
from storage.rocks import RocksTimerStore
from storage.rocks.db import FORMAT_VERSION
from storage.wheel import WheelTimerStore


def open_store(settings: Settings) -> TimerStore:
    if settings.store == "rocks":
        return RocksTimerStore(settings.rocks_settings())
    if settings.store == "wheel":
        return WheelTimerStore(settings.wheel_settings())
    raise NotImplementedError(f"store {settings.store!r} is not built yet")


def store_format(store: TimerStore) -> str:
    """The on-disk format a store writes, for the "store opened" log line."""
    if isinstance(store, RocksTimerStore):
        return f"rocksdb-v{FORMAT_VERSION}"
    if isinstance(store, WheelTimerStore):
        return "rip43-wheel"  # RocketMQ's TimerWheel + TimerLog layout
    return store.name
