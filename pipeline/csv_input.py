"""CSV input of the import: RFC 4180 records, and the rows whose fields do not fit the header.

Spark's CSV reader in permissive mode keeps the first fields of a record with too many
(silently dropping the rest) and pads one with too few; with ``columnNameOfCorruptRecord``
it also keeps such a record's text, and ``encode_csv_batches`` rejects it with the rule.
"""

from __future__ import annotations

import bz2
import csv
import glob
import gzip
import io
import os
from collections import deque
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any

import msgspec

from pipeline.encode import STATUS_REJECTED, encode_batches
from pipeline.input_files import CODEC_SUFFIXES, files_spark_reads
from storage.errors import InvalidInputError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

CORRUPT = "_corrupt_record"  # a CSV record's text when its fields do not fit the header


def read_csv(spark: SparkSession, path: str) -> DataFrame:
    """RFC 4180 (a quoted field may hold line breaks; a quote inside one is doubled), every
    column text, named by the header. A record whose field count is not the header's keeps
    its text in ``CORRUPT`` (Spark would otherwise drop the extra fields silently).

    Spark names the columns by one file's header and reads every file's fields by
    position: files whose headers differ are refused (``check_csv_headers``) rather than
    read into the wrong columns; ``enforceSchema`` off makes Spark itself fail on such a
    file where the driver cannot see it (a URL input)."""
    from pyspark.sql.types import StringType, StructField, StructType

    check_csv_headers(path)
    reader = (
        spark.read.option("header", True)
        .option("multiLine", True)  # also makes a file one split: rows number in file order
        .option("inferSchema", False)
        .option("escape", '"')
        .option("enforceSchema", False)
    )
    header = reader.csv(path).schema.fieldNames()  # the first file's header, as text
    schema = StructType([StructField(name, StringType()) for name in [*header, CORRUPT]])
    return (
        reader.schema(schema)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .csv(path)
    )


# Hadoop's codecs that Python reads too; a file compressed otherwise is left to Spark
_OPENERS: dict[str, Callable[..., IO[str]]] = {".gz": gzip.open, ".bz2": bz2.open}


def _local_files(path: str) -> list[str]:
    """The local files Spark reads for ``path`` (a file, a directory or a glob); none for a
    URL, which only the cluster can see."""
    if "://" in path and not path.startswith("file://"):
        return []
    files: list[str] = []
    for match in sorted(glob.glob(path.removeprefix("file://"))):
        if os.path.isdir(match):
            files.extend(os.path.join(match, name) for name in files_spark_reads(match))
        else:
            files.append(match)
    return files


def _header_of(file: str) -> list[str] | None:
    """The first CSV record of ``file`` (None: empty, unreadable or compressed otherwise),
    without a UTF-8 byte order mark, as Spark reads it."""
    suffix = os.path.splitext(file)[1].lower()
    if suffix in CODEC_SUFFIXES and suffix not in _OPENERS:
        return None
    opener = _OPENERS.get(suffix, open)
    try:
        with opener(file, "rt", encoding="utf-8-sig", errors="replace", newline="") as f:
            return next(csv.reader(f), None)
    except (OSError, EOFError, csv.Error):
        return None


def check_csv_headers(path: str) -> None:
    """InvalidInputError naming ``input`` when two local CSV files Spark would read for
    ``path`` have different headers: Spark would read the second by the first's columns."""
    first: tuple[str, list[str]] | None = None
    for file in _local_files(path):
        header = _header_of(file)
        if header is None:
            continue
        if first is None:
            first = (file, header)
        elif header != first[1]:
            raise InvalidInputError(
                f"input {file} has the header {','.join(header)} but {first[0]} has "
                f"{','.join(first[1])}: every CSV file of an input must have the same header "
                "(Spark reads each file's fields by position)",
                field="input",
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
