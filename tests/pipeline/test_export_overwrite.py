"""``write_deliveries`` (what ``export-deliveries`` writes) into a directory holding an
earlier export: only the new rows are left, and files that are no export stay."""

from __future__ import annotations

import pyarrow.parquet as pq

from pipeline import deliveries
from pipeline.deliveries import write_deliveries


def _rows(n: int, tag: str) -> list[deliveries.DeliveryRow]:
    return [
        ("orders", f"{tag}{i}", 1000 + i, 1000 + i, 2000 + i, 1, "rocks", None) for i in range(n)
    ]


def test_a_second_export_into_the_same_directory_replaces_the_first(tmp_path, monkeypatch):
    monkeypatch.setattr(deliveries, "ROWS_PER_FILE", 3)  # small files, so 7 rows make three
    out = tmp_path / "out"
    assert write_deliveries(str(out), _rows(7, "first")) == 7
    assert len(list(out.glob("part-*.parquet"))) == 3
    (out / "README.txt").write_text("not an export")
    (out / "other.parquet").write_bytes(b"kept")

    assert write_deliveries(str(out), _rows(2, "second")) == 2
    table = pq.read_table(str(out / "part-00000.parquet"))
    assert sorted(p.name for p in out.glob("part-*.parquet")) == ["part-00000.parquet"]
    assert table.column("id").to_pylist() == ["second0", "second1"]
    assert (out / "README.txt").read_text() == "not an export"
    assert (out / "other.parquet").read_bytes() == b"kept"
