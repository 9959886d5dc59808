"""The RocksDB store's targets (issue 5, tightened by issue 9), judged on a run's figures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ROCKS = "rocks"


def dig(figures: Any, path: str) -> Any:
    """``figures["a"]["b"]`` for ``"a.b"``; None when any step is missing."""
    value = figures
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _figures(results: dict[str, Any], scenario: str) -> dict[str, Any] | None:
    entry = results["scenarios"].get(scenario, {}).get("systems", {}).get(ROCKS)
    if not entry or entry.get("status") != "ok":
        return None
    figures: dict[str, Any] = entry["figures"]
    return figures


BURST_RAW_RATIO = 1.5  # the burst's delivery time against as many raw puts (a ratio target)


@dataclass(frozen=True)
class _Scope:
    """A target's scenario, its size in a full run and the size this run gave it."""

    scenario: str
    full_size: int | None
    size: Any


@dataclass(frozen=True)
class _Figure:
    """A target's measured value and its unit ("s", "ms", "MB", "timers", "x": a ratio)."""

    value: Any
    unit: str


def _target(
    name: str, text: str, figure: _Figure, met: bool | None, scope: _Scope, note: str | None = None
) -> dict[str, Any]:
    """One judged target; ``note`` says why a measured figure was not judged."""
    return {
        "name": name,
        "scenario": scope.scenario,
        "target": text,
        "value": figure.value,
        "unit": figure.unit,
        "met": met,
        "at_full_size": scope.full_size is None or scope.size == scope.full_size,
        "size": scope.size,
        "note": note,
    }


def judge(results: dict[str, Any], full: dict[str, Any]) -> list[dict[str, Any]]:
    """Every target, judged on ``results``; ``met`` is None where its figure is missing."""
    return [
        *_burst_targets(results, full["burst_timers"]),
        _steady_target(results, full["steady_rate"]),
        _recovery_target(results, full["recovery_pending"]),
        *_growth_targets(results, full["growth_targets"]),
    ]


def _burst_targets(results: dict[str, Any], full_timers: int) -> list[dict[str, Any]]:
    """The burst's targets. When scheduling ran past the due instant, the verdicts carry a
    note: lateness is still counted from the due instant, so the overrun only makes the
    figures worse (a met target stands; a missed one may owe its miss to the overrun)."""
    burst = _figures(results, "burst")
    scope = _Scope("burst", full_timers, None if burst is None else burst.get("timers"))
    all_s = dig(burst, "deliver_all_s")
    missing = dig(burst, "never_delivered")
    p99 = dig(burst, "lateness.p99_ms")
    rss = dig(burst, "rss_growth_mb")
    overran = dig(burst, "schedule_overran_ms") or 0
    raw_s = dig(burst, "raw_puts_s")
    ratio = None if all_s is None or not raw_s else round(all_s / raw_s, 2)
    note = f"the schedule overran the due instant by {overran} ms" if overran else None
    verdicts = [
        None if burst is None else all_s is not None and all_s <= 4 and missing == 0,
        None if p99 is None else p99 < 4000,
        None if rss is None else rss < 500,
        None if ratio is None else ratio <= BURST_RAW_RATIO and missing == 0,
    ]
    texts = [
        ("burst_all_delivered_4s", "burst: every timer delivered within 4 s of the due instant"),
        ("burst_p99_4s", "burst: p99 lateness under 4 s"),
        ("burst_rss_500mb", "burst: RSS growth under 500 MB"),
        (
            "burst_within_raw_puts",
            f"burst: every timer delivered within {BURST_RAW_RATIO} times the time of as many "
            "raw RocksDB puts in the same run",
        ),
    ]
    figures = (_Figure(all_s, "s"), _Figure(p99, "ms"), _Figure(rss, "MB"), _Figure(ratio, "x"))
    return [
        _target(name, text, figure, met, scope, note)
        for (name, text), figure, met in zip(texts, figures, verdicts, strict=True)
    ]


def _steady_target(results: dict[str, Any], full_rate: int) -> dict[str, Any]:
    steady = _figures(results, "steady")
    p99 = dig(steady, "lateness.p99_ms")
    return _target(
        "steady_p99_20ms",
        "steady: p99 lateness under 20 ms",
        _Figure(p99, "ms"),
        None if p99 is None else p99 < 20,
        _Scope("steady", full_rate, dig(steady, "rate_offered")),
    )


def _recovery_target(results: dict[str, Any], full_pending: int) -> dict[str, Any]:
    rec = _figures(results, "recovery")
    lost = dig(rec, "lost")
    return _target(
        "recovery_lost_0",
        "recovery: 0 timers lost after SIGKILL",
        _Figure(lost, "timers"),
        None if lost is None else lost == 0,
        _Scope("recovery", full_pending, dig(rec, "timers")),
    )


def _growth_targets(results: dict[str, Any], full_pending: dict[str, int]) -> list[dict[str, Any]]:
    """One target per payload size; each one's full size is its pending count."""
    growth = _figures(results, "growth")
    out = []
    for payload, target in full_pending.items():
        ratio = dig(growth, f"variants.p{payload}.end_vs_start")
        out.append(
            _target(
                f"growth_p{payload}_70pct",
                f"growth ({payload} B): enqueue rate at the end at least 70% of the rate at 0",
                _Figure(ratio, "x"),
                None if ratio is None else ratio >= 0.7,
                _Scope("growth", target, dig(growth, f"variants.p{payload}.pending_end")),
            )
        )
    return out
