"""Opening the configured store: the only place that knows which stores exist."""

from __future__ import annotations

import logging

from app.config import Settings
from cluster.store import open_cluster_store
from storage.errors import ConfigError
from storage.protocol import TimerStore
from storage.rocks import RocksTimerStore
from storage.rocks.db import FORMAT_VERSION
from storage.wheel import WheelTimerStore

log = logging.getLogger("app.service")  # the service's start is where it is logged


def open_store(settings: Settings) -> TimerStore:
    if settings.cluster.enabled:
        return _open_cluster(settings)
    if settings.store == "rocks":
        return RocksTimerStore(settings.rocks_settings())
    if settings.store == "wheel":
        return WheelTimerStore(settings.wheel_settings())
    raise NotImplementedError(f"store {settings.store!r} is not built yet")


def _open_cluster(settings: Settings) -> TimerStore:
    """A node of the cluster: partitions of rocks stores under ``<data_dir>/rocks``."""
    if settings.store != "rocks":
        raise ConfigError(
            f"store={settings.store!r} cannot run with cluster.nats_urls: the cluster is "
            "built on the rocks store (set TIMERSTORE_STORE=rocks, or unset "
            "TIMERSTORE_CLUSTER__NATS_URLS for a single node)",
            field="store",
        )
    return open_cluster_store(settings.cluster, settings.rocks_settings())


def store_format(store: TimerStore) -> str:
    """The on-disk format a store writes, for the "store opened" log line."""
    if isinstance(store, RocksTimerStore):
        return f"rocksdb-v{FORMAT_VERSION}"
    if isinstance(store, WheelTimerStore):
        return "rip43-wheel"  # RocketMQ's TimerWheel + TimerLog layout
    return store.name


def log_store_opened(store: TimerStore, settings: Settings) -> None:
    """The "store opened" line (its counts) and a deprecated setting's warning."""
    stats = store.stats()
    log.info(
        "store opened: %s (%s) at %s, %d pending, %d dead letters, %d delivered",
        store.name,
        store_format(store),
        settings.data_dir,
        stats.pending,
        stats.dead_lettered,
        stats.delivered,
        extra={
            "event": "store_opened",
            "store": store.name,
            "format": store_format(store),
            "data_dir": settings.data_dir,
            "pending": stats.pending,
            "dead_letters": stats.dead_lettered,
            "delivered": stats.delivered,
            "topics": len(stats.pending_by_topic),
        },
    )
    if settings.limits.store_chunk_timers is not None:
        log.warning(
            "limits.store_chunk_timers is ignored: a batch is one atomic store write",
            extra={"event": "deprecated_setting", "setting": "limits.store_chunk_timers"},
        )
