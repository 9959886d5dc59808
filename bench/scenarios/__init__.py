"""The scenarios, in the issue's order. Disk (8) is measured by the runner after each one."""

from __future__ import annotations

from types import ModuleType

from bench.scenarios import (
    burst,
    cancel,
    enqueue,
    growth,
    long_delays,
    recovery,
    steady,
    tombstones,
)

SCENARIOS: tuple[ModuleType, ...] = (
    enqueue,
    burst,
    steady,
    cancel,
    long_delays,
    growth,
    recovery,
    tombstones,
)


def select(wanted: list[str] | None) -> list[ModuleType]:
    """Scenarios by key (``burst``) or number (``2``); all when none are named.

    ``disk`` (``8``) is known but selects nothing: it is measured after every scenario."""
    if not wanted:
        return list(SCENARIOS)
    chosen = [m for m in SCENARIOS if m.KEY in wanted or str(m.NUMBER) in wanted]
    known = {m.KEY for m in SCENARIOS} | {str(m.NUMBER) for m in SCENARIOS} | {"disk", "8"}
    unknown = set(wanted) - known
    if unknown:
        raise ValueError(
            f"unknown scenarios: {', '.join(sorted(unknown))} (valid: {valid_names()})"
        )
    return chosen


def valid_names() -> str:
    """The names ``select`` takes, for an error message."""
    return ", ".join(f"{m.KEY} ({m.NUMBER})" for m in SCENARIOS)
