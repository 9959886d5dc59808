"""Opening the configured store: the only place that knows which stores exist."""

from __future__ import annotations

import os

from app.config import Settings
from storage.protocol import TimerStore
from storage.rocks import RocksTimerStore
from storage.wheel import WheelTimerStore


def open_store(settings: Settings) -> TimerStore:
    if settings.store == "rocks":
        return RocksTimerStore(settings.rocks(os.path.join(settings.data_dir, "rocks")))
    if settings.store == "wheel":
        return WheelTimerStore(settings.wheel(os.path.join(settings.data_dir, "wheel")))
    raise NotImplementedError(f"store {settings.store!r} is not built yet")
