"""The stage loop's failure rule (``app.engine.stage``): a step that raises starts a
failure that only a good step ends (the dispatcher: a step with work); a step whose work
was handed over to another node (a cluster partition moved away mid-commit) does not, so
a node with nothing more to deliver does not stay unready for it."""

from __future__ import annotations

import threading

import pytest

from app.clock import SystemClock
from app.engine.stage import StageThread
from cluster.errors import FencedError, PartitionMovedError, UnsureWriteError
from storage.errors import StoreClosedError, TimerStoreError
from tests.waiting import wait_for


class RaisesOnceThenIdles(StageThread):
    """Like the dispatcher after a lost commit: one step raises ``error``, every later one
    finds nothing to do (and, as the dispatcher's, an idle step ends no failure)."""

    name = "test-stage"
    idle_step_ends_failure = False

    def __init__(self, error: TimerStoreError) -> None:
        super().__init__(SystemClock())
        self.error = error
        self.steps = 0

    def step(self) -> bool:
        self.steps += 1
        if self.steps == 1:
            raise self.error
        return False

    def idle(self, stop: threading.Event) -> None:
        stop.wait(0.001)


def run_a_few_steps(error: TimerStoreError) -> RaisesOnceThenIdles:
    stage = RaisesOnceThenIdles(error)
    stage.start()
    try:
        wait_for(lambda: stage.steps >= 5, 10, "a few idle steps after the raising one")
    finally:
        stage.stop()
    return stage


@pytest.mark.parametrize(
    "error",
    [
        PartitionMovedError("partition 12 is no longer owned here"),
        FencedError("another owner appended after sequence 20"),
        UnsureWriteError("an append try went unanswered"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_work_handed_over_to_another_node_is_no_failure(error: TimerStoreError) -> None:
    stage = run_a_few_steps(error)
    assert stage.failing_since_ms is None and stage.last_error is None


def test_any_other_store_error_is_a_failure_until_a_good_step() -> None:
    stage = run_a_few_steps(StoreClosedError("the store is closed"))
    assert stage.failing_since_ms is not None
    assert stage.last_error == "StoreClosedError: the store is closed"
