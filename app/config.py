"""The one validated settings object, built once at startup and passed down.

Sources, later wins: defaults, ``TIMERSTORE_<FIELD>`` environment variables, command-line
flags. Nothing here runs at import time; ``load_settings`` is called by the CLI.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from app.engine import EngineSettings
from storage.errors import InvalidInputError
from storage.rocks import RocksSettings
from storage.wheel import WheelSettings

ENV_PREFIX = "TIMERSTORE_"
PositiveInt = msgspec.Meta(ge=1)


class Settings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    host: str = "127.0.0.1"
    port: int = 8080
    data_dir: str = "./data"
    store: Literal["rocks", "wheel"] = "rocks"
    api_keys: tuple[str, ...] = ()
    admin_keys: tuple[str, ...] = ()
    log_level: str = "info"
    # durability
    sync_writes: bool = False
    block_cache_bytes: int = 64 << 20
    done_retention_ms: int = 24 * 3600 * 1000
    log_retention_ms: int = 7 * 24 * 3600 * 1000
    # engine
    tick_ms: int = 10
    scan_batch: int = 1000
    queue_capacity: int = 100_000
    max_attempts: int = 5
    backoff_base_ms: int = 1000
    backoff_max_ms: int = 600_000
    # wheel store (RIP-43); RocketMQ's defaults
    wheel_precision_ms: int = 1000
    wheel_slots: int = 7 * 24 * 3600
    wheel_roll_window_ms: int = 2 * 24 * 3600 * 1000
    wheel_msglog_segment_bytes: int = 64 << 20
    wheel_timerlog_segment_bytes: int = 52 << 20
    wheel_checkpoint_interval_ms: int = 1000  # flush TimerLog and wheel, write the checkpoint
    # request limits
    max_payload_bytes: int = 1 << 20
    max_headers: int = 64
    max_headers_bytes: int = 16 << 10
    max_body_bytes: int = 32 << 20
    max_batch_timers: int = 10_000
    max_wait_ms: int = 30_000
    max_page_limit: int = 1000  # GET listings: largest `limit`
    store_chunk_timers: int = 2000  # a batch is written in store calls of at most this many
    # housekeeping
    housekeeping_interval_s: float = 30.0
    stats_snapshot_interval_s: float = 10.0
    stats_count_cap: int = 1_000_000  # due-time buckets count at most this many keys
    shutdown_grace_s: float = 10.0

    def __post_init__(self) -> None:
        for name in (
            "port", "tick_ms", "scan_batch", "queue_capacity", "max_attempts",
            "max_payload_bytes", "max_body_bytes", "max_batch_timers",
            "wheel_precision_ms", "wheel_slots", "block_cache_bytes",
            "max_page_limit", "store_chunk_timers", "stats_count_cap",
        ):  # fmt: skip
            if getattr(self, name) < 1:
                raise InvalidInputError(f"{name} must be at least 1", field=name)
        if self.port > 65535:
            raise InvalidInputError("port must be at most 65535", field="port")

    def rocks(self, path: str | None = None) -> RocksSettings:
        return RocksSettings(
            path=path or os.path.join(self.data_dir, "rocks"),
            sync_writes=self.sync_writes,
            block_cache_bytes=self.block_cache_bytes,
            done_retention_ms=self.done_retention_ms,
            log_retention_ms=self.log_retention_ms,
        )

    def wheel(self, path: str | None = None) -> WheelSettings:
        """The wheel store's settings; ``sync_writes`` fsyncs its message log per call."""
        return WheelSettings(
            path=path or os.path.join(self.data_dir, "wheel"),
            precision_ms=self.wheel_precision_ms,
            slots=self.wheel_slots,
            roll_window_ms=self.wheel_roll_window_ms,
            msglog_segment_bytes=self.wheel_msglog_segment_bytes,
            timerlog_segment_bytes=self.wheel_timerlog_segment_bytes,
            flush_policy="sync" if self.sync_writes else "async",
            checkpoint_interval_ms=self.wheel_checkpoint_interval_ms,
            log_retention_ms=self.log_retention_ms,
        )

    def engine(self) -> EngineSettings:
        return EngineSettings(
            tick_ms=self.tick_ms,
            scan_batch=self.scan_batch,
            queue_capacity=self.queue_capacity,
            max_attempts=self.max_attempts,
            backoff_base_ms=self.backoff_base_ms,
            backoff_max_ms=self.backoff_max_ms,
            stop_drain_s=self.shutdown_grace_s,
        )


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    fields = {f.name: f for f in msgspec.structs.fields(Settings)}
    for key, raw in environ.items():
        if not key.startswith(ENV_PREFIX):
            continue
        name = key[len(ENV_PREFIX) :].lower()
        if name not in fields:
            raise InvalidInputError(f"unknown setting {key}", field=key)
        if name.endswith("_keys"):
            values[name] = [k.strip() for k in raw.split(",") if k.strip()]
        else:
            values[name] = raw
    return values


def load_settings(
    environ: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """Merge defaults, environment and flags into one validated Settings (or raise)."""
    values = _from_env(os.environ if environ is None else environ)
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    try:
        return msgspec.convert(values, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise InvalidInputError(f"invalid setting: {exc}", field=_field_of(exc)) from None


def _field_of(exc: msgspec.ValidationError) -> str | None:
    text = str(exc)
    if "$." in text:
        return text.split("$.", 1)[1].split("`")[0].split("[")[0]
    return None
