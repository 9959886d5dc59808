"""The targets against the peers (issue 35): the RocksDB store ahead of every peer on
burst lateness (p99) and cancel truth, and at least level with the fastest durable peer
on enqueue rate (batch 1000, 100 B payloads). Judged on one run's figures."""

from __future__ import annotations

from typing import Any

from bench.systems import PEER_FAMILIES
from bench.targets import ROCKS, dig

ENQUEUE_COMBO = "combos.b1000_p100.median"
TRUTH_KEYS = ("cancelled_but_delivered", "kept_but_not_delivered", "late_cancel_removed")


def _peers(results: dict[str, Any]) -> list[str]:
    return [
        s["name"]
        for s in results["meta"]["systems"]
        if s["family"] in PEER_FAMILIES and s.get("durability") != "none"
    ]


def _values(results: dict[str, Any], scenario: str, path: str) -> dict[str, Any]:
    """``path`` of every system whose run of ``scenario`` was ok."""
    systems = results["scenarios"].get(scenario, {}).get("systems", {})
    return {n: dig(s["figures"], path) for n, s in systems.items() if s.get("status") == "ok"}


def _target(name: str, text: str, value: Any, met: bool | None, note: str) -> dict[str, Any]:
    return {
        "name": name,
        "target": text,
        "value": value,
        "met": met,
        "at_full_size": False,
        "size": None,
        "note": note,
    }


def _burst(results: dict[str, Any], peers: list[str]) -> dict[str, Any]:
    p99 = _values(results, "burst", "lateness.p99_ms")
    ours, theirs = p99.get(ROCKS), {p: p99[p] for p in peers if p99.get(p) is not None}
    met = None if ours is None or not theirs else all(ours < v for v in theirs.values())
    note = ", ".join(f"{p} {v:,} ms" for p, v in theirs.items()) or "no peer measured"
    return _target("peers_burst_p99", "burst p99 lateness below every peer's", ours, met, note)


def _truth(figures: dict[str, Any] | None) -> int | None:
    if figures is None:
        return None
    values = [figures.get(k) for k in TRUTH_KEYS]
    return sum(int(v or 0) for v in values)


def _cancel(results: dict[str, Any], peers: list[str]) -> dict[str, Any]:
    """A run whose cancels ran past the due instant (JetStream fires on its own clock) is
    no truth test: a timer fired before its cancel is delivered, and the cancel said so."""
    systems = results["scenarios"].get("cancel", {}).get("systems", {})
    ok = {n: s["figures"] for n, s in systems.items() if s.get("status") == "ok"}
    overran = [n for n, f in ok.items() if f.get("cancel_overran_ms")]
    wrong = {n: _truth(f) for n, f in ok.items() if n not in overran}
    ours = wrong.get(ROCKS)
    theirs = {p: wrong[p] for p in peers if wrong.get(p) is not None}
    met = None if ours is None or not theirs else ours == 0
    level = [p for p, v in theirs.items() if v == 0]
    note = "untruthful answers: " + ", ".join(f"{p} {v}" for p, v in theirs.items())
    if level:
        note += f"; level with {', '.join(level)} (truthful too), not ahead of them"
    if overran:
        note += f"; not judged (cancels ran past the due instant): {', '.join(overran)}"
    return _target("peers_cancel_truth", "cancel: no untruthful answer", ours, met, note)


def _largest_batch_combo(results: dict[str, Any]) -> str:
    """``combos.b<largest batch>_p100.median`` of this run (1000 in quick and full)."""
    combos = _values(results, "enqueue", "combos").get(ROCKS) or {}
    batches = [int(c[1:].split("_")[0]) for c in combos if c.endswith("_p100")]
    return f"combos.b{max(batches)}_p100.median" if batches else ENQUEUE_COMBO


def _enqueue(results: dict[str, Any], peers: list[str]) -> dict[str, Any]:
    rates = _values(results, "enqueue", _largest_batch_combo(results))
    ours = rates.get(ROCKS)
    theirs = {p: rates[p] for p in peers if rates.get(p)}
    if ours is None or not theirs:
        return _target(
            "peers_enqueue", "enqueue at least the fastest durable peer's", ours, None, ""
        )
    fastest = max(theirs, key=lambda p: theirs[p])
    note = (
        f"fastest durable peer {fastest} {theirs[fastest]:,.0f}/s ({ours / theirs[fastest]:.2f}x)"
    )
    return _target(
        "peers_enqueue",
        "enqueue (largest batch, 100 B) at least the fastest durable peer's",
        ours,
        ours >= theirs[fastest],
        note,
    )


def judge(results: dict[str, Any]) -> list[dict[str, Any]]:
    peers = _peers(results)
    if not peers:
        return []
    judged = [_burst(results, peers), _cancel(results, peers), _enqueue(results, peers)]
    for target in judged:
        target["at_full_size"] = results["meta"]["mode"] == "full"
    return judged
