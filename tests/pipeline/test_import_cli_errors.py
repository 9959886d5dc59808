"""``timerstore import`` refuses a stage directory it cannot create with one line, before
Spark starts, and leaves the store as it was."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from storage.protocol import NewTimer
from storage.rocks import RocksSettings, RocksTimerStore
from tests.pipeline.helpers import NOW

ROOT = Path(__file__).resolve().parents[2]


def test_a_stage_dir_that_cannot_be_created_is_one_line_and_exit_2(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = RocksTimerStore(RocksSettings(str(data / "rocks")))
    store.schedule([NewTimer("orders", "kept", NOW + 1000)], NOW)
    store.close()
    (tmp_path / "in.csv").write_text("topic,id,deliver_at_ms\norders,a,1\n")
    (tmp_path / "a-file").write_text("")
    stage = tmp_path / "a-file" / "stage"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "timerstore", "import", str(tmp_path / "in.csv")),
            *("--data-dir", str(data), "--stage-dir", str(stage)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert str(stage) in lines[0] and "Not a directory" in lines[0]
    assert "choose another --stage-dir" in lines[0]
    store = RocksTimerStore(RocksSettings(str(data / "rocks")))
    try:
        assert store.stats().pending == 1 and store.get("orders", "kept") is not None
    finally:
        store.close()
