"""The bulk import job (driver side): input rows -> sorted SST files in a staged directory.

Plan: read the input (one split per task) -> encode every row with the store's codec on
the executors (``pipeline.sst.encode_batches``; rejects keep their reason) -> persist ->
keep the last row per (topic, id) in input order (files by name, then position) ->
range-partition by key, sort within partitions and write one SST per partition, once for
``ids`` (by identity) and once for ``timers`` (by time). The driver then writes the
rejects in the input's format and the manifest that ``storage.rocks.ingest`` reads.

The staged directory must be reachable by the executors and by whoever ingests (on a
cluster: a shared volume).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec

from pipeline import rejects
from pipeline.rows import JobTimes, Limits
from pipeline.sst import (
    ENCODED_SCHEMA,
    STATUS_REJECTED,
    STATUS_VALID,
    encode_partition,
    write_partition,
)
from storage.rocks.ingest import Manifest, StagedFile, write_manifest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FORMATS = ("parquet", "csv", "jsonl")
KEYS_PER_FILE = 1_000_000

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
    name = path.rstrip("/").lower()
    for suffix, fmt in ((".parquet", "parquet"), (".csv", "csv"), (".jsonl", "jsonl")):
        if name.endswith(suffix) or name.endswith(suffix + ".gz"):
            return fmt
    if name.endswith(".json") or name.endswith(".ndjson"):
        return "jsonl"
    return "parquet"


def read_input(spark: SparkSession, path: str, fmt: str) -> DataFrame:
    from pyspark.sql import functions as F

    if fmt == "parquet":
        df = spark.read.parquet(path)
    elif fmt == "csv":
        df = (  # RFC 4180: a quote inside a quoted field is doubled
            spark.read.option("header", True)
            .option("inferSchema", False)
            .option("escape", '"')
            .csv(path)
        )
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


def run_import(
    spark: SparkSession,
    input_path: str,
    stage_dir: str,
    *,
    fmt: str | None = None,
    times: JobTimes,
    limits: Limits | None = None,
    partitions: int | None = None,
    rejects_path: str | None = None,
    progress: Progress = lambda message: None,
) -> ImportSummary:
    """Stage ``input_path`` as SST files plus a manifest in ``stage_dir``."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    fmt = fmt or guess_format(input_path)
    limits = limits or Limits()
    started = time.perf_counter()
    phases: dict[str, float] = {}

    def phase(name: str, since: float) -> float:
        now = time.perf_counter()
        phases[name] = round(now - since, 3)
        progress(f"{name}: {phases[name]:.1f} s")
        return now

    os.makedirs(stage_dir, exist_ok=True)
    source = read_input(spark, input_path, fmt)
    original_columns = [c for c in source.columns if c not in ("_file", "_block")]
    encode = partial(
        encode_partition, fmt=fmt, columns=original_columns, times=times, limits=limits
    )
    encoded = spark.createDataFrame(
        source.rdd.mapPartitions(encode), ENCODED_SCHEMA, verifySchema=False
    ).persist(StorageLevel.MEMORY_AND_DISK)
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
    mark = phase("read and encode", started)
    progress(f"rows read {accepted + rejected}, accepted {accepted}, rejected {rejected}")

    rejects_path = rejects_path or os.path.join(stage_dir, f"rejects.{fmt}")
    if rejected:
        offsets = _row_offsets(blocks)
        rows = (
            (
                r["raw"],
                r["reason"],
                r["file"],
                offsets[(r["file"], r["block"])] + r["idx"] + 1,
            )
            for r in encoded.filter(F.col("status") == STATUS_REJECTED)
            .select("file", "block", "idx", "reason", "raw")
            .orderBy("file", "block", "idx")
            .toLocalIterator()
        )
        rejects.write(rejects_path, fmt, original_columns, rows)
        mark = phase("rejects", mark)

    winners = (
        encoded.filter(F.col("status") == STATUS_VALID)
        .groupBy("ikey")
        .agg(
            F.max_by(
                F.struct("tkey", "tval", "ival", "topic"), F.struct("file", "block", "idx")
            ).alias("w"),
            F.count("*").alias("n"),
        )
        .select("ikey", "w.tkey", "w.tval", "w.ival", "w.topic", "n")
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    by_topic = winners.groupBy("topic").agg(F.count("*").alias("timers"), F.sum("n").alias("rows"))
    per_topic = {r["topic"]: int(r["timers"]) for r in by_topic.collect()}
    encoded.unpersist()
    distinct = sum(per_topic.values())
    mark = phase("last row wins", mark)
    progress(f"distinct timers {distinct}, duplicates {accepted - distinct}")

    count = partitions or max(
        spark.sparkContext.defaultParallelism, math.ceil(distinct / KEYS_PER_FILE)
    )
    files: list[StagedFile] = []
    for family, key, value in (("ids", "ikey", "ival"), ("timers", "tkey", "tval")):
        if not distinct:
            break
        written = (
            winners.select(key, value)
            .repartitionByRange(count, key)
            .sortWithinPartitions(key)
            .rdd.mapPartitionsWithIndex(
                partial(write_partition, family=family, stage_dir=stage_dir)
            )
            .collect()
        )
        files.extend(
            StagedFile(f, path, n, size, first.hex(), last.hex())
            for f, path, n, size, first, last in sorted(written, key=lambda r: r[1])
        )
        mark = phase(f"write {family} SSTs", mark)
    winners.unpersist()

    manifest = Manifest(
        created_ms=times.now_ms,
        floor_ms=times.floor_ms,
        files=files,
        pending_by_topic=per_topic,
        rows_read=accepted + rejected,
        accepted=accepted,
        rejected=rejected,
        duplicates=accepted - distinct,
    )
    write_manifest(stage_dir, manifest)
    return ImportSummary(
        input=input_path,
        format=fmt,
        stage_dir=stage_dir,
        rejects_path=rejects_path if rejected else None,
        rows_read=accepted + rejected,
        accepted=accepted,
        rejected=rejected,
        duplicates=accepted - distinct,
        timers=distinct,
        files=len(files),
        bytes=sum(f.bytes for f in files),
        seconds=round(time.perf_counter() - started, 3),
        phases=phases,
    )
