"""CSV import on a real local Spark session: RFC 4180 records (a quoted field may hold a
line break) are stored byte for byte, and a record with more fields than the header is
rejected with its data-row number instead of losing the extra fields."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from pipeline.importer import run_import
from pipeline.rows import JobTimes
from storage.rocks import RocksSettings, RocksTimerStore
from tests.pipeline.helpers import LIMITS, NOW

pytestmark = pytest.mark.spark

HEADER = ["topic", "id", "deliver_at_ms", "payload", "headers"]


def _import(spark, tmp_path: Path):
    """Import ``tmp_path/in.csv`` into a new store there."""
    summary = run_import(
        spark,
        str(tmp_path / "in.csv"),
        str(tmp_path / "stage"),
        times=JobTimes(NOW, NOW, 0),
        limits=LIMITS,
        partitions=2,
    )
    store = RocksTimerStore(RocksSettings(str(tmp_path / "rocks")))
    store.ingest_staged(summary.stage_dir, limits=LIMITS)
    return summary, store


def _rejects(summary) -> list[dict[str, str]]:
    if summary.rejects_path is None:
        return []
    with open(summary.rejects_path, newline="") as f:
        return list(csv.DictReader(f))


def test_a_quoted_line_break_is_stored_byte_for_byte(spark, tmp_path):
    with open(tmp_path / "in.csv", "w", newline="") as f:  # as Python's csv module writes
        writer = csv.writer(f)
        writer.writerow(HEADER)
        writer.writerow(["orders", "multi", NOW + 1, "line1\nline2", '{"k":"v"}'])
        writer.writerow(["orders", "after", NOW + 2, 'say "hi"\r\n,x', ""])
        writer.writerow(["orders", "bad id", NOW + 3, "p", ""])
    summary, store = _import(spark, tmp_path)
    try:
        assert (summary.rows_read, summary.accepted, summary.rejected) == (3, 2, 1)
        multi = store.get("orders", "multi")
        assert multi is not None
        assert (multi.payload, multi.headers, multi.deliver_at_ms) == (
            b"line1\nline2",
            {"k": "v"},
            NOW + 1,
        )
        after = store.get("orders", "after")
        assert after is not None and after.deliver_at_ms == NOW + 2
        rejects = _rejects(summary)
        # the data-row number counts records, not lines: the bad row is the third record
        assert [(r["id"], r["reject_row"]) for r in rejects] == [("bad id", "3")]
    finally:
        store.close()


def test_a_row_with_more_fields_than_the_header_is_rejected_with_its_row(spark, tmp_path):
    text = (
        "topic,id,deliver_at_ms,payload\n"
        f"orders,a,{NOW + 5},hello, world\n"
        f'orders,b,{NOW + 6},"two\nlines"\n'
        f"orders,c,{NOW + 7},fine\n"
        f"orders,d,{NOW + 8},x,y,z\n"
    )
    with open(tmp_path / "in.csv", "w", newline="") as f:
        f.write(text)
    summary, store = _import(spark, tmp_path)
    try:
        assert (summary.rows_read, summary.accepted, summary.rejected) == (4, 2, 2)
        assert store.get("orders", "a") is None and store.get("orders", "d") is None
        b, c = store.get("orders", "b"), store.get("orders", "c")
        assert b is not None and b.payload == b"two\nlines"
        assert c is not None and c.payload == b"fine"
        rejects = _rejects(summary)
        assert [(r["id"], r["reject_row"]) for r in rejects] == [("a", "1"), ("d", "4")]
        assert all("more fields than the header" in r["reject_reason"] for r in rejects)
        assert "(5, the header 4)" in rejects[0]["reject_reason"]
    finally:
        store.close()
