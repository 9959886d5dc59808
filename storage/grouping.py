"""Each timer's own outcome from one store call: the group commit of independent requests.

A group of single schedules from different callers is stored in one call; when that call
is refused for one timer's fault (a 409 or a 422 of one item), each timer is stored on
its own, so that one caller's conflict is not the others' error. This is only right where
a refused call stored nothing (one atomic write: the rocks and wheel stores); a store that
splits a call (the cluster, per partition) applies it per atomic part.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from storage.errors import ConflictError, InvalidInputError, TimerStoreError
from storage.protocol import NewTimer, ScheduleResult

Outcome = ScheduleResult | TimerStoreError
ITEM_ERRORS = (ConflictError, InvalidInputError)  # errors that belong to one timer
Schedule = Callable[[Sequence[NewTimer], int], list[ScheduleResult]]


def schedule_each(schedule: Schedule, timers: Sequence[NewTimer], now_ms: int) -> list[Outcome]:
    """``schedule(timers)`` in one call; when it is refused for one item, each on its own.

    A store-wide error (a full disk, a closed store) is raised: it is every caller's.
    """
    try:
        return list(schedule(timers, now_ms))
    except ITEM_ERRORS:
        if len(timers) == 1:
            raise
    outcomes: list[Outcome] = []
    for timer in timers:
        try:
            outcomes.extend(schedule([timer], now_ms))
        except TimerStoreError as exc:
            outcomes.append(exc)
    return outcomes
