"""An input file Spark cannot read (here a CSV file named ``*.parquet``) is a bad input:
the last stderr line names it and Spark's reason, exit 2, no Python traceback (it was
about 300 lines of JVM and Python traces and exit 1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipeline.helpers import NOW

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]
NOT_PARQUET = f"topic,id,deliver_at_ms\norders,a,{NOW}\n"


def _last_line(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "timerstore", *args, "--master", "local[1]"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done.stderr.strip().splitlines()[-1]


def test_import_of_a_file_that_is_not_parquet_is_one_line(tmp_path):
    rows = tmp_path / "rows.parquet"
    rows.write_text(NOT_PARQUET)
    line = _last_line("import", str(rows), "--data-dir", str(tmp_path / "data"))
    assert line.startswith(f"timerstore import: cannot read input {rows}: "), line
    assert "Could not read footer" in line


def test_analyze_of_a_history_file_that_is_not_parquet_is_one_line(tmp_path):
    history = tmp_path / "deliveries"
    history.mkdir()
    (history / "part-00000.parquet").write_text(NOT_PARQUET)
    line = _last_line("analyze", str(history), "--out", str(tmp_path / "report"))
    assert line.startswith(f"timerstore analyze: cannot read deliveries {history}: "), line
    assert "part-00000.parquet" in line
