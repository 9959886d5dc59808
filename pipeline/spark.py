"""Spark session setup shared by the jobs (PySpark is imported only when a job runs)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from storage.errors import InvalidInputError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
}

LOCAL_DRIVER_MEMORY = "6g"  # local masters only; --conf spark.driver.memory=... overrides


def run_workers_on_this_interpreter() -> None:
    """Make a local master's Python workers run this interpreter (and its packages).

    PySpark's driver takes the workers' interpreter from ``PYSPARK_PYTHON`` alone
    (``pyspark/core/context.py``: ``os.environ.get("PYSPARK_PYTHON", "python3")``); the
    ``spark.pyspark.python`` setting is read only by ``spark-submit``. Without this a
    local job's workers start the system ``python3``, which lacks msgspec. A value the
    user set is kept.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@contextmanager
def spark_session(
    master: str | None, app_name: str, conf: Mapping[str, str] | None = None
) -> Iterator[SparkSession]:
    """A session for one job; stopped at the end only if this call started it.

    ``master`` None leaves the choice to ``spark-submit``. An already active session (a
    test's, or the one spark-submit made) is reused and left running.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    if master and master.startswith("local"):
        # executors are this machine: run them on this interpreter, few shuffle partitions
        run_workers_on_this_interpreter()
        builder = builder.config("spark.sql.shuffle.partitions", "8")
        # the driver is the executor: room to cache the encoded rows of millions of timers
        builder = builder.config("spark.driver.memory", LOCAL_DRIVER_MEMORY)
    for key, value in {**DEFAULTS, **(conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    try:
        yield session
    finally:
        session.stop()


# Spark's error class for an input file it cannot read (not Parquet, truncated, ...), and
# the first line of its message
_FAILED_READ = re.compile(r"\[FAILED_READ_FILE[.\w]*\] ([^\n]*)")


@contextmanager
def input_read_errors(field: str, path: str) -> Iterator[None]:
    """An input file Spark cannot read (a CSV file named ``*.parquet``, a truncated file)
    as InvalidInputError naming ``field``, ``path`` and Spark's reason: one line for the
    console script, not a JVM and Python trace. Any other Spark error passes unchanged."""
    from py4j.protocol import Py4JJavaError

    try:
        yield
    except Py4JJavaError as exc:
        found = _FAILED_READ.search(str(exc))
        if found is None:
            raise
        raise InvalidInputError(
            f"cannot read {field} {path}: {found.group(1).strip()}", field=field
        ) from None
