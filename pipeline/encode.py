"""Input rows -> the codec's keys and values, as Arrow batches (``DataFrame.mapInArrow``).

Two halves:

* ``prevalidate`` (driver, Spark SQL): the checks SQL expresses natively, per column type:
  names against the charset (``rlike``), exactly one of ``deliver_at_ms`` / ``delay_ms``,
  integer ranges, ``delay_ms`` -> the deliver time, ``payload`` xor ``payload_b64``.
  It adds ``_ok`` (every such check passed) and ``_deliver_ms``. It never rejects a row:
* ``encode_batches`` (executors, Python): an ``_ok`` row takes the fast path (base64,
  sizes and headers checked by ``rows.payload_of`` / ``rows.headers_of``, then the codec);
  any other row, or one the fast path refuses, goes through ``rows.encode_row``, the full
  rules, which give the reject reason. So the reasons have one source, and SQL only decides
  which rows can skip the checks it already made. JSON Lines rows are parsed in Python
  (their values' types vary per row), so they all take ``encode_row``.

Each input row gives one output row of ``ENCODED_SCHEMA``: valid (keys and values),
rejected (reason and the row as JSON text) or blank (an empty JSON line), with its file,
block and position in the block, from which the driver numbers rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from pipeline.rows import (
    MAX_DELAY_MS,
    MAX_MS,
    JobTimes,
    Limits,
    Rejected,
    check_columns,
    encode_row,
    headers_of,
    payload_of,
)
from storage import records
from storage.names import NAME_CHARS, NAME_MAX_BYTES
from storage.rocks import keys as layout

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

STATUS_VALID, STATUS_REJECTED, STATUS_BLANK = 0, 1, 2

ENCODED_SCHEMA = (
    "status byte, file string, block long, idx long, reason string, raw string, "
    "ikey binary, ival binary, tkey binary, tval binary"
)
SAMPLE_EVERY = 200  # one key in so many goes to the driver for the range boundaries
NAMES = [f.split()[0] for f in ENCODED_SCHEMA.split(", ")]
# Java's `$` also matches before a final line break; `\z` is the very end.
NAME_PATTERN = f"^[{NAME_CHARS}]{{1,{NAME_MAX_BYTES}}}\\z"  # storage.names' rule, in Java
DIGITS_PATTERN = r"^[0-9]{1,15}\z"  # what int() surely reads the same as a SQL cast
# Added by the importer's reader, not the input's: each row's file and block, and the CSV
# reader's text of a record that does not fit the header (``csv_input.CORRUPT``).
INTERNAL_COLUMNS = ("_file", "_block", "_corrupt_record")

_json = msgspec.json.Encoder()


def prevalidate(df: DataFrame, times: JobTimes) -> DataFrame:
    """``df`` plus ``_ok`` and ``_deliver_ms`` (see the module docstring).

    An input column that is no timer field fails the import here, before any row is
    encoded (``rows.check_columns``: InvalidInputError naming the column).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    check_columns([f.name for f in df.schema.fields if f.name not in INTERNAL_COLUMNS])
    cols = _InputColumns({f.name: f.dataType for f in df.schema.fields})
    at, at_sure = cols.integer("deliver_at_ms")
    delay, delay_sure = cols.integer("delay_ms")
    deliver = F.when(cols.present("deliver_at_ms"), at).otherwise(F.lit(times.base_ms) + delay)
    ok = (
        cols.name_ok("topic")
        & cols.name_ok("id")
        & (cols.present("deliver_at_ms") != cols.present("delay_ms"))
        & at_sure
        & delay_sure
        & _in_range(at, MAX_MS)
        & _in_range(delay, MAX_DELAY_MS)
        & deliver.between(0, MAX_MS)
        & ~(cols.present("payload") & cols.present("payload_b64"))
        & cols.of_type("payload", T.StringType, T.BinaryType)
        & cols.of_type("payload_b64", T.StringType)
    )
    ok = F.coalesce(ok, F.lit(False))
    return df.select("*", ok.alias("_ok"), F.when(ok, deliver).alias("_deliver_ms"))


@dataclass(frozen=True)
class _InputColumns:
    """The checks on the input's columns, in SQL: each depends on its column's type, or absence."""

    kinds: dict[str, DataType]

    def present(self, name: str) -> Column:
        from pyspark.sql import functions as F

        return F.col(name).isNotNull() if name in self.kinds else F.lit(False)

    def name_ok(self, name: str) -> Column:
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        if not isinstance(self.kinds.get(name), T.StringType):
            return F.lit(False)  # absent or not text: encode_row says why
        return F.col(name).rlike(NAME_PATTERN)

    def integer(self, name: str) -> tuple[Column, Column]:
        """(value as long, whether the SQL value is surely what Python reads)."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        if name not in self.kinds:
            return F.lit(None).cast("long"), F.lit(True)
        col, kind = F.col(name), self.kinds[name]
        if isinstance(kind, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
            return col.cast("long"), F.lit(True)
        if isinstance(kind, T.StringType):
            digits = col.rlike(DIGITS_PATTERN)
            return F.when(digits, col.cast("long")), col.isNull() | digits
        return F.lit(None).cast("long"), col.isNull()

    def of_type(self, name: str, *allowed: type) -> Column:
        from pyspark.sql import functions as F

        if name not in self.kinds or isinstance(self.kinds[name], allowed):
            return F.lit(True)
        return ~self.present(name)


def _in_range(value: Column, most: int) -> Column:
    return value.isNull() | value.between(0, most)


def _positions(batch: pa.RecordBatch, counters: Counter[tuple[str, int]]) -> list[int]:
    """Each row's position within its (file, block), continuing across the task's batches."""
    import pyarrow.compute as pc

    files, blocks = batch.column("_file"), batch.column("_block")
    n = batch.num_rows
    first = (files[0].as_py(), blocks[0].as_py())
    if pc.all(pc.equal(files, files[0])).as_py() and pc.all(pc.equal(blocks, blocks[0])).as_py():
        start = counters[first]
        counters[first] = start + n
        return list(range(start, start + n))
    out = []
    for key in zip(files.to_pylist(), blocks.to_pylist(), strict=True):
        out.append(counters[key])
        counters[key] += 1
    return out


def _column(batch: pa.RecordBatch, name: str) -> list[Any]:
    i = batch.schema.get_field_index(name)
    return batch.column(i).to_pylist() if i >= 0 else [None] * batch.num_rows


def _plain_rows(batch: pa.RecordBatch, columns: list[str]) -> list[dict[str, Any]]:
    """The input rows as JSON-like dicts (maps as objects), as ``encode_row`` wants them."""
    import pyarrow as pa

    values = {}
    for name in columns:
        col = batch.column(name)
        items = col.to_pylist()
        if pa.types.is_map(col.type):
            items = [dict(v) if v is not None else None for v in items]
        values[name] = items
    return [dict(zip(columns, row, strict=True)) for row in zip(*values.values(), strict=True)]


class _Out:
    """The columns of one output batch, filled row by row."""

    def __init__(self) -> None:
        self.status: list[int] = []
        self.reason: list[str | None] = []
        self.raw: list[str | None] = []
        self.ikey: list[bytes | None] = []
        self.ival: list[bytes | None] = []
        self.tkey: list[bytes | None] = []
        self.tval: list[bytes | None] = []

    def valid(self, ikey: bytes, ival: bytes, tkey: bytes, tval: bytes) -> None:
        self.status.append(STATUS_VALID)
        self.reason.append(None)
        self.raw.append(None)
        self.ikey.append(ikey)
        self.ival.append(ival)
        self.tkey.append(tkey)
        self.tval.append(tval)

    def other(self, status: int, reason: str | None, raw: str | None) -> None:
        self.status.append(status)
        self.reason.append(reason)
        self.raw.append(raw)
        for col in (self.ikey, self.ival, self.tkey, self.tval):
            col.append(None)

    def full(
        self, row: dict[str, Any] | None, raw: str, times: JobTimes, limits: Limits, fmt: str
    ) -> None:
        """A row through ``encode_row``: valid, or rejected with the reason."""
        if row is None:
            self.other(STATUS_REJECTED, "not a JSON object", raw)
            return
        try:
            e = encode_row(row, times, limits, fmt)
        except Rejected as exc:
            self.other(STATUS_REJECTED, str(exc), raw or _json.encode(row).decode())
            return
        self.valid(e.ident_key, e.ids_value, e.timer_key, e.timer_value)

    def batch(self, source: pa.RecordBatch, idx: list[int]) -> pa.RecordBatch:
        import pyarrow as pa

        b = pa.binary()
        return pa.RecordBatch.from_arrays(
            [
                pa.array(self.status, pa.int8()),
                source.column("_file"),
                source.column("_block"),
                pa.array(idx, pa.int64()),
                pa.array(self.reason, pa.string()),
                pa.array(self.raw, pa.string()),
                *(pa.array(c, b) for c in (self.ikey, self.ival, self.tkey, self.tval)),
            ],
            names=NAMES,
        )


def _encode_jsonl(batch: pa.RecordBatch, out: _Out, times: JobTimes, limits: Limits) -> None:
    for line in batch.column("value").to_pylist():
        if not line.strip():
            out.other(STATUS_BLANK, None, None)
            continue
        try:
            row = msgspec.json.decode(line)
        except msgspec.DecodeError:
            row = None
        out.full(row if isinstance(row, dict) else None, line, times, limits, "jsonl")


def _encode_table(
    batch: pa.RecordBatch,
    out: _Out,
    columns: list[str],
    times: JobTimes,
    limits: Limits,
    fmt: str,
) -> None:
    ok = batch.column("_ok").to_pylist()
    slow = None if all(ok) else _plain_rows(batch, columns)
    deliver = batch.column("_deliver_ms").to_pylist()
    topics, ids = _column(batch, "topic"), _column(batch, "id")
    texts, b64s, headers = (_column(batch, c) for c in ("payload", "payload_b64", "headers"))
    now_ms, floor_ms = times.now_ms, times.floor_ms
    encode_new_timer, u64 = records.encode_new_timer, layout.u64
    ident_key, timer_key = layout.ident_key, layout.timer_key
    for i in range(batch.num_rows):
        if ok[i]:
            try:
                payload, binary = payload_of(texts[i], b64s[i], limits)
                h = headers_of(headers[i], limits, fmt) if headers[i] is not None else {}
            except Rejected:
                pass  # encode_row below gives the reason
            else:
                topic, timer_id = topics[i].encode(), ids[i].encode()
                requested_ms = deliver[i]
                key_ms = requested_ms if requested_ms > floor_ms else floor_ms
                value = encode_new_timer(payload, h, now_ms, requested_ms, binary)
                tkey = timer_key(key_ms, topic, timer_id)
                out.valid(ident_key(topic, timer_id), u64(key_ms), tkey, value)
                continue
        if slow is None:
            slow = _plain_rows(batch, columns)
        out.full(slow[i], "", times, limits, fmt)


def encode_batches(
    batches: Iterator[pa.RecordBatch],
    fmt: str,
    columns: list[str],
    times: JobTimes,
    limits: Limits,
    samples: Any = None,
) -> Iterator[pa.RecordBatch]:
    """One ``ENCODED_SCHEMA`` row per input row (one task's batches, in order).

    ``samples`` (an ``sst.Merge`` accumulator) receives every ``SAMPLE_EVERY``-th
    ``ids`` and ``timers`` key of the task: the driver's range boundaries of both families.
    """
    from pyspark import TaskContext

    counters: Counter[tuple[str, int]] = Counter()
    ikeys: list[bytes] = []
    tkeys: list[bytes] = []
    for batch in batches:
        if not batch.num_rows:
            continue
        idx = _positions(batch, counters)
        out = _Out()
        if fmt == "jsonl":
            _encode_jsonl(batch, out, times, limits)
        else:
            _encode_table(batch, out, columns, times, limits, fmt)
        ikeys.extend(k for k in out.ikey[::SAMPLE_EVERY] if k is not None)
        tkeys.extend(k for k in out.tkey[::SAMPLE_EVERY] if k is not None)
        yield out.batch(batch, idx)
    if samples is not None:
        context = TaskContext.get()
        samples.add({context.partitionId() if context else 0: (ikeys, tkeys)})
