"""An export that fails leaves the earlier export in ``--out`` as it was: the earlier
``part-*.parquet`` files used to be removed before the journal was even opened, so a
mistyped ``--data-dir`` lost them and exported nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.deliveries import write_deliveries
from tests.pipeline.helpers import NOW

ROOT = Path(__file__).resolve().parents[2]
EARLIER = ("orders", "a", NOW, NOW, NOW + 5, 1, "rocks", NOW - 10)


def test_an_export_from_a_wrong_data_dir_keeps_the_earlier_export(tmp_path):
    out = tmp_path / "deliveries"
    assert write_deliveries(str(out), [EARLIER]) == 1
    done = subprocess.run(
        [
            *(sys.executable, "-m", "timerstore", "export-deliveries"),
            *("--data-dir", str(tmp_path / "mistyped"), "--out", str(out)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip().endswith(f"no RocksDB store at {tmp_path / 'mistyped' / 'rocks'}")
    assert sorted(os.listdir(out)) == ["part-00000.parquet"]  # no hidden leftovers either
    assert pq.read_table(out).to_pylist()[0]["id"] == "a"


def test_a_row_source_that_fails_midway_keeps_the_earlier_export(tmp_path):
    out = tmp_path / "deliveries"
    write_deliveries(str(out), [EARLIER])

    def rows():
        yield ("orders", "b", NOW, NOW, NOW + 7, 1, "rocks", NOW - 10)
        raise OSError("the journal could not be read")

    with pytest.raises(OSError, match="could not be read"):
        write_deliveries(str(out), rows())
    assert sorted(os.listdir(out)) == ["part-00000.parquet"]
    assert [r["id"] for r in pq.read_table(out).to_pylist()] == ["a"]
