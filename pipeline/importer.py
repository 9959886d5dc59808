"""The bulk import job (driver side): input rows -> sorted SST files in a staged directory.

Rows cross between the JVM and Python only as Arrow batches (``mapInArrow``):

1. read the input -> ``encode.prevalidate`` (the checks Spark SQL expresses natively) ->
   ``encode.encode_batches`` on the executors (the store's codec; rejects keep their
   reason; every 200th key of both families goes to an accumulator as a sample) ->
   persisted; one small aggregate per (file, block) counts the rows (and numbers the
   rejects' rows), which also fills the cache;
2. last row per (topic, id) in input order (files by name, then position): the valid rows
   go to ``ids`` key ranges cut at the sampled boundaries (``repartitionById``: no sampling
   job), where a window (``row_number`` per identity, latest first) keeps one row each;
   the range already clusters each identity, so the window adds no shuffle, and its sort
   is the ``ids`` order;
3. in the same action, ``sst.write_ids`` writes each partition's ``ids`` SST and passes the
   winners' ``timers`` pairs on to ``timers`` key ranges (the other boundaries), sorted
   within partitions, where ``sst.write_timers`` writes one SST each.

So the encoded rows are made once, read back once, and shuffled twice. The driver then
writes the rejects in the input's format and the manifest that ``storage.rocks.ingest``
reads. The staged directory must be reachable by the executors and by whoever ingests (on
a cluster: a shared volume).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from app.timer_requests import RequestLimits
from pipeline import rejects
from pipeline.csv_input import CORRUPT, encode_csv_batches, read_csv
from pipeline.encode import (
    ENCODED_SCHEMA,
    STATUS_REJECTED,
    STATUS_VALID,
    encode_batches,
    prevalidate,
)
from pipeline.input_files import format_of_name
from pipeline.rows import JobTimes, Limits
from pipeline.sst import STATS_SCHEMA, merge_accumulator, write_ids, write_timers
from storage.rocks.ingest import Manifest, StagedFile, write_manifest

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

FORMATS = ("parquet", "csv", "jsonl")
KEYS_PER_FILE = 1_000_000
JOB_CONF = {  # set for the job, restored after it
    # rows per Arrow batch between the JVM and the Python workers
    "spark.sql.execution.arrow.maxRecordsPerBatch": "20000",
    # the encoded rows are cached once and read twice: building the compressed cache of
    # a million rows took 8 s against 4.5 to 5.3 s uncompressed (about what encoding alone
    # takes); the file name, the one repetitive column, is small either way
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
}

Progress = Callable[[str], None]


class ImportSummary(msgspec.Struct, frozen=True):
    input: str
    format: str
    stage_dir: str
    rejects_path: str | None
    rows_read: int
    accepted: int  # valid rows, duplicates included
    rejected: int
    duplicates: int  # valid rows replaced by a later row of the same (topic, id)
    timers: int  # distinct timers staged
    files: int
    bytes: int
    seconds: float
    phases: dict[str, float]


def guess_format(path: str) -> str:
    """The format the input's name says (``input_files.FORMAT_SUFFIXES``), else Parquet."""
    return format_of_name(path.rstrip("/")) or "parquet"


def read_input(spark: SparkSession, path: str, fmt: str) -> DataFrame:
    from pyspark.sql import functions as F

    if fmt == "parquet":
        df = spark.read.parquet(path)
    elif fmt == "csv":
        df = read_csv(spark, path)
    elif fmt == "jsonl":
        df = spark.read.text(path)
    else:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    return df.select(
        "*", F.input_file_name().alias("_file"), F.input_file_block_start().alias("_block")
    )


def _row_offsets(blocks: list[Any]) -> dict[tuple[str, int], int]:
    """Rows before each (file, block): the row number of a row is offset + idx + 1."""
    offsets: dict[tuple[str, int], int] = {}
    running: dict[str, int] = {}
    for row in sorted(blocks, key=lambda r: (r["file"], r["block"])):
        offsets[(row["file"], row["block"])] = running.get(row["file"], 0)
        running[row["file"]] = running.get(row["file"], 0) + row["lines"]
    return offsets


def boundaries(samples: list[bytes], count: int) -> list[bytes]:
    """``count - 1`` split keys: partition i takes the keys in [bound i-1, bound i)."""
    ordered = sorted(samples)
    if not ordered:
        return []
    return [ordered[len(ordered) * i // count] for i in range(1, count)]


def partition_of(column: str, bounds: list[bytes]) -> Column:
    """The range partition of each key: how many boundaries are at or below it."""
    from pyspark.sql import functions as F

    part = F.lit(0)
    for bound in bounds:
        part = part + (F.col(column) >= F.lit(bound)).cast("int")
    return part.cast("int")


def _write_families(
    encoded: DataFrame, count: int, stage_dir: str, samples: dict[int, Any], ids_stats: Any
) -> DataFrame:
    """Last row wins, then both families' SSTs, in one chain of two shuffles:

    valid rows -> by ``ids`` key range (boundaries from the encoding's samples, no sampling
    job) -> window: the latest row per identity -> ``ids`` SSTs (stats to ``ids_stats``),
    passing the winners' ``timers`` pairs on -> by ``timers`` key range -> sort ->
    ``timers`` SSTs, one stats row each.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ikey_bounds = boundaries([k for ikeys, _ in samples.values() for k in ikeys], count)
    tkey_bounds = boundaries([k for _, tkeys in samples.values() for k in tkeys], count)
    latest_first = Window.partitionBy("_p", "ikey").orderBy(
        F.col("file").desc(), F.col("block").desc(), F.col("idx").desc()
    )
    winners = (
        encoded.filter(F.col("status") == STATUS_VALID)
        .select(
            "ikey",
            "ival",
            "tkey",
            "tval",
            "file",
            "block",
            "idx",
            partition_of("ikey", ikey_bounds).alias("_p"),
        )
        .repartitionById(count, "_p")
        .withColumn("_n", F.row_number().over(latest_first))
        .filter(F.col("_n") == 1)
        .sortWithinPartitions("_p", "ikey")  # the window's order already: no sort
        .select("ikey", "ival", "tkey", "tval")
    )
    timers = winners.mapInArrow(
        partial(write_ids, stage_dir=stage_dir, stats=ids_stats), "tkey binary, tval binary"
    )
    return (
        timers.withColumn("_p", partition_of("tkey", tkey_bounds))
        .repartitionById(count, "_p")
        .sortWithinPartitions("tkey")
        .select("tkey", "tval")
        .mapInArrow(partial(write_timers, stage_dir=stage_dir), STATS_SCHEMA)
    )


@contextmanager
def _job_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    before: dict[str, str | None] = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def run_import(
    spark: SparkSession, input_path: str, stage_dir: str, **options: Any
) -> ImportSummary:
    """Stage ``input_path`` as SST files plus a manifest in ``stage_dir`` (see ``stage``)."""
    with _job_conf(spark, JOB_CONF):
        return stage(spark, input_path, stage_dir, **options)


def limits_of(request: RequestLimits) -> Limits:
    """The service's request limits, as the executors check them on every row."""
    return request.record_limits()


class _Phases:
    """Seconds per job phase, each measured from the end of the one before."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.started = self.mark = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def done(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self.mark, 3)
        self.progress(f"{name}: {self.seconds[name]:.1f} s")
        self.mark = now

    def total(self) -> float:
        return round(time.perf_counter() - self.started, 3)


class _Encoded(NamedTuple):
    """The encoded rows (persisted) and what encoding them gathered on the way."""

    frame: DataFrame
    columns: list[str]  # the input's own columns, for the rejects file
    samples: Any  # accumulator: sampled keys of both families
    ids_stats: Any  # accumulator: the ids SSTs' statistics
    accepted: int
    rejected: int
    blocks: list[Any]  # per (file, block): lines, valid, rejected


def _encode(
    spark: SparkSession, input_path: str, fmt: str, times: JobTimes, limits: Limits
) -> _Encoded:
    """Read and encode every row (persisted), then count each block's valid and rejected."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    source = read_input(spark, input_path, fmt)
    columns = [c for c in source.columns if c not in ("_file", "_block", CORRUPT)]
    if fmt != "jsonl":
        source = prevalidate(source, times)  # CORRUPT is one of encode.INTERNAL_COLUMNS
    sc = spark.sparkContext
    samples, ids_stats = merge_accumulator(sc), merge_accumulator(sc)
    encoder = encode_csv_batches if fmt == "csv" else partial(encode_batches, fmt=fmt)
    encode = partial(encoder, columns=columns, times=times, limits=limits, samples=samples)
    encoded = source.mapInArrow(encode, ENCODED_SCHEMA).persist(StorageLevel.MEMORY_AND_DISK)
    blocks = (
        encoded.groupBy("file", "block")
        .agg(
            F.count("*").alias("lines"),
            F.sum((F.col("status") == STATUS_VALID).cast("long")).alias("valid"),
            F.sum((F.col("status") == STATUS_REJECTED).cast("long")).alias("rejected"),
        )
        .collect()
    )
    accepted = sum(r["valid"] or 0 for r in blocks)
    rejected = sum(r["rejected"] or 0 for r in blocks)
    return _Encoded(encoded, columns, samples, ids_stats, accepted, rejected, blocks)


def _write_rejects(encoded: _Encoded, path: str, fmt: str) -> None:
    """The rejected rows in the input's format, in input order, each with its line."""
    from pyspark.sql import functions as F

    offsets = _row_offsets(encoded.blocks)
    rows = (
        (r["raw"], r["reason"], r["file"], offsets[(r["file"], r["block"])] + r["idx"] + 1)
        for r in encoded.frame.filter(F.col("status") == STATUS_REJECTED)
        .select("file", "block", "idx", "reason", "raw")
        .orderBy("file", "block", "idx")
        .toLocalIterator()
    )
    rejects.write(path, fmt, encoded.columns, rows)


def _stage_files(
    spark: SparkSession, encoded: _Encoded, stage_dir: str, partitions: int | None
) -> tuple[list[StagedFile], dict[str, int]]:
    """Write both families' SST files; return them and the distinct timers per topic."""
    count = partitions or max(
        spark.sparkContext.defaultParallelism, math.ceil(encoded.accepted / KEYS_PER_FILE)
    )
    written = _write_families(
        encoded.frame, count, stage_dir, encoded.samples.value, encoded.ids_stats
    )
    timer_files = [tuple(r) for r in written.collect()]
    files: list[StagedFile] = []
    per_topic: dict[str, int] = {}
    for family, path, n, size, first, last, topics in sorted(
        [*encoded.ids_stats.value.values(), *timer_files], key=lambda r: (r[0], r[1])
    ):
        files.append(StagedFile(family, path, n, size, first.hex(), last.hex()))
        if family == "ids":
            for topic, k in msgspec.json.decode(topics).items():
                per_topic[topic] = per_topic.get(topic, 0) + k
    return files, per_topic


def stage(
    spark: SparkSession,
    input_path: str,
    stage_dir: str,
    *,
    fmt: str | None = None,
    times: JobTimes,
    limits: Limits,
    partitions: int | None = None,
    rejects_path: str | None = None,
    progress: Progress = lambda message: None,
) -> ImportSummary:
    """Stage ``input_path`` as SST files plus a manifest in ``stage_dir``."""
    fmt = fmt or guess_format(input_path)
    phases = _Phases(progress)
    os.makedirs(stage_dir, exist_ok=True)
    encoded = _encode(spark, input_path, fmt, times, limits)
    accepted, rejected = encoded.accepted, encoded.rejected
    phases.done("read and encode")
    progress(f"rows read {accepted + rejected}, accepted {accepted}, rejected {rejected}")
    rejects_path = rejects_path or os.path.join(stage_dir, f"rejects.{fmt}")
    if rejected:
        _write_rejects(encoded, rejects_path, fmt)
        phases.done("rejects")
    files: list[StagedFile] = []
    per_topic: dict[str, int] = {}
    if accepted:
        files, per_topic = _stage_files(spark, encoded, stage_dir, partitions)
        phases.done("last row wins and SSTs")
    encoded.frame.unpersist()
    distinct = sum(per_topic.values())
    progress(f"distinct timers {distinct}, duplicates {accepted - distinct}, files {len(files)}")
    counts = _RowCounts(accepted, rejected, distinct)
    write_manifest(stage_dir, _manifest(times, files, per_topic, counts))
    return ImportSummary(
        input=input_path,
        format=fmt,
        stage_dir=stage_dir,
        rejects_path=rejects_path if rejected else None,
        rows_read=accepted + rejected,
        accepted=accepted,
        rejected=rejected,
        duplicates=counts.duplicates,
        timers=distinct,
        files=len(files),
        bytes=sum(f.bytes for f in files),
        seconds=phases.total(),
        phases=phases.seconds,
    )


@dataclass(frozen=True)
class _RowCounts:
    accepted: int
    rejected: int
    distinct: int  # accepted timers after last-row-wins

    @property
    def duplicates(self) -> int:
        return self.accepted - self.distinct


def _manifest(
    times: JobTimes, files: list[StagedFile], per_topic: dict[str, int], counts: _RowCounts
) -> Manifest:
    return Manifest(
        created_at_ms=times.now_ms,
        floor_ms=times.floor_ms,
        files=files,
        pending_by_topic=per_topic,
        rows_read=counts.accepted + counts.rejected,
        accepted=counts.accepted,
        rejected=counts.rejected,
        duplicates=counts.duplicates,
    )
