"""Helpers of the pipeline tests: staging SST files without Spark, reading a store raw."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from app.timer_requests import RequestLimits
from pipeline.importer import limits_of
from pipeline.rows import JobTimes, encode_row
from pipeline.sst import write_partition
from storage.rocks import RocksTimerStore
from storage.rocks.ingest import Manifest, StagedFile, write_manifest

NOW = 1_700_000_000_000
LIMITS = limits_of(RequestLimits())  # the service's defaults, from their one place


def row(topic: str, timer_id: str, deliver_ms: int, payload: str = "p", **extra: Any) -> dict:
    return {"topic": topic, "id": timer_id, "deliver_at_ms": deliver_ms, "payload": payload} | extra


def stage(
    stage_dir: Path, rows: list[dict], *, now_ms: int = NOW, floor_ms: int = 0, parts: int = 2
) -> Manifest:
    """What the Spark job stages, built in-process: last row wins, ``parts`` SSTs a family."""
    times = JobTimes(now_ms, now_ms, floor_ms)
    winners = {}
    for r in rows:
        e = encode_row(r, times, LIMITS)
        winners[e.ident_key] = e
    return stage_pairs(
        stage_dir,
        {
            "ids": sorted((e.ident_key, e.ids_value) for e in winners.values()),
            "timers": sorted((e.timer_key, e.timer_value) for e in winners.values()),
        },
        dict(Counter(e.topic for e in winners.values())),
        now_ms=now_ms,
        floor_ms=floor_ms,
        parts=parts,
    )


def stage_pairs(
    stage_dir: Path,
    families: dict[str, list[tuple[bytes, bytes]]],
    pending_by_topic: dict[str, int],
    *,
    now_ms: int = NOW,
    floor_ms: int = 0,
    parts: int = 2,
) -> Manifest:
    """Sorted (key, value) pairs of each family as ``parts`` SSTs a family, and a manifest."""
    files = []
    for family, pairs in families.items():
        size = max(1, -(-len(pairs) // parts))
        for p in range(parts):
            chunk = pairs[p * size : (p + 1) * size]
            for f, path, n, nbytes, first, last in write_partition(
                p, iter(chunk), family, str(stage_dir)
            ):
                files.append(StagedFile(f, path, n, nbytes, first.hex(), last.hex()))
    manifest = Manifest(
        created_at_ms=now_ms, floor_ms=floor_ms, files=files, pending_by_topic=pending_by_topic
    )
    write_manifest(str(stage_dir), manifest)
    return manifest


def family_items(store: RocksTimerStore, family: str) -> list[tuple[bytes, bytes]]:
    it = store.handles.cfs[family].iter()
    it.seek_to_first()
    out = []
    while it.valid():
        out.append((it.key(), it.value()))
        it.next()
    del it
    return out


def pending_from_meta(store: RocksTimerStore) -> dict[str, int]:
    """The persisted pending counters, read back from a reopened store."""
    settings = store.settings
    store.close()
    again = RocksTimerStore(settings)
    try:
        return again.stats().pending_by_topic
    finally:
        again.close()
