"""PNG charts (matplotlib, Agg backend): one per ratio column, plus growth curves."""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from bench.report import dig, system_rows
from bench.scenarios.common import Context
from bench.sizes import Sizes


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def bar_chart(path: str, title: str, unit: str, values: dict[str, float]) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.2))
    names = list(values)
    colors = [
        "tab:red" if n == "rocks" else "tab:blue" if n.startswith("wheel") else "tab:gray"
        for n in names
    ]
    ax.barh(names, [values[n] for n in names], color=colors)
    ax.invert_yaxis()
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(unit)
    positive = [v for v in values.values() if v > 0]
    if positive and max(positive) / max(min(positive), 1e-9) > 100:
        ax.set_xscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def grouped_chart(path: str, module: ModuleType, entry: dict[str, Any], ctx: Context) -> bool:
    """One chart for all ratio columns: a group of bars (one per system) per column."""
    plt = _pyplot()
    columns = [c for c in module.columns(ctx) if c.ratio]
    rows = getattr(module, "table_rows", system_rows)(entry)
    if not rows or not columns:
        return False
    fig, ax = plt.subplots(figsize=(9, 3.8))
    width = 0.8 / len(rows)
    for r, (label, figures, _base) in enumerate(rows):
        values = [dig(figures, c.key) or 0 for c in columns]
        ax.bar([i + r * width for i in range(len(columns))], values, width, label=label)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(columns))])
    ax.set_xticklabels([c.label for c in columns], rotation=30, ha="right", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel(columns[0].unit)
    ax.set_title(f"{module.NUMBER}. {module.TITLE}", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def growth_chart(path: str, entry: dict[str, Any]) -> bool:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    drawn = False
    colors = plt.get_cmap("tab10").colors
    for i, (name, result) in enumerate(entry["systems"].items()):
        if result["status"] != "ok":
            continue
        for j, (variant, v) in enumerate(result["figures"]["variants"].items()):
            style = ("-", "--", ":", "-.")[j % 4]  # one colour per system, a dash per variant
            ax.plot(
                v["pending"],
                v["rates"],
                style,
                color=colors[i % len(colors)],
                marker=".",
                label=f"{name} {variant}",
            )
            drawn = True
    ax.set_title("enqueue rate as pending timers grow", fontsize=10)
    ax.set_xlabel("pending timers")
    ax.set_ylabel("timers/s")
    ax.set_yscale("log")
    if drawn:
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(path, dpi=90)
    plt.close(fig)
    return drawn


def draw_all(
    results: dict[str, Any], scenarios: list[ModuleType], sizes: Sizes, out_dir: str
) -> list[str]:
    """Draw every chart into ``out_dir``; return the file names."""
    ctx = Context(sizes, "")
    names = []
    for module in scenarios:
        entry = results["scenarios"].get(module.KEY)
        if entry is None:
            continue
        if module.KEY == "growth" and growth_chart(
            os.path.join(out_dir, "growth_curves.png"), entry
        ):
            names.append("growth_curves.png")
        if getattr(module, "CHART_GROUPED", False):
            name = f"{module.KEY}_0.png"
            if grouped_chart(os.path.join(out_dir, name), module, entry, ctx):
                names.append(name)
            continue
        for i, column in enumerate(c for c in module.columns(ctx) if c.ratio):
            rows_of = getattr(module, "table_rows", system_rows)
            values = {
                label: float(v)
                for label, figures, _base in rows_of(entry)
                if isinstance(v := dig(figures, column.key), int | float)
            }
            if not values:
                continue
            name = f"{module.KEY}_{i}.png"
            better = "higher" if column.better == "higher" else "lower"
            bar_chart(
                os.path.join(out_dir, name),
                f"{module.NUMBER}. {column.label} ({better} is better)",
                column.unit,
                values,
            )
            names.append(name)
    return names
