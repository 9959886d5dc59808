"""CSV input of the import: RFC 4180 records, and the rows whose fields do not fit the header.

Spark's CSV reader in permissive mode keeps the first fields of a record with too many
(silently dropping the rest) and pads one with too few; with ``columnNameOfCorruptRecord``
it also keeps such a record's text, and ``encode_csv_batches`` rejects it with the rule.
"""

from __future__ import annotations

import csv
import io
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import msgspec

from pipeline.encode import STATUS_REJECTED, encode_batches

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

CORRUPT = "_corrupt_record"  # a CSV record's text when its fields do not fit the header


def read_csv(spark: SparkSession, path: str) -> DataFrame:
    """RFC 4180 (a quoted field may hold line breaks; a quote inside one is doubled), every
    column text, named by the header. A record whose field count is not the header's keeps
    its text in ``CORRUPT`` (Spark would otherwise drop the extra fields silently)."""
    from pyspark.sql.types import StringType, StructField, StructType

    reader = (
        spark.read.option("header", True)
        .option("multiLine", True)  # also makes a file one split: rows number in file order
        .option("inferSchema", False)
        .option("escape", '"')
    )
    header = reader.csv(path).schema.fieldNames()  # the first file's header, as text
    schema = StructType([StructField(name, StringType()) for name in [*header, CORRUPT]])
    return (
        reader.schema(schema)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .csv(path)
    )


def _field_count_rule(record: str, header: int) -> str:
    """The reject reason of a record Spark could not fit to the header."""
    fields = len(next(csv.reader(io.StringIO(record)), []))
    if fields > header:
        return f"the row has more fields than the header ({fields}, the header {header})"
    if fields < header:
        return f"the row has fewer fields than the header ({fields}, the header {header})"
    return "the row is not a valid CSV record"


def encode_csv_batches(
    batches: Iterator[pa.RecordBatch], columns: list[str], **options: Any
) -> Iterator[pa.RecordBatch]:
    """``encode_batches`` of CSV rows, then each record Spark marked in ``CORRUPT`` rejected.

    ``encode_batches`` yields one output batch per non-empty input batch, in order, and
    pulls the next input only after yielding: so ``seen`` holds that output's input."""
    seen: deque[pa.RecordBatch] = deque()

    def inputs() -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if batch.num_rows:
                seen.append(batch)
                yield batch

    for out in encode_batches(inputs(), fmt="csv", columns=columns, **options):
        yield _reject_corrupt(out, seen.popleft(), columns)


def _reject_corrupt(out: pa.RecordBatch, source: pa.RecordBatch, columns: list[str]) -> Any:
    import pyarrow as pa

    records = source.column(CORRUPT).to_pylist()
    if all(r is None for r in records):
        return out
    status, reason, raw = (out.column(c).to_pylist() for c in ("status", "reason", "raw"))
    for i, record in enumerate(records):
        if record is not None:
            status[i], reason[i] = STATUS_REJECTED, _field_count_rule(record, len(columns))
            raw[i] = msgspec.json.encode({c: source.column(c)[i].as_py() for c in columns}).decode()
    for name, values, kind in (
        ("status", status, pa.int8()),
        ("reason", reason, pa.string()),
        ("raw", raw, pa.string()),
    ):
        i = out.schema.get_field_index(name)
        out = out.set_column(i, name, pa.array(values, kind))
    return out
