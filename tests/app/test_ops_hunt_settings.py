"""An integer setting too large for what it feeds is refused, naming it.

A size larger than 64 bits was an OverflowError trace from RocksDB's options; a duration
too long for a thread wait killed the scanner of a service that went on listening
(``engine.tick_ms=10**13``), or for APScheduler's interval was a trace and exit 3
(``housekeeping.interval_ms=10**17``), the status of a data directory that cannot open.
"""

from __future__ import annotations

import pytest

from app.config import MAX_DURATION_MS, MAX_INT, load_settings
from storage.errors import ConfigError


@pytest.mark.parametrize(
    ("key", "value", "field", "bound"),
    [
        ("TIMERSTORE_ENGINE__TICK_MS", 10**13, "engine.tick_ms", MAX_DURATION_MS),
        ("TIMERSTORE_HOUSEKEEPING__INTERVAL_MS", 10**17, "housekeeping.interval_ms", None),
        ("TIMERSTORE_SHUTDOWN_GRACE_MS", 10**17, "shutdown_grace_ms", MAX_DURATION_MS),
        ("TIMERSTORE_ROCKS__LOG_RETENTION_MS", MAX_DURATION_MS + 1, "rocks.log_retention_ms", None),
        ("TIMERSTORE_ROCKS__WRITE_BUFFER_BYTES", 10**20, "rocks.write_buffer_bytes", MAX_INT),
        ("TIMERSTORE_ROCKS__BLOCK_CACHE_BYTES", MAX_INT + 1, "rocks.block_cache_bytes", MAX_INT),
        ("TIMERSTORE_ENGINE__QUEUE_CAPACITY", 10**20, "engine.queue_capacity", MAX_INT),
    ],
)
def test_a_value_past_the_upper_bound_is_one_config_error_naming_it(
    key: str, value: int, field: str, bound: int | None
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={key: str(value)})
    assert caught.value.field == field
    assert caught.value.message.startswith(f"{field} ({key}) must be at most ")
    if bound is not None:
        assert str(bound) in caught.value.message


def test_the_bounds_themselves_are_accepted() -> None:
    settings = load_settings(
        environ={
            "TIMERSTORE_ROCKS__LOG_RETENTION_MS": str(MAX_DURATION_MS),
            "TIMERSTORE_ENGINE__QUEUE_CAPACITY": str(MAX_INT),
            "TIMERSTORE_SHUTDOWN_GRACE_MS": str(MAX_DURATION_MS),
        }
    )
    assert settings.rocks.log_retention_ms == MAX_DURATION_MS
    assert settings.engine.queue_capacity == MAX_INT
