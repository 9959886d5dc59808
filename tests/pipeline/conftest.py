"""One real local Spark session (``local[2]``) a process, for tests marked ``spark``.

It is started by the first test that asks for it and stopped with its JVM at the end of
the run: a JVM start is several seconds, and nothing a test does to the session outlives
its job (each job reads and writes its own tmp_path). Under pytest-xdist each worker
that runs a module using it starts one (at most ``PYTEST_WORKERS`` JVMs a run, against
one a module before)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.spark import run_workers_on_this_interpreter


@pytest.fixture(scope="session")
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
    _stop_the_jvm()


def _stop_the_jvm() -> None:
    """End the py4j gateway and its JVM, which ``session.stop()`` leaves running until the
    interpreter exits; the next ``getOrCreate`` launches a new one. Safe to call when no
    gateway is up (a second call, or a session-scoped fixture's end)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)  # None: not ours
    SparkContext._gateway = None
    SparkContext._jvm = None
    try:
        gateway.shutdown()
    finally:
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()  # Spark's gateway server exits when its stdin closes
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
