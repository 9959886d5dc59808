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
            "TIMERSTORE_LIMITS__MAX_PAGE_LIMIT": "700",
            "TIMERSTORE_API_KEYS": "a, b,,",
            "TIMERSTORE_DATA_DIR": "/srv/t",
            "TIMERSTORE_LOG_FORMAT": "json",
            "TIMERSTORE_METRICS_PUBLIC": "true",
        }
    )
    assert (settings.log_format, settings.metrics_public) == ("json", True)
    assert settings.engine.tick_ms == 5
    assert settings.rocks_settings().sync_writes is True
    assert settings.limits.max_page_limit == 700
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
        # a negative retention expired every topic-log message at the first housekeeping
        ({"TIMERSTORE_ROCKS__LOG_RETENTION_MS": "-1"}, "rocks.log_retention_ms"),
        ({"TIMERSTORE_ROCKS__DONE_RETENTION_MS": "0"}, "rocks.done_retention_ms"),
        ({"TIMERSTORE_WHEEL__LOG_RETENTION_MS": "-1000"}, "wheel.log_retention_ms"),
        ({"TIMERSTORE_WHEEL__ROLL_BATCH": "0"}, "wheel.roll_batch"),
        ({"TIMERSTORE_ROCKS__BLOB_MIN_BYTES": "-1"}, "rocks.blob_min_bytes"),  # was a trace
        ({"TIMERSTORE_HOST": ""}, "host"),  # bound every interface
        ({"TIMERSTORE_DATA_DIR": " "}, "data_dir"),  # kept the data in the cwd
        ({"TIMERSTORE_SINKS__DEFAULT_TIMEOUT_MS": "90000"}, "sinks.default_timeout_ms"),
        ({"TIMERSTORE_SINKS__DEFAULT_MAX_ATTEMPTS": "101"}, "sinks.default_max_attempts"),
        # below the default page size: every listing without a limit was a 422
        ({"TIMERSTORE_LIMITS__MAX_PAGE_LIMIT": "50"}, "limits.max_page_limit"),
        # set but empty (an unset substitution): the service ran with no key at all
        ({"TIMERSTORE_API_KEYS": ""}, "TIMERSTORE_API_KEYS"),
        ({"TIMERSTORE_ADMIN_KEYS": " , "}, "TIMERSTORE_ADMIN_KEYS"),
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


def test_a_blob_size_of_zero_is_accepted() -> None:
    """0 puts every timer value in blob files; only a negative size is refused."""
    assert (
        load_settings(environ={"TIMERSTORE_ROCKS__BLOB_MIN_BYTES": "0"}).rocks.blob_min_bytes == 0
    )


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("TIMERSTORE_LOGFORMAT", "TIMERSTORE_LOG_FORMAT"),
        ("TIMERSTORE_ENGINE_TICK_MS", "TIMERSTORE_ENGINE__TICK_MS"),  # one underscore
        ("TIMERSTORE_TICK_MS", "TIMERSTORE_ENGINE__TICK_MS"),  # without its section
        ("TIMERSTORE_ADMIN_KEY", "TIMERSTORE_ADMIN_KEYS"),
    ],
)
def test_an_unknown_variable_names_the_nearest_setting(key: str, suggestion: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={key: "1"})
    assert caught.value.message == f"unknown setting {key} (did you mean {suggestion}?)"


def test_an_unknown_variable_far_from_every_setting_gets_no_guess() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"TIMERSTORE_COLOUR": "blue"})
    assert caught.value.message == "unknown setting TIMERSTORE_COLOUR"


def test_the_variables_of_the_projects_own_scripts_are_not_settings() -> None:
    """docs/containers.md has operators export these for docker/*.sh; serve still starts."""
    environ = {"TIMERSTORE_DOCKER_CACHE": "/var/cache/x", "TIMERSTORE_OFFLINE_NO_FETCH": "1"}
    assert load_settings(environ=environ) == load_settings(environ={})


def test_a_value_of_the_wrong_type_names_the_variable_and_the_value() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"TIMERSTORE_ENGINE__TICK_MS": "1.5"})
    assert caught.value.message == (
        "invalid setting engine.tick_ms (TIMERSTORE_ENGINE__TICK_MS): Expected `int`, got '1.5'"
    )
    assert caught.value.field == "engine.tick_ms"


@pytest.mark.parametrize(
    "environ",
    [
        {"TIMERSTORE_ENGINE__TICK_MS": "0"},
        {"TIMERSTORE_HOST": ""},
        {"TIMERSTORE_SINKS__DEFAULT_MAX_ATTEMPTS": "101"},
        {"TIMERSTORE_ENGINE__TICK_MS": "1.5"},
    ],
)
def test_a_bad_value_from_the_environment_names_its_variable(environ: dict[str, str]) -> None:
    """A range or emptiness rule named only the setting (``engine.tick_ms``), while a type
    error named the variable too; an operator edits the variable."""
    with pytest.raises(ConfigError) as caught:
        load_settings(environ=environ)
    [variable] = environ
    assert f"({variable})" in caught.value.message


def test_index_and_filter_blocks_in_the_cache_is_a_rocks_setting() -> None:
    environ = {"TIMERSTORE_ROCKS__CACHE_INDEX_AND_FILTER_BLOCKS": "true"}
    assert load_settings(environ=environ).rocks_settings().cache_index_and_filter_blocks
    assert not load_settings(environ={}).rocks_settings().cache_index_and_filter_blocks


def test_a_sections_flags_go_over_its_variables_field_by_field() -> None:
    environ = {"TIMERSTORE_CLUSTER__NODE_ID": "from-env", "TIMERSTORE_CLUSTER__LEASE_MS": "7000"}
    flags = {"nats_urls": "nats://a:4222, nats://b:4222", "node_id": "n1", "lease_ms": None}
    cluster = load_settings(environ=environ, overrides={"cluster": flags}).cluster
    assert cluster.nats_urls == ("nats://a:4222", "nats://b:4222")
    assert cluster.node_id == "n1"  # the flag over the variable
    assert cluster.lease_ms == 7000  # a flag not given leaves the variable
    assert cluster.partitions == 16  # neither: the default


def test_a_bad_cluster_flag_is_a_config_error_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"cluster\.replicas must be 1, 3 or 5"):
        load_settings(environ={}, overrides={"cluster": {"replicas": 2}})


def test_the_log_mirror_is_on_unless_its_variable_says_false() -> None:
    assert load_settings(environ={}).cluster.log_mirror
    off = {"TIMERSTORE_CLUSTER__LOG_MIRROR": "false"}
    assert not load_settings(environ=off).cluster.log_mirror
