"""Executor side of the import: input rows -> the codec's keys and values -> SST files."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import msgspec

from pipeline.rows import JobTimes, Limits, Rejected, encode_row

STATUS_VALID, STATUS_REJECTED, STATUS_BLANK = 0, 1, 2

ENCODED_SCHEMA = (
    "status byte, file string, block long, idx long, reason string, raw string, "
    "topic string, ikey binary, ival binary, tkey binary, tval binary"
)

_json = msgspec.json.Encoder()


def _source_rows(
    rows: Iterator[Any], fmt: str, columns: list[str]
) -> Iterator[tuple[str, int, dict[str, Any] | None, str]]:
    """(file, block, row or None when unreadable, raw text) for each input Row."""
    for r in rows:
        file, block = r["_file"], r["_block"]
        if fmt == "jsonl":
            line = r["value"]
            try:
                row = msgspec.json.decode(line) if line.strip() else {}
            except msgspec.DecodeError:
                row = None
            yield file, block, row if isinstance(row, dict) else None, line
        else:
            yield file, block, {c: _plain(r[c]) for c in columns}, ""


def _plain(value: Any) -> Any:
    """Spark Row values as JSON-like Python: maps arrive as dicts, binary as bytearray."""
    if isinstance(value, bytearray):
        return bytes(value)
    if hasattr(value, "asDict"):  # a struct column (JSON objects read by Spark)
        return value.asDict()
    return value


def encode_partition(
    rows: Iterator[Any], fmt: str, columns: list[str], times: JobTimes, limits: Limits
) -> Iterator[tuple[Any, ...]]:
    """One output tuple (ENCODED_SCHEMA) per input row, valid or rejected with a reason."""
    positions: Counter[tuple[str, int]] = Counter()
    for file, block, row, raw in _source_rows(rows, fmt, columns):
        idx = positions[(file, block)]
        positions[(file, block)] += 1
        if fmt == "jsonl" and not raw.strip():
            yield (STATUS_BLANK, file, block, idx, None, None, *_NO_VALUE)
            continue
        if row is None:
            yield (STATUS_REJECTED, file, block, idx, "not a JSON object", raw, *_NO_VALUE)
            continue
        try:
            e = encode_row(row, times, limits)
        except Rejected as exc:
            raw = raw if fmt == "jsonl" else _json.encode(row).decode()
            yield (STATUS_REJECTED, file, block, idx, str(exc), raw, *_NO_VALUE)
            continue
        yield (
            STATUS_VALID,
            file,
            block,
            idx,
            None,
            None,
            e.topic,
            e.ident_key,
            e.ids_value,
            e.timer_key,
            e.timer_value,
        )


_NO_VALUE = (None, None, None, None, None)


def write_partition(
    partition: int, rows: Iterator[Any], family: str, stage_dir: str
) -> Iterator[tuple[str, str, int, int, bytes, bytes]]:
    """Write one partition's sorted (key, value) rows into one SST file; yield its stats."""
    import rocksdict as rd

    from storage.rocks.ingest import sst_options

    relative = f"{family}/part-{partition:05d}.sst"
    path = os.path.join(stage_dir, relative)
    writer: rd.SstFileWriter | None = None
    first = last = b""
    entries = 0
    for key, value in rows:
        last = bytes(key)
        if writer is None:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            writer = rd.SstFileWriter(sst_options())
            writer.open(path + ".tmp")
            first = last
        writer[last] = bytes(value)
        entries += 1
    if writer is None:
        return
    writer.finish()
    del writer
    os.replace(path + ".tmp", path)  # a retried task overwrites, never half-writes
    yield (family, relative, entries, os.path.getsize(path), first, last)
