"""The RocksDB timer store (the default)."""

from storage.rocks.db import RocksSettings
from storage.rocks.store import RocksTimerStore

__all__ = ["RocksSettings", "RocksTimerStore"]
