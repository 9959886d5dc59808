"""``timerstore serve`` with a bad setting: one line naming it, exit 2, never a traceback,
and nothing started (a store setting RocksDB refused was a trace and exit 1, an integer
too large a service that listened with a dead scanner).

Each setting's line is checked against ``load_settings``, which ``serve`` prints after
its prefix; one real ``serve`` shows that the line is all it prints and that it opens
nothing (one process is enough: every bad setting takes that one path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from api.server import EXIT_BAD_SETTINGS
from app.config import load_settings
from storage.errors import ConfigError
from tests.api.helpers import ROOT, free_port

BOUND_MS = "3153600000000 (100 years, in milliseconds)"


def _serve(data_dir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Must stop by itself: a server that started is killed at the timeout (a failure)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TIMERSTORE_")}
    cmd = [sys.executable, "-m", "timerstore", "serve", "--port", str(free_port())]
    return subprocess.run(
        [*cmd, "--data-dir", str(data_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        env={**clean, **env},
        check=False,
    )


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            {"TIMERSTORE_LIMITS__MAX_BODY_BYTES": "0"},
            "timerstore serve: limits.max_body_bytes (TIMERSTORE_LIMITS__MAX_BODY_BYTES)"
            " must be at least 1",
        ),
        (
            {"TIMERSTORE_ROCKS__BLOB_MIN_BYTES": "-1"},
            "timerstore serve: rocks.blob_min_bytes (TIMERSTORE_ROCKS__BLOB_MIN_BYTES)"
            " must be at least 0",
        ),
        (
            {"TIMERSTORE_ROCKS__LOG_RETENTION_MS": "-1"},
            "timerstore serve: rocks.log_retention_ms (TIMERSTORE_ROCKS__LOG_RETENTION_MS)"
            " must be at least 1",
        ),
        (
            {"TIMERSTORE_ENGINE__TICK_MS": "5ms"},
            "timerstore serve: invalid setting engine.tick_ms (TIMERSTORE_ENGINE__TICK_MS): "
            "Expected `int`, got '5ms'",
        ),
        (
            {"TIMERSTORE_LOG_FORMT": "json"},
            "timerstore serve: unknown setting TIMERSTORE_LOG_FORMT "
            "(did you mean TIMERSTORE_LOG_FORMAT?)",
        ),
        # too large: a scanner dead of an OverflowError in a service that went on
        # listening (/readyz 503 for good), a trace and exit 3, a trace and exit 1
        (
            {"TIMERSTORE_ENGINE__TICK_MS": str(10**13)},
            "timerstore serve: engine.tick_ms (TIMERSTORE_ENGINE__TICK_MS) must be at most "
            + BOUND_MS,
        ),
        (
            {"TIMERSTORE_HOUSEKEEPING__INTERVAL_MS": str(10**17)},
            "timerstore serve: housekeeping.interval_ms (TIMERSTORE_HOUSEKEEPING__INTERVAL_MS)"
            " must be at most " + BOUND_MS,
        ),
        (
            {"TIMERSTORE_ROCKS__WRITE_BUFFER_BYTES": str(10**20)},
            "timerstore serve: rocks.write_buffer_bytes (TIMERSTORE_ROCKS__WRITE_BUFFER_BYTES)"
            " must be at most 9223372036854775807 (2**63 - 1)",
        ),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(env: dict[str, str], line: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ=env)
    assert f"timerstore serve: {caught.value.message}" == line


def test_serve_with_a_bad_setting_prints_its_line_alone_and_exits_2(tmp_path: Path) -> None:
    env = {"TIMERSTORE_ROCKS__BLOB_MIN_BYTES": "-1"}  # RocksDB's refusal was a trace, exit 1
    done = _serve(tmp_path / "data", env)
    assert done.returncode == EXIT_BAD_SETTINGS, done.stderr
    line = "timerstore serve: rocks.blob_min_bytes (TIMERSTORE_ROCKS__BLOB_MIN_BYTES)"
    assert done.stderr.strip().splitlines() == [line + " must be at least 0"], done.stderr
    assert not (tmp_path / "data").exists()  # refused before the store was opened
