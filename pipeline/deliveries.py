"""The delivery-history format (Parquet) and its export from a store's journal.

One row per delivery: ``topic, id, deliver_at_ms`` (requested), ``key_ms`` (the key time
the store delivered at: the request clamped to the scan floor, or a retry's time),
``delivered_at_ms``, ``attempts``, ``store`` and ``created_at_ms`` (may be null). The
benchmark writes the same format with ``write_deliveries``.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Iterator
from typing import Any

from storage.rocks.journal import read_journal

ROWS_PER_FILE = 1_000_000
COLUMNS = (
    "topic",
    "id",
    "deliver_at_ms",
    "key_ms",
    "delivered_at_ms",
    "attempts",
    "store",
    "created_at_ms",
)
DeliveryRow = tuple[str, str, int, int, int, int, str, int | None]


def arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("topic", pa.string(), nullable=False),
            pa.field("id", pa.string(), nullable=False),
            pa.field("deliver_at_ms", pa.int64(), nullable=False),
            pa.field("key_ms", pa.int64(), nullable=False),
            pa.field("delivered_at_ms", pa.int64(), nullable=False),
            pa.field("attempts", pa.int32(), nullable=False),
            pa.field("store", pa.string(), nullable=False),
            pa.field("created_at_ms", pa.int64()),
        ]
    )


def write_deliveries(out_dir: str, rows: Iterable[DeliveryRow]) -> int:
    """Write rows as ``part-NNNNN.parquet`` files in ``out_dir``; return the row count.

    The ``part-*.parquet`` files of an earlier export there are replaced (only those: a
    reader of the directory would count their rows too), and only once every row was
    written: the new files are written under hidden names (which Spark skips) first, so
    an export that fails (a wrong ``--data-dir``, a full disk) leaves the earlier one."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(out_dir, exist_ok=True)
    schema = arrow_schema()
    total = 0
    written: list[str] = []  # the new files, under their hidden names
    chunk: list[DeliveryRow] = []

    def flush() -> None:
        nonlocal chunk
        columns = list(zip(*chunk, strict=True)) if chunk else [()] * len(COLUMNS)
        table = pa.Table.from_arrays(
            [pa.array(col, type=f.type) for col, f in zip(columns, schema, strict=True)],
            schema=schema,
        )
        written.append(os.path.join(out_dir, f".part-{len(written):05d}.parquet.tmp"))
        pq.write_table(table, written[-1])
        chunk = []

    complete = False
    try:
        for row in rows:
            chunk.append(row)
            total += 1
            if len(chunk) >= ROWS_PER_FILE:
                flush()
        if chunk or not written:
            flush()
        complete = True
    finally:
        if not complete:
            for path in written:
                os.remove(path)
    for stale in glob.glob(os.path.join(glob.escape(out_dir), "part-*.parquet")):
        os.remove(stale)
    for part, path in enumerate(written):
        os.replace(path, os.path.join(out_dir, f"part-{part:05d}.parquet"))
    return total


def journal_rows(rocks_path: str, since_ms: int = 0, store: str = "rocks") -> Iterator[DeliveryRow]:
    """Delivery rows from a RocksDB store's journal (read-only: works beside a server)."""
    for e in read_journal(rocks_path, since_ms):
        yield (
            e.topic,
            e.id,
            e.requested_deliver_at_ms,
            e.key_ms,
            e.delivered_ms,
            e.attempts,
            store,
            e.created_at_ms,
        )


def export(rocks_path: str, out_dir: str, since_ms: int = 0) -> int:
    return write_deliveries(out_dir, journal_rows(rocks_path, since_ms))
