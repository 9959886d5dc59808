"""PNG charts (matplotlib, Agg backend) and ``report.md`` of the delivery analytics."""

from __future__ import annotations

import datetime as dt
import os

from pipeline.analysis import Analysis, LatenessRow


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def draw(report_dir: str, a: Analysis, per_second: list[tuple[int, int]]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    fig, ax = plt.subplots(figsize=(9, 4))
    minutes = [(int(r.key) - a.first_delivered_ms) / 60_000 for r in a.by_minute]
    for label, values in (
        ("p50", [r.p50_ms for r in a.by_minute]),
        ("p90", [r.p90_ms for r in a.by_minute]),
        ("p99", [r.p99_ms for r in a.by_minute]),
        ("max", [r.max_ms for r in a.by_minute]),
    ):
        ax.plot(minutes, values, marker=".", label=label)
    ax.set(
        xlabel="minutes since first delivery", ylabel="lateness (ms)", title="Lateness per minute"
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(report_dir, "lateness_by_minute.png"), dpi=100)
    plt.close(fig)
    names.append("lateness_by_minute.png")

    fig, ax = plt.subplots(figsize=(9, 4))
    topics = [r.key for r in a.by_topic][:40]
    width = 0.25
    for i, (label, attr) in enumerate((("p50", "p50_ms"), ("p90", "p90_ms"), ("p99", "p99_ms"))):
        values = [getattr(r, attr) for r in a.by_topic][:40]
        ax.bar([x + (i - 1) * width for x in range(len(topics))], values, width, label=label)
    ax.set_xticks(range(len(topics)), topics, rotation=45, ha="right")
    ax.set(ylabel="lateness (ms)", title="Lateness per topic")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(report_dir, "lateness_by_topic.png"), dpi=100)
    plt.close(fig)
    names.append("lateness_by_topic.png")

    fig, ax = plt.subplots(figsize=(9, 4))
    start = per_second[0][0] if per_second else 0
    ax.plot([s - start for s, _ in per_second], [n for _, n in per_second], linewidth=0.8)
    ax.set(
        xlabel="seconds since first delivery", ylabel="deliveries", title="Deliveries per second"
    )
    fig.tight_layout()
    fig.savefig(os.path.join(report_dir, "deliveries_per_second.png"), dpi=100)
    plt.close(fig)
    names.append("deliveries_per_second.png")
    return names


def _table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def write_markdown(path: str, source: str, a: Analysis, pictures: list[str]) -> None:
    header = ("", "deliveries", "early", "p50 ms", "p90 ms", "p99 ms", "max ms")

    def cells(key: str, r: LatenessRow) -> tuple[str, ...]:
        return (
            key,
            str(r.deliveries),
            str(r.early),
            f"{r.p50_ms:.1f}",
            f"{r.p90_ms:.1f}",
            f"{r.p99_ms:.1f}",
            str(r.max_ms),
        )

    o = a.overall
    verdict = "none (as required)" if o.early == 0 else f"**{o.early} EARLY DELIVERIES: a bug**"
    lines = [
        "# Delivery report",
        "",
        f"Source: `{source}`. Deliveries from {_iso(a.first_delivered_ms)} to "
        f"{_iso(a.last_delivered_ms)} UTC.",
        "",
        f"- deliveries: {o.deliveries}; early deliveries: {verdict}",
        f"- lateness p50 {o.p50_ms:.1f} ms, p90 {o.p90_ms:.1f} ms, p99 {o.p99_ms:.1f} ms, "
        f"max {o.max_ms} ms",
        f"- deliveries per second: mean {a.mean_per_s}, peak {a.peak_per_s}",
        "",
        "Lateness is `delivered_at_ms` minus the requested time (or the creation time when "
        "the request was already past due). Percentiles are exact.",
        "",
        "## Per topic",
        "",
        *_table([cells(r.key, r) for r in a.by_topic], header),
        "",
        "## Per minute",
        "",
        *_table([cells(_iso(int(r.key)), r) for r in a.by_minute], header),
        "",
        "## Charts",
        "",
        *[f"![{name}]({name})" for name in pictures],
        "",
    ]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
