"""Executor side of the import: sorted (key, value) rows -> one SST file per partition.

``write_ids`` and ``write_timers`` run under ``DataFrame.mapInArrow`` on range-partitioned
frames sorted by key (see ``pipeline.importer``); ``write_partition`` is the same for an
iterator of pairs (used without Spark). The ``ids`` stats also count the timers per topic
(the key's prefix), which become the store's pending counters.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import msgspec

from storage.rocks import keys as layout

if TYPE_CHECKING:
    import pyarrow as pa

STATS_SCHEMA = (
    "family string, path string, entries long, bytes long, first binary, last binary, topics string"
)


class _Writer:
    """One SST file written in key order; opened at the first key (no file when empty)."""

    def __init__(self, partition: int, family: str, stage_dir: str) -> None:
        self.family = family
        self.relative = f"{family}/part-{partition:05d}.sst"
        self.path = os.path.join(stage_dir, self.relative)
        self.writer: Any = None
        self.first = self.last = b""
        self.entries = 0
        self.topics: Counter[str] = Counter()

    def put_all(self, keys: list[bytes], values: list[bytes]) -> None:
        if not keys:
            return
        if self.writer is None:
            import rocksdict as rd

            from storage.rocks.ingest import sst_options

            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self.writer = rd.SstFileWriter(sst_options())
            self.writer.open(self.path + ".tmp")
        writer = self.writer
        for key, value in zip(keys, values, strict=True):
            writer[key] = value
        if not self.entries:
            self.first = keys[0]
        self.last = keys[-1]
        self.entries += len(keys)

    def count_topics(self, keys: list[bytes]) -> None:
        """Per-topic counts of sorted ``ids`` keys: each topic is one run of keys."""
        i, n = 0, len(keys)
        while i < n:
            topic, _ = layout.split_ident(keys[i])
            prefix = topic.encode() + layout.SEPARATOR
            j = i + 1
            while j < n and keys[j].startswith(prefix):
                j += 1
            self.topics[topic] += j - i
            i = j

    def finish(self) -> tuple[str, str, int, int, bytes, bytes] | None:
        if self.writer is None or not self.entries:
            return None
        self.writer.finish()
        self.writer = None
        os.replace(self.path + ".tmp", self.path)  # a retried task overwrites, never half-writes
        size = os.path.getsize(self.path)
        return (self.family, self.relative, self.entries, size, self.first, self.last)


def write_partition(
    partition: int, rows: Iterator[Any], family: str, stage_dir: str
) -> Iterator[tuple[str, str, int, int, bytes, bytes]]:
    """Write one partition's sorted (key, value) rows into one SST file; yield its stats."""
    pairs = [(bytes(k), bytes(v)) for k, v in rows]
    w = _Writer(partition, family, stage_dir)
    if pairs:
        w.put_all([k for k, _ in pairs], [v for _, v in pairs])
    stats = w.finish()
    if stats is not None:
        yield stats


class Merge:
    """An accumulator of dicts (``SparkContext.accumulator(dict(), Merge())``): each task adds
    ``{partition: value}``, so a retried task replaces its own entry, never adds twice."""

    def zero(self, value: dict[Any, Any]) -> dict[Any, Any]:
        return {}

    def addInPlace(self, a: dict[Any, Any], b: dict[Any, Any]) -> dict[Any, Any]:
        a.update(b)
        return a


def merge_accumulator(spark_context: Any) -> Any:
    """A new accumulator of ``{partition: value}`` entries (see ``Merge``)."""
    return spark_context.accumulator({}, Merge())


def _partition() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context else 0


def _stats_batch(stats: tuple[Any, ...], topics: Counter[str]) -> pa.RecordBatch:
    import pyarrow as pa

    columns = [[v] for v in stats] + [[msgspec.json.encode(dict(topics)).decode()]]
    return pa.RecordBatch.from_arrays(
        [pa.array(c) for c in columns],
        names=["family", "path", "entries", "bytes", "first", "last", "topics"],
    )


def write_ids(
    batches: Iterator[pa.RecordBatch], stage_dir: str, stats: Any
) -> Iterator[pa.RecordBatch]:
    """mapInArrow over the winners sorted by ``ids`` key: (ikey, ival, tkey, tval) batches.

    Writes the ``ids`` SST of the partition, adds its stats row to the ``stats``
    accumulator (a ``Merge``) and passes the ``timers`` pairs (tkey, tval) on.
    """
    import pyarrow as pa

    partition = _partition()
    w = _Writer(partition, "ids", stage_dir)
    for batch in batches:
        if not batch.num_rows:
            continue
        keys = batch.column(0).to_pylist()
        w.put_all(keys, batch.column(1).to_pylist())
        w.count_topics(keys)
        yield pa.RecordBatch.from_arrays([batch.column(2), batch.column(3)], names=["tkey", "tval"])
    done = w.finish()
    if done is not None:
        stats.add({partition: (*done, msgspec.json.encode(dict(w.topics)).decode())})


def write_timers(batches: Iterator[pa.RecordBatch], stage_dir: str) -> Iterator[pa.RecordBatch]:
    """mapInArrow over (tkey, tval) sorted by key: one ``timers`` SST and its stats row."""
    w = _Writer(_partition(), "timers", stage_dir)
    for batch in batches:
        if batch.num_rows:
            w.put_all(batch.column(0).to_pylist(), batch.column(1).to_pylist())
    done = w.finish()
    if done is not None:
        yield _stats_batch(done, w.topics)
