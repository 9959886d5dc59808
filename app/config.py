"""The one validated settings object, built once at startup and passed down.

Sources, later wins: defaults, ``TIMERSTORE_<FIELD>`` environment variables, command-line
flags. Nothing here runs at import time; ``load_settings`` is called by the entry points.

Each default lives in exactly one place: the sections are the structs of the parts they
configure (``EngineSettings`` next to the engine, ``RequestLimits`` next to the request
rules, ``RocksSettings``/``WheelSettings`` next to the stores), nested here. A nested field
is set from the environment as ``TIMERSTORE_<SECTION>__<FIELD>`` (for example
``TIMERSTORE_ENGINE__TICK_MS=5``, ``TIMERSTORE_ROCKS__SYNC_WRITES=true``). Every duration
is integer milliseconds with ``_ms`` in its name.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from app.engine import EngineSettings
from app.routing import SinkSettings
from app.timer_requests import RequestLimits
from storage.errors import ConfigError
from storage.rocks import RocksSettings
from storage.wheel import WheelSettings

ENV_PREFIX = "TIMERSTORE_"
SECTION_SEPARATOR = "__"
STORE_DIRS = {"rocks": "rocks", "wheel": "wheel"}  # <data_dir>/<this>: each store's files
STAGING_DIR = "staging"  # <data_dir>/staging: bulk imports waiting to be ingested


class HousekeepingSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The service's periodic jobs (APScheduler)."""

    interval_ms: int = 30_000  # watermark advance, range delete, compaction, retention
    stats_snapshot_interval_ms: int = 10_000
    stats_count_cap: int = 1_000_000  # due-time buckets count at most this many keys


def _rocks_defaults() -> RocksSettings:
    return RocksSettings(path="")  # the path is derived from data_dir (see Settings.rocks_settings)


def _wheel_defaults() -> WheelSettings:
    return WheelSettings(path="")


class Settings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    host: str = "127.0.0.1"
    port: int = 8080
    data_dir: str = "./data"
    store: Literal["rocks", "wheel"] = "rocks"
    api_keys: tuple[str, ...] = ()
    admin_keys: tuple[str, ...] = ()
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"
    log_format: Literal["text", "json"] = "text"  # json: one JSON object per line
    metrics_public: bool = False  # True: /metrics needs no API key
    shutdown_grace_ms: int = 10_000  # in-flight requests, then queued batches, may finish
    engine: EngineSettings = msgspec.field(default_factory=EngineSettings)
    limits: RequestLimits = msgspec.field(default_factory=RequestLimits)
    housekeeping: HousekeepingSettings = msgspec.field(default_factory=HousekeepingSettings)
    sinks: SinkSettings = msgspec.field(default_factory=SinkSettings)
    rocks: RocksSettings = msgspec.field(default_factory=_rocks_defaults)
    wheel: WheelSettings = msgspec.field(default_factory=_wheel_defaults)

    def __post_init__(self) -> None:
        if not 1 <= self.port <= 65535:
            raise ConfigError("port must be 1 to 65535", field="port")
        if self.shutdown_grace_ms < 0:
            raise ConfigError("shutdown_grace_ms must be at least 0", field="shutdown_grace_ms")
        _require_positive("engine", self.engine)
        _require_positive("limits", self.limits)
        _require_positive("housekeeping", self.housekeeping)
        _require_positive("sinks", self.sinks)
        for name in (
            "block_cache_bytes",
            "write_buffer_bytes",
            "timers_write_buffer_bytes",
            "write_buffer_total_bytes",
        ):
            if getattr(self.rocks, name) < 1:
                raise ConfigError(f"rocks.{name} must be at least 1", field=f"rocks.{name}")

    def store_dir(self, store: str | None = None) -> str:
        """Where a store keeps its files: ``<data_dir>/rocks`` or ``<data_dir>/wheel``."""
        return os.path.join(self.data_dir, STORE_DIRS[store or self.store])

    def staging_dir(self) -> str:
        return os.path.join(self.data_dir, STAGING_DIR)

    def rocks_settings(self) -> RocksSettings:
        return dataclasses.replace(self.rocks, path=self.store_dir("rocks"))

    def wheel_settings(self) -> WheelSettings:
        return dataclasses.replace(self.wheel, path=self.store_dir("wheel"))


def _require_positive(section: str, values: msgspec.Struct) -> None:
    for name in values.__struct_fields__:
        value = getattr(values, name)
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            raise ConfigError(f"{section}.{name} must be at least 1", field=f"{section}.{name}")


def _sections() -> dict[str, set[str]]:
    """Nested section name -> its field names (for the environment's ``SECTION__FIELD``)."""
    sections: dict[str, set[str]] = {}
    for field in msgspec.structs.fields(Settings):
        default = field.default_factory() if callable(field.default_factory) else None
        if dataclasses.is_dataclass(default):
            sections[field.name] = {f.name for f in dataclasses.fields(default)} - {"path"}
        elif isinstance(default, msgspec.Struct):
            sections[field.name] = set(default.__struct_fields__)
    return sections


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    sections = _sections()
    top_level = {f.name for f in msgspec.structs.fields(Settings)} - sections.keys()
    values: dict[str, Any] = {}
    for key, raw in environ.items():
        if not key.startswith(ENV_PREFIX):
            continue
        name = key[len(ENV_PREFIX) :].lower()
        section, _, field = name.partition(SECTION_SEPARATOR)
        if field and field in sections.get(section, ()):
            values.setdefault(section, {})[field] = raw
        elif not field and name in top_level:
            values[name] = _split_keys(raw) if name.endswith("_keys") else raw
        else:
            raise ConfigError(f"unknown setting {key}", field=key)
    return values


def load_settings(
    environ: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """Merge defaults, environment and flags into one validated Settings, or ConfigError."""
    values = _from_env(os.environ if environ is None else environ)
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    try:
        return msgspec.convert(values, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"invalid setting: {exc}", field=_field_of(exc)) from None


def _split_keys(raw: str) -> list[str]:
    return [k.strip() for k in raw.split(",") if k.strip()]


def _field_of(exc: msgspec.ValidationError) -> str | None:
    text = str(exc)
    if "$." in text:
        return text.split("$.", 1)[1].split("`")[0].split("[")[0]
    return None
