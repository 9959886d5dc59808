"""The delivery analysis as data: what ``pipeline.analyze`` computes and ``pipeline.charts``
draws. Its own module so that the two depend on it, not on each other."""

from __future__ import annotations

import msgspec


class LatenessRow(msgspec.Struct, frozen=True):
    key: str  # topic, minute (ISO) or "all"
    deliveries: int
    early: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: int


class Analysis(msgspec.Struct, frozen=True):
    overall: LatenessRow
    by_topic: list[LatenessRow]
    by_minute: list[LatenessRow]
    first_delivered_ms: int
    last_delivered_ms: int
    mean_per_s: float
    peak_per_s: int
    seconds: float
    files: list[str]
