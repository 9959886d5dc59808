"""The import job under ``spark-submit`` (its own JVM), on a CSV file, into a stopped store."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from storage.rocks import RocksSettings, RocksTimerStore
from tests.pipeline.helpers import NOW

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
HEADER = ["topic", "id", "deliver_at_ms", "delay_ms", "payload", "payload_b64", "headers"]
ROWS = [
    ["orders", "a", str(NOW + 1000), "", "hello, world", "", '{"k": "v"}'],
    ["orders", "b", "", "2500", "", "AAEC", ""],
    ["orders", "bad id", str(NOW), "", "x", "", ""],  # data row 3
    ["mail", "c", "soon", "", "", "", ""],  # data row 4
    ["mail", "d", str(NOW + 5), "", "", "", '["not", "an", "object"]'],  # data row 5
    ["orders", "a", str(NOW + 3000), "", "second", "", ""],  # a later duplicate
]


def _submit_import(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``spark-submit`` of the import job on ``in.csv`` into ``data``, rejects to a file."""
    submit = Path(sys.executable).parent / "spark-submit"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    return subprocess.run(
        [
            *(str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false"),
            *(
                "--conf",
                "spark.sql.shuffle.partitions=2",
                str(ROOT / "pipeline/jobs/import_job.py"),
            ),
            *(str(tmp_path / "in.csv"), "--data-dir", str(tmp_path / "data")),
            *("--now-ms", str(NOW), "--rejects", str(tmp_path / "rejects.csv")),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_spark_submit_imports_a_csv_file(tmp_path):
    with open(tmp_path / "in.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(HEADER)
        writer.writerows(ROWS)
    done = _submit_import(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout[done.stdout.index("\n{") :])  # after the progress lines
    s = result["import"]
    assert (s["format"], s["rows_read"], s["accepted"], s["rejected"]) == ("csv", 6, 3, 3)
    assert (s["duplicates"], s["timers"], result["ingest"]["added"]) == (1, 2, 2)

    with open(tmp_path / "rejects.csv", newline="") as f:
        rejects = list(csv.DictReader(f))
    assert [(r["id"], r["reject_row"]) for r in rejects] == [
        ("bad id", "3"),
        ("c", "4"),
        ("d", "5"),
    ]
    assert "id may contain only" in rejects[0]["reject_reason"]
    assert "deliver_at_ms must be an integer" in rejects[1]["reject_reason"]
    assert "headers must be an object" in rejects[2]["reject_reason"]

    store = RocksTimerStore(RocksSettings(str(tmp_path / "data" / "rocks")))
    try:
        a, b = store.get("orders", "a"), store.get("orders", "b")
        assert (a.deliver_at_ms, a.payload, a.headers, a.binary) == (
            NOW + 3000,
            b"second",
            {},
            False,
        )
        assert (b.deliver_at_ms, b.payload, b.binary) == (NOW + 2500, b"\x00\x01\x02", True)
        assert store.stats().pending_by_topic == {"orders": 2}
    finally:
        store.close()
    assert not list((tmp_path / "data" / "staging").glob("*/timers/*.sst"))  # moved into the store
