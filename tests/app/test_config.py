"""The one settings object: sections, environment names, ConfigError naming the field."""

from __future__ import annotations

import pytest

from app.config import load_settings
from storage.errors import ConfigError, InvalidInputError


def test_defaults_come_from_the_sections_own_structs() -> None:
    settings = load_settings(environ={})
    assert settings.engine.tick_ms == 10
    assert (settings.log_format, settings.metrics_public) == ("text", False)
    assert settings.limits.max_batch_timers == 10_000
    assert settings.rocks_settings().path.endswith("rocks")
    assert settings.wheel_settings().path.endswith("wheel")
    assert settings.staging_dir().endswith("staging")


def test_nested_fields_are_set_as_section_double_underscore_field() -> None:
    settings = load_settings(
        environ={
            "TIMERSTORE_ENGINE__TICK_MS": "5",
            "TIMERSTORE_ROCKS__SYNC_WRITES": "true",
            "TIMERSTORE_LIMITS__MAX_PAGE_LIMIT": "7",
            "TIMERSTORE_API_KEYS": "a, b,,",
            "TIMERSTORE_DATA_DIR": "/srv/t",
            "TIMERSTORE_LOG_FORMAT": "json",
            "TIMERSTORE_METRICS_PUBLIC": "true",
        }
    )
    assert (settings.log_format, settings.metrics_public) == ("json", True)
    assert settings.engine.tick_ms == 5
    assert settings.rocks_settings().sync_writes is True
    assert settings.limits.max_page_limit == 7
    assert settings.api_keys == ("a", "b")
    assert settings.rocks_settings().path == "/srv/t/rocks"


@pytest.mark.parametrize(
    ("environ", "field"),
    [
        ({"TIMERSTORE_TICK_MS": "5"}, "TIMERSTORE_TICK_MS"),  # flat name of a nested field
        ({"TIMERSTORE_ENGINE__NOPE": "1"}, "TIMERSTORE_ENGINE__NOPE"),
        ({"TIMERSTORE_ENGINE__TICK_MS": "0"}, "engine.tick_ms"),
        ({"TIMERSTORE_PORT": "70000"}, "port"),
        ({"TIMERSTORE_PORT": "eighty"}, "port"),
        ({"TIMERSTORE_LOG_LEVEL": "loud"}, "log_level"),
        ({"TIMERSTORE_LOG_FORMAT": "xml"}, "log_format"),
        ({"TIMERSTORE_METRICS_PUBLIC": "maybe"}, "metrics_public"),
        ({"TIMERSTORE_WHEEL__PRECISION_MS": "0"}, "precision_ms"),
        ({"TIMERSTORE_ROCKS__TIMERS_WRITE_BUFFER_BYTES": "0"}, "rocks.timers_write_buffer_bytes"),
    ],
)
def test_a_bad_setting_is_a_config_error_naming_it(environ: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ=environ)
    assert caught.value.field is not None and field in caught.value.field
    assert not isinstance(caught.value, InvalidInputError)  # never a request's 422


def test_the_deprecated_store_chunk_timers_is_still_accepted() -> None:
    """Removed as a knob (a batch is one atomic write), kept so a configuration that set it
    still starts: the service logs a deprecated_setting warning instead."""
    settings = load_settings(environ={"TIMERSTORE_LIMITS__STORE_CHUNK_TIMERS": "1000"})
    assert settings.limits.store_chunk_timers == 1000
    assert load_settings(environ={}).limits.store_chunk_timers is None
