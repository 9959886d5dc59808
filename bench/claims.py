"""The four RIP-43 claims against RocksDB (seed 000, 3.3.3), with the figures that test them.

Each claim gets the run's relevant numbers and an indicative verdict by a stated rule.
The rules are mechanical; the verdicts of docs/rocksdb-vs-wheel.md are a person's
reading of a full run.
"""

from __future__ import annotations

from typing import Any

from bench.targets import dig

WHEEL = "wheel-1000ms"


def _ok(results: dict[str, Any], scenario: str, system: str) -> dict[str, Any] | None:
    entry = results["scenarios"].get(scenario, {}).get("systems", {}).get(system)
    if not entry or entry.get("status") != "ok":
        return None
    figures: dict[str, Any] = entry["figures"]
    return figures


def _verdict(ratios: list[float], confirm_below: float, refute_at: float) -> str:
    if not ratios:
        return "not measured"
    if all(r < confirm_below for r in ratios):
        return "confirmed"
    if all(r >= refute_at for r in ratios):
        return "refuted"
    return "depends"


def _claim(claim: str, rule: str, verdict: str, numbers: list[str]) -> dict[str, Any]:
    return {"claim": claim, "rule": rule, "verdict": verdict, "numbers": numbers}


def sorting_cost(results: dict[str, Any]) -> dict[str, Any]:
    rocks, wheel = _ok(results, "enqueue", "rocks"), _ok(results, "enqueue", WHEEL)
    ratios, numbers = [], []
    combos = (rocks or {}).get("combos") or {}
    largest = max((int(c[1:].split("_")[0]) for c in combos), default=0)
    for combo, stats in combos.items():
        if not combo.startswith(f"b{largest}_"):
            continue
        r, w = stats.get("median"), dig(wheel, f"combos.{combo}.median")
        if r and w:
            ratios.append(r / w)
            numbers.append(f"{combo}: rocks {r:,.0f}/s vs wheel {w:,.0f}/s ({r / w:.2f}x)")
    return _claim(
        "1. writing needs sorting, which costs extra time",
        "rocks/wheel enqueue rate at the largest batch: all < 0.7 confirmed, all >= 1 refuted",
        _verdict(ratios, 0.7, 1.0),
        numbers,
    )


def _growth(results: dict[str, Any]) -> dict[str, Any]:
    return (_ok(results, "growth", "rocks") or {}).get("variants") or {}


def compaction_cost(results: dict[str, Any]) -> dict[str, Any]:
    variants = _growth(results)
    numbers, ratios = [], []
    for name, v in variants.items():
        if name.endswith("_blob"):
            continue
        ratios.append(v["end_vs_start"])
        numbers.append(
            f"{name}: end/start {v['end_vs_start']:.2f} at {v['pending_end']:,} pending"
            + _compaction_figures(dig(v, "counters.tickers") or {})
        )
    large = [r for n, r in zip(variants, ratios, strict=False) if n != "p200"]
    verdict = _verdict(large, 0.7, 0.7)
    compactions = [
        (dig(v, "counters.tickers") or {}).get("rocksdb.compact.write.bytes")
        for n, v in variants.items()
        if not n.endswith("_blob")
    ]
    if compactions and not any(compactions):
        verdict = "not tested: no compaction ran at these sizes"
    return _claim(
        "2. with large values, compaction costs much CPU and writes slow down",
        "rocks end/start enqueue rate with large (4 KB) payloads: < 0.7 confirmed, >= 0.7 "
        "refuted; untested when no compaction ran",
        verdict,
        numbers,
    )


def _compaction_figures(tickers: dict[str, int]) -> str:
    """What compaction wrote and spent, and how long writes waited on it (RocksDB's
    statistics; a figure the run did not record is left out)."""
    compacted = tickers.get("rocksdb.compact.write.bytes")
    cpu_us = tickers.get("rocksdb.compaction.total.time.cpu_micros")
    stall_us = tickers.get("rocksdb.stall.micros")
    return (
        ("" if compacted is None else f", compaction wrote {compacted / 1e6:,.0f} MB")
        + ("" if cpu_us is None else f" in {cpu_us / 1e6:,.1f} CPU-s")
        + ("" if stall_us is None else f", writes stalled {stall_us / 1e6:,.1f} s")
    )


def growth_slowdown(results: dict[str, Any]) -> dict[str, Any]:
    v = _growth(results).get("p200")
    ratios = [] if v is None else [v["end_vs_start"]]
    numbers = [] if v is None else [_slowdown_figures("p200", v)]
    raw = None if v is None else v.get("raw_puts")
    if raw is not None:
        numbers.append(_slowdown_figures("raw RocksDB puts of the same timers", raw))
    return _claim(
        "3. writes slow down as the amount stored grows",
        "rocks end/start enqueue rate with 200 B payloads: < 0.7 confirmed, >= 0.7 refuted",
        _verdict(ratios, 0.7, 0.7),
        numbers,
    )


def _slowdown_figures(label: str, v: dict[str, Any]) -> str:
    """The rates at 0 and at the end; and, where the run measured it, how fast the
    writing core ran identical work at the end, and the ratio at the start's core speed."""
    made = v.get("made_end_vs_start")
    core = (
        ""
        if made is None
        else f"; the core ran identical work at {made:.2f} of its start speed: "
        f"{v['end_vs_start_same_core']:.2f} at the start's speed"
    )
    return (
        f"{label}: {v['rate_start']:,.0f}/s at 0, {v['rate_end']:,.0f}/s at "
        f"{v['pending_end']:,} (end/start {v['end_vs_start']:.2f}{core})"
    )


def kv_separation(results: dict[str, Any]) -> dict[str, Any]:
    variants = _growth(results)
    ratios, numbers = [], []
    for name, blob in variants.items():
        if not name.endswith("_blob") or name.removesuffix("_blob") not in variants:
            continue
        plain = variants[name.removesuffix("_blob")]
        for figure in ("scan_rate", "get_rate"):
            if blob.get(figure) and plain.get(figure):
                ratio = blob[figure] / plain[figure]
                ratios.append(ratio)
                numbers.append(
                    f"{name} {figure}: {blob[figure]:,.0f}/s vs {plain[figure]:,.0f}/s "
                    f"without BlobDB ({ratio:.2f}x)"
                )
        numbers.append(f"{name} enqueue at end: {blob['rate_end'] / plain['rate_end']:.2f}x")
    return _claim(
        "4. key-value separation keeps writes fast but hurts reads",
        "BlobDB/plain read rates (due scan, get): all < 0.7 confirmed, all >= 0.9 refuted",
        _verdict(ratios, 0.7, 0.9),
        numbers,
    )


def judge(results: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        sorting_cost(results),
        compaction_cost(results),
        growth_slowdown(results),
        kv_separation(results),
    ]


def render(claims: list[dict[str, Any]], mode: str) -> list[str]:
    caveat = "" if mode == "full" else f" This was a `{mode}` run: its sizes decide nothing."
    lines = [
        "## RIP-43 claims against RocksDB: the figures",
        "",
        "Indicative verdicts by the stated rule, at this run's sizes; the verdicts of "
        "docs/rocksdb-vs-wheel.md come from a person reading a `--full` run." + caveat,
        "",
        "| claim | indicative verdict | rule | figures |",
        "|---|---|---|---|",
    ]
    for c in claims:
        figures = "<br>".join(c["numbers"]) or "–"
        lines.append(f"| {c['claim']} | **{c['verdict']}** | {c['rule']} | {figures} |")
    return lines
