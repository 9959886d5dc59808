"""The delivery analytics job: lateness and throughput from a delivery history.

Lateness of one delivery is ``delivered_at_ms - due_ms`` with ``due_ms`` the requested
time, or the creation time when the request was already past due (a past-due request
means "now"). Percentiles are exact (Spark's ``percentile``, linear interpolation between
closest ranks, as numpy's default). An early delivery is one before the requested time;
there must be none.

Output in the report directory: ``summary.parquet``, ``by_topic.parquet``,
``by_minute.parquet``, ``by_second.parquet``, ``report.md`` and PNG charts.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import msgspec

from pipeline import charts
from pipeline.analysis import Analysis, LatenessRow
from storage.errors import InvalidInputError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

QUANTILES = (0.5, 0.9, 0.99)


def _aggregates() -> list[Column]:
    from pyspark.sql import functions as F

    q = F.percentile("lateness_ms", list(QUANTILES))
    return [
        F.count("*").alias("deliveries"),
        F.sum(F.col("early").cast("long")).alias("early"),
        q[0].alias("p50_ms"),
        q[1].alias("p90_ms"),
        q[2].alias("p99_ms"),
        F.max("lateness_ms").alias("max_ms"),
    ]


def _rows(df: DataFrame, key: str) -> list[LatenessRow]:
    return [
        LatenessRow(
            str(r[key]),
            int(r["deliveries"]),
            int(r["early"]),
            float(r["p50_ms"]),
            float(r["p90_ms"]),
            float(r["p99_ms"]),
            int(r["max_ms"]),
        )
        for r in df.orderBy(key).collect()
    ]


def load(spark: SparkSession, path: str) -> DataFrame:
    from pyspark.sql import functions as F

    df = spark.read.parquet(path)
    created = F.col("created_at_ms") if "created_at_ms" in df.columns else F.lit(None)
    due = F.greatest(
        F.col("deliver_at_ms"), F.coalesce(created.cast("long"), F.col("deliver_at_ms"))
    )
    return df.select(
        "topic",
        "delivered_at_ms",
        (F.col("delivered_at_ms") - due).alias("lateness_ms"),
        (F.col("delivered_at_ms") < F.col("deliver_at_ms")).alias("early"),
        (F.col("delivered_at_ms") - F.col("delivered_at_ms") % 60_000).alias("minute_ms"),
        F.floor(F.col("delivered_at_ms") / 1000).alias("second"),
    )


def analyze(spark: SparkSession, deliveries: str, report_dir: str) -> Analysis:
    from pyspark import StorageLevel

    started = time.perf_counter()
    os.makedirs(report_dir, exist_ok=True)
    df = load(spark, deliveries).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        analysis, per_second = _summarise(df, deliveries, report_dir)
    finally:
        df.unpersist()
    pictures = charts.draw(report_dir, analysis, per_second)
    analysis = msgspec.structs.replace(
        analysis,
        seconds=round(time.perf_counter() - started, 3),
        files=[*analysis.files, *pictures, "report.md"],
    )
    charts.write_markdown(os.path.join(report_dir, "report.md"), deliveries, analysis, pictures)
    return analysis


def _summarise(
    df: DataFrame, deliveries: str, report_dir: str
) -> tuple[Analysis, list[tuple[int, int]]]:
    """The loaded history's aggregates, written as Parquet files; the analysis, per-second counts.

    ``seconds`` is left at 0 and ``files`` names the Parquet files only: ``analyze`` adds the
    time taken, the charts and ``report.md``.
    """
    overall_df = _overall(df)
    first = overall_df.collect()[0]
    if not first["deliveries"]:
        raise InvalidInputError(  # not exit 1, which means early deliveries
            f"no deliveries in {deliveries}: nothing to analyze", field="deliveries"
        )
    outputs = {"summary": overall_df, **_breakdowns(df)}
    _write_parquet(outputs, report_dir)
    per_second = [
        (int(r["second"]), int(r["deliveries"]))
        for r in outputs["by_second"].orderBy("second").collect()
    ]
    minutes = _rows(outputs["by_minute"], "minute_ms")
    # the seconds from the first delivery's through the last's, both counted (as
    # ``by_second`` counts them): so the mean never exceeds the peak second
    span_s = first["last"] // 1000 - first["first"] // 1000 + 1
    analysis = Analysis(
        overall=_rows(overall_df, "key")[0],
        by_topic=_rows(outputs["by_topic"], "topic"),
        by_minute=minutes,
        first_delivered_ms=int(first["first"]),
        last_delivered_ms=int(first["last"]),
        mean_per_s=round(first["deliveries"] / span_s, 1),
        peak_per_s=max(count for _, count in per_second),
        seconds=0.0,
        files=[f"{name}.parquet" for name in outputs],
    )
    return analysis, per_second


def _overall(df: DataFrame) -> DataFrame:
    """One row keyed ``all``: the whole history's aggregates, its first and last delivery."""
    from pyspark.sql import functions as F

    return df.agg(
        *_aggregates(),
        F.min("delivered_at_ms").alias("first"),
        F.max("delivered_at_ms").alias("last"),
    ).withColumn("key", F.lit("all"))


def _breakdowns(df: DataFrame) -> dict[str, DataFrame]:
    from pyspark.sql import functions as F

    return {
        "by_topic": df.groupBy("topic").agg(*_aggregates()),
        "by_minute": df.groupBy("minute_ms").agg(*_aggregates()),
        "by_second": df.groupBy("second").agg(F.count("*").alias("deliveries")),
    }


def _write_parquet(outputs: dict[str, DataFrame], report_dir: str) -> None:
    """Each frame as ``<name>.parquet`` in ``report_dir``, one file each."""
    for name, frame in outputs.items():
        frame.coalesce(1).write.mode("overwrite").parquet(
            os.path.join(report_dir, f"{name}.parquet")
        )


def to_dict(analysis: Analysis) -> dict[str, Any]:
    return dict(msgspec.to_builtins(analysis))
