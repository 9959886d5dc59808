"""Bulk import benchmark (not a test): the same N timers three ways, end to end.

1. ``spark``: the Spark import on ``local[2]`` (session start, read the Parquet file,
   encode, last row wins, sort, write SSTs) and ``ingest_staged`` into a fresh store;
2. ``store``: read the same file and ``RocksTimerStore.schedule`` in chunks of 2,000;
3. ``http``: read the same file and ``POST /v1/timers/batch`` (msgpack, 10,000 per body,
   two client threads) to a fresh ``timerstore serve`` on 127.0.0.1.

Every path starts from the same Parquet file (generated first, not timed) and ends when
the store holds all N timers. Seconds and timers/s side by side, written to
``bench/results/spark_import/<time>.json``. Target: Spark at least 3x the HTTP path.

    .venv/bin/python -m bench.spark_import --n 100000      # develop
    .venv/bin/python -m bench.spark_import                 # 10,000,000 (minutes; quiet machine)
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import msgspec

from bench.http_load import start_server
from bench.measure import machine_info
from storage.protocol import NewTimer
from storage.rocks import RocksSettings, RocksTimerStore

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOW_MS = 1_900_000_000_000  # far future of any real clock: nothing falls due meanwhile
TOPICS = ("orders", "payments", "mail", "jobs", "retry")
READ_ROWS = 10_000
STORE_CHUNK = 2000
HTTP_BATCH = 10_000
HTTP_CLIENTS = 2


def generate(path: str, n: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [("topic", pa.string()), ("id", pa.string()), ("deliver_at_ms", pa.int64()),
         ("payload", pa.string())]
    )  # fmt: skip
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, n, 1_000_000):
            idx = range(start, min(n, start + 1_000_000))
            writer.write_table(
                pa.table(
                    {
                        "topic": [TOPICS[i % len(TOPICS)] for i in idx],
                        "id": [f"id-{i:010d}" for i in idx],
                        "deliver_at_ms": [NOW_MS + (i * 7_919) % 86_400_000 for i in idx],
                        "payload": [f"order {i} timed out" + "." * 80 for i in idx],
                    },
                    schema=schema,
                )
            )


def read_chunks(path: str) -> Iterator[list[dict[str, Any]]]:
    import pyarrow.parquet as pq

    for batch in pq.ParquetFile(path).iter_batches(batch_size=READ_ROWS):
        yield batch.to_pylist()


def run_spark(path: str, work: str, n: int) -> dict[str, Any]:
    from app.timer_requests import RequestLimits
    from pipeline.importer import limits_of, run_import
    from pipeline.rows import JobTimes
    from pipeline.spark import spark_session

    started = time.perf_counter()
    with spark_session("local[2]", "bench-spark-import") as spark:
        summary = run_import(
            spark,
            path,
            os.path.join(work, "stage"),
            times=JobTimes(NOW_MS, NOW_MS, 0),
            limits=limits_of(RequestLimits()),
        )
    store = RocksTimerStore(RocksSettings(os.path.join(work, "rocks")))
    report = store.ingest_staged(summary.stage_dir, limits=limits_of(RequestLimits()))
    pending = store.stats().pending
    store.close()
    seconds = time.perf_counter() - started
    assert pending == n, (pending, n)
    return {
        "seconds": seconds,
        "phases": summary.phases,
        "ingest_seconds": report.seconds,
        "files": summary.files,
        "bytes": summary.bytes,
    }


def run_store(path: str, work: str, n: int) -> dict[str, Any]:
    started = time.perf_counter()
    store = RocksTimerStore(RocksSettings(os.path.join(work, "rocks")))
    for rows in read_chunks(path):
        timers = [
            NewTimer(r["topic"], r["id"], r["deliver_at_ms"], r["payload"].encode()) for r in rows
        ]
        for start in range(0, len(timers), STORE_CHUNK):
            store.schedule(timers[start : start + STORE_CHUNK], NOW_MS)
    pending = store.stats().pending
    store.close()
    seconds = time.perf_counter() - started
    assert pending == n, (pending, n)
    return {"seconds": seconds, "chunk": STORE_CHUNK}


def _bodies(path: str) -> Iterator[bytes]:
    batch: list[dict[str, Any]] = []
    for rows in read_chunks(path):
        batch.extend(rows)
        while len(batch) >= HTTP_BATCH:
            yield msgspec.msgpack.encode({"timers": batch[:HTTP_BATCH]})
            batch = batch[HTTP_BATCH:]
    if batch:
        yield msgspec.msgpack.encode({"timers": batch})


def run_http(path: str, work: str, n: int) -> dict[str, Any]:
    proc, url = start_server(os.path.join(work, "data"))
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "127.0.0.1", parts.port
        bodies = _bodies(path)
        lock = threading.Lock()
        errors: list[str] = []

        def client() -> None:
            conn = http.client.HTTPConnection(host, port, timeout=300)
            headers = {"Content-Type": "application/msgpack"}
            while not errors:
                with lock:
                    body = next(bodies, None)
                if body is None:
                    break
                conn.request("POST", "/v1/timers/batch", body=body, headers=headers)
                response = conn.getresponse()
                text = response.read()
                if response.status != 200:
                    errors.append(f"{response.status}: {text[:300]!r}")
            conn.close()

        started = time.perf_counter()
        threads = [threading.Thread(target=client) for _ in range(HTTP_CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - started
        if errors:
            raise SystemExit(f"HTTP batch failed: {errors[0]}")
        conn = http.client.HTTPConnection(host, port, timeout=60)
        conn.request("GET", "/v1/stats")
        pending = json.loads(conn.getresponse().read())["pending"]
        assert pending == n, (pending, n)
        return {"seconds": seconds, "batch": HTTP_BATCH, "clients": HTTP_CLIENTS}
    finally:
        proc.terminate()
        proc.wait(60)


PATHS = {"spark": run_spark, "store": run_store, "http": run_http}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.spark_import", description=__doc__)
    parser.add_argument("--n", type=int, default=10_000_000, help="timers (default 10,000,000)")
    parser.add_argument("--paths", default="spark,store,http", help="which paths, in order")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "spark_import"))
    parser.add_argument("--work", help="scratch directory (default: a temporary one)")
    args = parser.parse_args(argv)
    work = args.work or tempfile.mkdtemp(prefix="spark-import-bench-")
    try:
        source = os.path.join(work, "input.parquet")
        t0 = time.perf_counter()
        generate(source, args.n)
        print(f"generated {args.n} timers in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        results: dict[str, Any] = {}
        for name in args.paths.split(","):
            scratch = os.path.join(work, name)
            os.makedirs(scratch)
            result = PATHS[name](source, scratch, args.n)
            result["timers_per_s"] = round(args.n / result["seconds"], 1)
            result["seconds"] = round(result["seconds"], 2)
            results[name] = result
            print(f"{name:6s} {result['seconds']:9.1f} s {result['timers_per_s']:12,.0f} timers/s",
                  file=sys.stderr)  # fmt: skip
            shutil.rmtree(scratch, ignore_errors=True)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    ratios = {}
    if "spark" in results and "http" in results:
        ratios["spark_vs_http"] = round(results["http"]["seconds"] / results["spark"]["seconds"], 2)
    if "spark" in results and "store" in results:
        ratios["spark_vs_store"] = round(
            results["store"]["seconds"] / results["spark"]["seconds"], 2
        )
    document = {"n": args.n, "results": results, "speedup": ratios, "machine": machine_info()}
    os.makedirs(args.out, exist_ok=True)
    out = os.path.join(args.out, time.strftime("%Y%m%d-%H%M%S") + ".json")
    with open(out, "w") as f:
        json.dump(document, f, indent=2)
    print(json.dumps({"n": args.n, "speedup": ratios, "out": out}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
