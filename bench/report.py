"""``report.md``: one table per scenario with ratios against the RocksDB store."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from bench import claims, features
from bench.scenarios.common import Column, Context
from bench.sizes import Sizes
from bench.targets import ROCKS, dig

DISK_KEY = "disk"


def fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if unit == "x":
            return f"{value:.2f}x"
        if abs(value) >= 100:
            text = f"{value:,.0f}"
        elif abs(value) >= 1:
            text = f"{value:.2f}"
        else:
            text = f"{value:.3g}"
    elif isinstance(value, int):
        text = f"{value:,}"
    else:
        text = str(value)
    return f"{text} {unit}".rstrip() if unit not in ("", "x") else text


def value_text(target: dict[str, Any]) -> str:
    """A judged target's value with its unit: "3.21 s", "12 ms", "0.79x"."""
    return fmt(target["value"], target.get("unit", ""))


def ratio_text(value: Any, base: Any) -> str:
    if not isinstance(value, int | float) or not isinstance(base, int | float) or not base:
        return ""
    return f" ({value / base:.2g}x)"


Row = tuple[str, dict[str, Any], dict[str, Any] | None]  # label, figures, rocks' figures


def system_rows(entry: dict[str, Any]) -> list[Row]:
    """One row per system that produced figures; the base of the ratios is ``rocks``."""
    ok = {n: s["figures"] for n, s in entry["systems"].items() if s["status"] == "ok"}
    base = ok.get(ROCKS)
    return [(n, f, None if n == ROCKS else base) for n, f in ok.items()]


def scenario_table(
    entry: dict[str, Any],
    columns: list[Column],
    rows: list[Row],
    durability: dict[str, str] | None = None,
) -> list[str]:
    """The scenario's table: one row per system, its durability beside its name."""
    systems = entry["systems"]
    if not rows:
        return ["No system produced figures."]
    durability = durability or {}
    lines = [
        "| system | durability | " + " | ".join(c.label for c in columns) + " |",
        "|---" * (len(columns) + 2) + "|",
    ]
    for name, figures, base in rows:
        cells = []
        for c in columns:
            value = dig(figures, c.key)
            text = fmt(value, c.unit)
            if c.ratio and base is not None:
                text += ratio_text(value, dig(base, c.key))
            cells.append(text)
        kept = durability.get(name.split(" ")[0], "")
        lines.append(f"| {name} | {kept} | " + " | ".join(cells) + " |")
    notes = [
        f"- {n}: {s['status']}: {s['reason'].splitlines()[0]}"
        for n, s in systems.items()
        if s["status"] != "ok"
    ]
    if notes:
        lines += ["", "Not run:", *notes]
    return lines


def disk_table(results: dict[str, Any]) -> list[str]:
    lines = [
        "Measured after each scenario on the system's own directory: bytes on disk per "
        "pending timer, and write amplification = bytes the process wrote to storage "
        "(`/proc/self/io` write_bytes: WAL, flushes, compactions, SQLite, dirtied mmap "
        "pages) / payload bytes scheduled.",
        "",
        "| scenario | system | pending | on disk | bytes/pending | written | write amp |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, entry in results["scenarios"].items():
        for name, result in entry["systems"].items():
            disk = result.get("disk")
            if not disk:
                continue
            cells = [
                key,
                name,
                fmt(disk["pending"]),
                fmt(disk["bytes_on_disk"] / 1e6, "MB"),
                fmt(disk["bytes_per_pending"], "B"),
                fmt(disk["io_write_bytes"] / 1e6, "MB"),
                fmt(disk["write_amplification"], "x"),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def targets_table(targets: list[dict[str, Any]]) -> list[str]:
    lines = ["| target | value | met | size |", "|---|---|---|---|"]
    for t in targets:
        met = {True: "**met**", False: "**not met**", None: "not measured"}[t["met"]]
        if t.get("note"):
            met += f" ({t['note']})"
        size = fmt(t["size"])
        if not t["at_full_size"]:
            size += " (not the issue's size: indicative only)"
        lines.append(f"| {t['target']} | {value_text(t)} | {met} | {size} |")
    return lines


def render(
    results: dict[str, Any], scenarios: list[ModuleType], sizes: Sizes, charts: list[str]
) -> str:
    meta = results["meta"]
    m = meta["machine"]
    ctx = Context(sizes, "")
    out = [
        f"# timerstore benchmark ({meta['mode']})",
        "",
        f"- started {meta['started_utc']}, finished {meta.get('finished_utc')}; "
        f"commit `{meta.get('git_commit')}`",
        f"- command: `timerstore {' '.join(meta['argv'])}`",
        f"- machine: {m['platform']}, {m['cpus_logical']} logical CPUs, "
        f"{m['memory_bytes'] / 2**30:.1f} GiB RAM, load {m['load_avg']}",
        f"- versions: {', '.join(f'{k} {v}' for k, v in meta['versions'].items())}",
        "- ratios in parentheses are against the RocksDB store (`rocks`); every raw figure "
        "is in `results.json`",
        "",
        "## Systems",
        "",
        "| system | what | durability | share of sizes | at most | available |",
        "|---|---|---|---|---|---|",
    ]
    for s in meta["systems"]:
        avail = "yes" if s["available"] else f"no: {s['reason']}"
        kept = s.get("durability") or fmt(s["durable"])
        out.append(
            f"| {s['name']} | {s['description']} | {kept} | {s['scale']:g} "
            f"| {fmt(s.get('max_timers'))} | {avail} |"
        )
    out += ["", *features.render([s["family"] for s in meta["systems"]])]
    out += ["", "## Targets (RocksDB store)", "", *targets_table(results["targets"]), ""]
    if results.get("peer_targets"):
        out += ["## Against the peers", "", *targets_table(results["peer_targets"]), ""]
    out += [*claims.render(results.get("claims", []), meta["mode"]), ""]
    for module in scenarios:
        entry = results["scenarios"].get(module.KEY)
        if entry is None:
            continue
        summary = entry["doc"].split("\n\n")[0].replace("\n", " ")
        out += [f"## {module.NUMBER}. {module.TITLE}", "", summary, ""]
        rows_of = getattr(module, "table_rows", system_rows)
        durability = {s["name"]: s.get("durability") or "" for s in meta["systems"]}
        out += scenario_table(entry, module.columns(ctx), rows_of(entry), durability)
        out += [""]
        out += [f"![{c}]({c})" for c in charts if c.startswith(module.KEY)]
        out += [""]
    out += ["## 8. Disk: bytes per pending timer and write amplification", "", *disk_table(results)]
    return "\n".join(out) + "\n"
