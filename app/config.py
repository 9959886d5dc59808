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
import difflib
import os
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from app.engine import EngineSettings
from app.native_memory import MemorySettings
from app.routing import SinkSettings
from app.timer_requests import DEFAULT_PAGE_LIMIT, RequestLimits
from cluster.settings import ClusterSettings
from storage.errors import ConfigError
from storage.rocks import RocksSettings
from storage.wheel import WheelSettings

ENV_PREFIX = "TIMERSTORE_"
SECTION_SEPARATOR = "__"
STORE_DIRS = {"rocks": "rocks", "wheel": "wheel"}  # <data_dir>/<this>: each store's files
STAGING_DIR = "staging"  # <data_dir>/staging: bulk imports waiting to be ingested
# TIMERSTORE_* variables of the project's own scripts (docker/*.sh, the docker test), not
# settings: an operator who exported one for them can still start the service in that shell
NOT_SETTINGS = frozenset(
    {"TIMERSTORE_DOCKER_CACHE", "TIMERSTORE_DOCKER_LOG", "TIMERSTORE_OFFLINE_NO_FETCH"}
)
# fields of the sections that may be 0 (every other integer there is at least 1)
ZERO_ALLOWED = frozenset(
    {
        "rocks.blob_min_bytes",  # 0: every value in blob files
        "memory.malloc_arena_max",  # 0: glibc's own limit
        "memory.malloc_trim_interval_ms",  # 0: never
    }
)
# upper bounds of every integer of a section: a size or a count is handed to RocksDB as a
# 64-bit integer (a larger one was an OverflowError trace), and a duration becomes a
# thread wait, an APScheduler interval or an offset from now (a tick of 10**13 ms killed
# the scanner of a service that went on listening; a housekeeping interval of 10**17 ms
# was a trace and exit 3, as if the data directory could not be opened)
MAX_INT = 2**63 - 1
MAX_DURATION_MS = 100 * 365 * 24 * 3600 * 1000  # 100 years


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
    # after SIGTERM, requests in progress may finish for this long (to the millisecond; 0:
    # they are cancelled at once); queued batches then have engine.stop_drain_ms
    shutdown_grace_ms: int = 10_000
    engine: EngineSettings = msgspec.field(default_factory=EngineSettings)
    limits: RequestLimits = msgspec.field(default_factory=RequestLimits)
    housekeeping: HousekeepingSettings = msgspec.field(default_factory=HousekeepingSettings)
    sinks: SinkSettings = msgspec.field(default_factory=SinkSettings)
    memory: MemorySettings = msgspec.field(default_factory=MemorySettings)
    rocks: RocksSettings = msgspec.field(default_factory=_rocks_defaults)
    wheel: WheelSettings = msgspec.field(default_factory=_wheel_defaults)
    cluster: ClusterSettings = msgspec.field(default_factory=ClusterSettings)

    def __post_init__(self) -> None:
        if not 1 <= self.port <= 65535:
            raise ConfigError("port must be 1 to 65535", field="port")
        # an empty variable (TIMERSTORE_HOST= in a unit file or a compose file whose
        # substitution was unset) bound every interface, or kept the data in the cwd
        if not self.host.strip():
            raise ConfigError(
                "host must not be empty (0.0.0.0 for every IPv4 interface)", field="host"
            )
        if not self.data_dir.strip():
            raise ConfigError("data_dir must not be empty", field="data_dir")
        if self.shutdown_grace_ms < 0:
            raise ConfigError("shutdown_grace_ms must be at least 0", field="shutdown_grace_ms")
        _require_at_most_bound("shutdown_grace_ms", self.shutdown_grace_ms)
        # a negative retention expired every topic-log message at the first housekeeping
        # run, and a negative blob size was a traceback from RocksDB's options
        sections = ("engine", "limits", "housekeeping", "sinks", "memory", "rocks", "wheel")
        for section in (*sections, "cluster"):
            _require_positive(section, getattr(self, section))
        if self.limits.max_page_limit < DEFAULT_PAGE_LIMIT:  # a listing without a limit
            raise ConfigError(
                f"limits.max_page_limit must be at least {DEFAULT_PAGE_LIMIT}, the page size "
                "of a listing that gives no limit (bound a page's memory with "
                "limits.max_page_bytes)",
                field="limits.max_page_limit",
            )
        _require_at_most("sinks.default_timeout_ms", "sinks.max_timeout_ms", self.sinks)
        _require_at_most("sinks.default_max_attempts", "sinks.max_max_attempts", self.sinks)

    def store_dir(self, store: str | None = None) -> str:
        """Where a store keeps its files: ``<data_dir>/rocks`` or ``<data_dir>/wheel``."""
        return os.path.join(self.data_dir, STORE_DIRS[store or self.store])

    def staging_dir(self) -> str:
        return os.path.join(self.data_dir, STAGING_DIR)

    def rocks_settings(self) -> RocksSettings:
        return dataclasses.replace(self.rocks, path=self.store_dir("rocks"))

    def wheel_settings(self) -> WheelSettings:
        return dataclasses.replace(self.wheel, path=self.store_dir("wheel"))


def _require_positive(section: str, values: Any) -> None:
    """Every integer of a section (a msgspec struct or a store's dataclass) is at least 1
    (0 for the few in ``ZERO_ALLOWED``); None means unset."""
    if dataclasses.is_dataclass(values):
        names = [f.name for f in dataclasses.fields(values)]
    else:
        names = list(values.__struct_fields__)
    for name in names:
        value, field = getattr(values, name), f"{section}.{name}"
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        least = 0 if field in ZERO_ALLOWED else 1
        if value < least:
            raise ConfigError(f"{field} must be at least {least}", field=field)
        _require_at_most_bound(field, value)


def _require_at_most_bound(field: str, value: int) -> None:
    """A duration at most ``MAX_DURATION_MS`` (100 years), any other integer ``MAX_INT``."""
    if field.endswith("_ms") and value > MAX_DURATION_MS:
        raise ConfigError(
            f"{field} must be at most {MAX_DURATION_MS} (100 years, in milliseconds)", field=field
        )
    if value > MAX_INT:
        raise ConfigError(f"{field} must be at most {MAX_INT} (2**63 - 1)", field=field)


def _require_at_most(default: str, maximum: str, values: msgspec.Struct) -> None:
    """A section's default may not exceed the upper limit it is checked against."""
    low, high = (getattr(values, name.split(".")[1]) for name in (default, maximum))
    if low > high:
        raise ConfigError(f"{default} ({low}) must be at most {maximum} ({high})", field=default)


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
        if not key.startswith(ENV_PREFIX) or key in NOT_SETTINGS:
            continue
        name = key[len(ENV_PREFIX) :].lower()
        section, _, field = name.partition(SECTION_SEPARATOR)
        if field and field in sections.get(section, ()):
            values.setdefault(section, {})[field] = _section_value(field, raw)
        elif not field and name in top_level:
            values[name] = _split_keys(key, raw) if name.endswith("_keys") else raw
        else:
            raise ConfigError(_unknown_message(key, sections, top_level), field=key)
    return values


def _unknown_message(key: str, sections: dict[str, set[str]], top_level: set[str]) -> str:
    """``unknown setting KEY``, with the nearest real name when one is close (a typo, a
    single underscore for the double one, a nested field without its section)."""
    known = sorted(top_level) + [
        f"{section}{SECTION_SEPARATOR}{field}"
        for section, fields in sections.items()
        for field in sorted(fields)
    ]
    name = key[len(ENV_PREFIX) :].lower()
    same_field = [k for k in known if k.rpartition(SECTION_SEPARATOR)[2] == name]
    near = same_field or difflib.get_close_matches(name, known, n=1, cutoff=0.8)
    hint = f" (did you mean {ENV_PREFIX}{near[0].upper()}?)" if near else ""
    return f"unknown setting {key}{hint}"


def load_settings(
    environ: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """Merge defaults, environment and flags into one validated Settings, or ConfigError."""
    environ = os.environ if environ is None else environ
    values = _from_env(environ)
    _merge_flags(values, overrides or {})
    try:
        return msgspec.convert(values, Settings, strict=False)
    except msgspec.ValidationError as exc:
        field = _field_of(exc)
        raise ConfigError(_invalid_message(exc, field, values, environ), field=field) from None
    except ConfigError as exc:  # a rule of Settings.__post_init__: name the variable too
        field, message = exc.field or "", exc.message
        env_name = _env_name(field) if field else ""
        if env_name not in environ or env_name in message:
            raise
        if message.startswith(field):  # where a type error names it: after the setting
            text = f"{field} ({env_name}){message[len(field) :]}"
        else:
            text = f"{message} ({env_name})"
        raise ConfigError(text, field=field) from None


def _merge_flags(values: dict[str, Any], overrides: Mapping[str, Any]) -> None:
    """Flags over variables: a flag not given (None) leaves the variable; a section's flags
    (a dict) go over that section's variables field by field."""
    for key, value in overrides.items():
        if isinstance(value, dict):
            fields = {k: _section_value(k, v) for k, v in value.items() if v is not None}
            if fields:
                values[key] = {**values.get(key, {}), **fields}
        elif value is not None:
            values[key] = value


def _env_name(field: str) -> str:
    """The environment variable of a setting: ``engine.tick_ms`` -> TIMERSTORE_ENGINE__TICK_MS."""
    return ENV_PREFIX + field.upper().replace(".", SECTION_SEPARATOR)


def _split_keys(key: str, raw: str) -> list[str]:
    keys = [k.strip() for k in raw.split(",") if k.strip()]
    if not keys:  # an unset substitution in a compose or unit file ran the service open
        raise ConfigError(
            f"{key} is set but holds no key: give comma-separated keys, or unset it "
            "to run without keys",
            field=key,
        )
    return keys


def _split_list(raw: str) -> list[str]:
    """A comma-separated list (``TIMERSTORE_CLUSTER__NATS_URLS=nats://a:4222,nats://b:4222``);
    empty means none (for the NATS URLs: a single node)."""
    return [part.strip() for part in raw.split(",") if part.strip()]


def _section_value(field: str, raw: Any) -> Any:
    """A section field from the environment or a flag: ``*_urls`` is comma-separated."""
    return _split_list(raw) if field.endswith("_urls") and isinstance(raw, str) else raw


def _field_of(exc: msgspec.ValidationError) -> str | None:
    text = str(exc)
    if "$." in text:
        return text.split("$.", 1)[1].split("`")[0].split("[")[0]
    return None


def _invalid_message(
    exc: msgspec.ValidationError, field: str | None, values: dict[str, Any], environ: Any
) -> str:
    """``invalid setting engine.tick_ms: Expected `int`, got '1.5' (TIMERSTORE_...)``.

    msgspec says "got `str`" of every value that came from the environment (they all
    are strings): the value itself says more. Keys are never echoed."""
    reason = str(exc).split(" - at `$", 1)[0]
    if field is None:
        return f"invalid setting: {reason}"
    raw: Any = values
    for part in field.split("."):
        raw = raw.get(part) if isinstance(raw, dict) else None
    if isinstance(raw, str) and not field.endswith("_keys"):
        reason = reason.replace(", got `str`", f", got {raw!r}")
    env_name = _env_name(field)
    source = f" ({env_name})" if env_name in environ else ""
    return f"invalid setting {field}{source}: {reason}"
