"""The RIP-43 time-wheel store (RocketMQ 5's design), for the comparison with RocksDB."""

from storage.wheel.settings import WheelSettings
from storage.wheel.store import WheelTimerStore

__all__ = ["WheelSettings", "WheelTimerStore"]
