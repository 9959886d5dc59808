"""A real local Spark session per test module (``local[2]``), for tests marked ``spark``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.spark import run_workers_on_this_interpreter


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    run_workers_on_this_interpreter()  # `pytest` alone must work, not only `make test`
    session = (
        SparkSession.builder.master("local[2]")
        .appName("timerstore-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
