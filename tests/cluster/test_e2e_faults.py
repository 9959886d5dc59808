"""The randomized fault run (``bench.cluster_faults``) at a size that fits the suite, and
its checker shown to catch each kind of violation on a hand-made history."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cluster_faults import fault_run
from bench.cluster_history import INDETERMINATE, Operation, check, mirror_problems

SEED = 11
SECONDS = 40.0


@pytest.mark.cluster
@pytest.mark.slow
def test_a_seeded_fault_run_keeps_every_rule(tmp_path: Path) -> None:
    run, problems = fault_run(tmp_path, SECONDS, SEED)
    assert problems == [], "\n".join(problems)
    operations = run.history.snapshot()
    acknowledged = [op for op in operations if op.kind == "schedule" and op.status == 201]
    assert len(acknowledged) >= 20, "too few operations to say anything"
    assert len(run.faults) >= 3, run.faults


def op(kind: str, timer_id: str, status: int, due_ms: int = 1_000) -> Operation:
    return Operation(kind, "t", timer_id, due_ms, status, "n0", 0)


def message(offset: int, timer_id: str, due_ms: int = 1_000, at_ms: int = 1_001) -> dict:
    return {"offset": offset, "id": timer_id, "deliver_at_ms": due_ms, "delivered_at_ms": at_ms}


def test_the_checker_accepts_a_consistent_history() -> None:
    history = [
        op("schedule", "a", 201),
        op("schedule", "b", 201),
        op("cancel", "b", 204),
        op("schedule", "c", INDETERMINATE),  # may or may not have been stored
        op("schedule", "d", 201),
        op("cancel", "d", 409),
    ]
    logs = {"t": [message(0, "a"), message(1, "d")]}
    assert check(history, {"n0": logs, "n1": logs}) == []


@pytest.mark.parametrize(
    ("history", "log", "rule"),
    [
        ([op("schedule", "a", 201)], [], "never delivered"),
        ([op("schedule", "a", 201)], [message(0, "a"), message(1, "a")], "2 times"),
        ([op("schedule", "a", 201)], [message(0, "a", at_ms=999)], "early"),
        ([op("schedule", "a", 201, due_ms=5_000)], [message(0, "a")], "no schedule asked"),
        (
            [op("schedule", "a", 201), op("cancel", "a", 204)],
            [message(0, "a")],
            "cancel answered 204",
        ),
        ([op("schedule", "a", 201), op("cancel", "a", 409)], [], "409"),
        ([op("schedule", "a", 201), op("cancel", "a", 404)], [], "found no such timer"),
        ([op("schedule", "a", 201)], [message(1, "a")], "offsets"),
    ],
)
def test_the_checker_names_each_broken_rule(
    history: list[Operation], log: list[dict], rule: str
) -> None:
    problems = check(history, {"n0": {"t": log}})
    assert any(rule in p for p in problems), problems


def test_the_checker_sees_nodes_that_disagree() -> None:
    history = [op("schedule", "a", 201)]
    problems = check(history, {"n0": {"t": [message(0, "a")]}, "n1": {"t": []}})
    assert problems == ["node n1 reads other topic logs than the first node"]


def test_the_mirror_check_accepts_a_mirror_equal_to_the_log() -> None:
    logs = {"t": [message(0, "a"), message(1, "d")], "u": []}
    assert mirror_problems(logs, {"t": [(0, "a"), (1, "d")], "u": []}) == []


@pytest.mark.parametrize(
    ("held", "rule"),
    [
        ([(0, "a")], "a prefix of the log"),
        ([(0, "a"), (1, "d"), (1, "d")], "more than the log"),
        ([(1, "d"), (0, "a")], "at 0: (1, 'd') where the log has (0, 'a')"),
        ([(0, "a"), (1, "x")], "at 1: (1, 'x') where the log has (1, 'd')"),
    ],
)
def test_the_mirror_check_names_a_mirror_that_differs(
    held: list[tuple[int, str]], rule: str
) -> None:
    logs = {"t": [message(0, "a"), message(1, "d")]}
    problems = mirror_problems(logs, {"t": held})
    assert len(problems) == 1 and rule in problems[0], problems
