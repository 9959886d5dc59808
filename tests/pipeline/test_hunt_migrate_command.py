"""``timerstore migrate`` on a data directory that holds no store at all (a mistyped
``--data-dir``) says so and fails (exit 3, as ``export-deliveries`` on the same path),
instead of "nothing to migrate" and exit 0, which reads as "already up to date"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from storage.rocks import RocksSettings, RocksTimerStore

ROOT = Path(__file__).resolve().parents[2]


def _migrate(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "timerstore", "migrate", "--data-dir", str(data_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_migrate_of_a_path_without_a_store_fails_in_one_line(tmp_path):
    missing = tmp_path / "dta"
    done = _migrate(missing)
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert done.stderr.strip() == (
        f"timerstore migrate: no RocksDB store at {missing / 'rocks'}: "
        "check --data-dir (or TIMERSTORE_DATA_DIR)"
    )
    assert not missing.exists()  # nothing created


def test_migrate_of_a_current_store_still_has_nothing_to_do(tmp_path):
    RocksTimerStore(RocksSettings(str(tmp_path / "data" / "rocks"))).close()
    done = _migrate(tmp_path / "data")
    assert done.returncode == 0, done.stderr
    assert "nothing to migrate" in done.stdout
