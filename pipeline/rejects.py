"""The rejects output: every invalid input row, in the input's format, with reason and row.

Each reject carries the original row plus ``reject_reason``, ``reject_row`` (1-based:
the line for JSON Lines, the data record after the header for CSV, the row for Parquet,
counted within its file) and ``reject_file``. JSON Lines keeps the original object (or,
for a line that is no JSON object, its text under ``line``); CSV keeps the original
columns; Parquet stores the original columns as text (JSON for non-string values), since
one column may hold values of several types among invalid rows.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable
from typing import Any

import msgspec

from pipeline.rows import REJECT_COLUMNS

EXTRA = REJECT_COLUMNS
CHUNK = 10_000

RejectRow = tuple[str, str, str, int]  # raw, reason, file, row number


def _parsed(raw: str) -> dict[str, Any] | None:
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, dict) else None


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return msgspec.json.encode(value).decode()


def write(path: str, fmt: str, columns: list[str], rows: Iterable[RejectRow]) -> int:
    """Write the rejects; return how many."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if fmt == "jsonl":
        return _write_jsonl(path, rows)
    if fmt == "csv":
        return _write_csv(path, columns, rows)
    return _write_parquet(path, columns, rows)


def _write_jsonl(path: str, rows: Iterable[RejectRow]) -> int:
    count = 0
    with open(path, "wb") as f:
        for raw, reason, file, row in rows:
            obj = _parsed(raw)
            record: dict[str, Any] = dict(obj) if obj is not None else {"line": raw}
            record.update(zip(EXTRA, (reason, row, file), strict=True))
            f.write(msgspec.json.encode(record) + b"\n")
            count += 1
    return count


def _write_csv(path: str, columns: list[str], rows: Iterable[RejectRow]) -> int:
    count = 0
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow([*columns, *EXTRA])
        for raw, reason, file, row in rows:
            obj = _parsed(raw) or {}
            writer.writerow([_text(obj.get(c)) or "" for c in columns] + [reason, row, file])
            count += 1
    return count


def _write_parquet(path: str, columns: list[str], rows: Iterable[RejectRow]) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [(c, pa.string()) for c in columns]
        + [("reject_reason", pa.string()), ("reject_row", pa.int64()), ("reject_file", pa.string())]
    )
    count = 0
    with pq.ParquetWriter(path, schema) as writer:
        chunk: list[dict[str, Any]] = []
        for raw, reason, file, row in rows:
            obj = _parsed(raw) or {}
            record: dict[str, Any] = {c: _text(obj.get(c)) for c in columns}
            record.update(zip(EXTRA, (reason, row, file), strict=True))
            chunk.append(record)
            if len(chunk) >= CHUNK:
                writer.write_table(pa.Table.from_pylist(chunk, schema=schema))
                count += len(chunk)
                chunk = []
        if chunk:
            writer.write_table(pa.Table.from_pylist(chunk, schema=schema))
            count += len(chunk)
    return count
