"""``timerstore serve`` with an integer setting too large: one line naming it, exit 2.

``engine.tick_ms=10**13`` started a service whose scanner died of an OverflowError (it
listened, /readyz said 503 for good); ``housekeeping.interval_ms=10**17`` was a trace and
exit 3; ``rocks.write_buffer_bytes=10**20`` a trace and exit 1.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from api.server import EXIT_BAD_SETTINGS
from tests.api.test_ops_settings import _serve

BOUND_MS = "3153600000000 (100 years, in milliseconds)"


@pytest.mark.parametrize(
    ("env", "line"),
    [
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
def test_a_setting_too_large_is_one_line_and_exit_2(
    tmp_path: Path, env: dict[str, str], line: str
) -> None:
    done = _serve(tmp_path / "data", env)
    assert done.returncode == EXIT_BAD_SETTINGS, done.stderr
    assert done.stderr.strip().splitlines() == [line], done.stderr
    assert not (tmp_path / "data").exists()  # refused before the store was opened
