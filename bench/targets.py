"""The RocksDB store's targets (issue 5, tightened by issue 9), judged on a run's figures."""

from __future__ import annotations

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


def _target(
    name: str,
    text: str,
    value: Any,
    met: bool | None,
    scenario: str,
    full_size: int | None,
    size: Any,
) -> dict[str, Any]:
    return {
        "name": name,
        "scenario": scenario,
        "target": text,
        "value": value,
        "met": met,
        "at_full_size": full_size is None or size == full_size,
        "size": size,
    }


def judge(results: dict[str, Any], full: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    burst = _figures(results, "burst")
    size = None if burst is None else burst.get("timers")
    full_burst = full["burst_timers"]
    all_s = dig(burst, "deliver_all_s")
    missing = dig(burst, "never_delivered")
    out.append(
        _target(
            "burst_all_delivered_4s",
            "burst: every timer delivered within 4 s of the due instant",
            all_s,
            None if burst is None else all_s is not None and all_s <= 4 and missing == 0,
            "burst",
            full_burst,
            size,
        )
    )
    p99 = dig(burst, "lateness.p99_ms")
    out.append(
        _target(
            "burst_p99_4s",
            "burst: p99 lateness under 4 s",
            p99,
            None if p99 is None else p99 < 4000,
            "burst",
            full_burst,
            size,
        )
    )
    rss = dig(burst, "rss_growth_mb")
    out.append(
        _target(
            "burst_rss_500mb",
            "burst: RSS growth under 500 MB",
            rss,
            None if rss is None else rss < 500,
            "burst",
            full_burst,
            size,
        )
    )
    steady = _figures(results, "steady")
    sp99 = dig(steady, "lateness.p99_ms")
    out.append(
        _target(
            "steady_p99_20ms",
            "steady: p99 lateness under 20 ms",
            sp99,
            None if sp99 is None else sp99 < 20,
            "steady",
            full["steady_rate"],
            dig(steady, "rate_offered"),
        )
    )
    rec = _figures(results, "recovery")
    lost = dig(rec, "lost")
    out.append(
        _target(
            "recovery_lost_0",
            "recovery: 0 timers lost after SIGKILL",
            lost,
            None if lost is None else lost == 0,
            "recovery",
            full["recovery_pending"],
            dig(rec, "timers"),
        )
    )
    growth = _figures(results, "growth")
    for payload, target in full["growth_targets"].items():
        ratio = dig(growth, f"variants.p{payload}.end_vs_start")
        out.append(
            _target(
                f"growth_p{payload}_70pct",
                f"growth ({payload} B): enqueue rate at the end at least 70% of the rate at 0",
                ratio,
                None if ratio is None else ratio >= 0.7,
                "growth",
                target,
                dig(growth, f"variants.p{payload}.pending_end"),
            )
        )
    return out
