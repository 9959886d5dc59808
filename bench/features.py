"""What each system can do, beside what it measured: the report's feature table.

Each cell is a property of the design as benchmarked (and as its project documents it),
not a figure of the run; docs/bench.md gives the sources. The cancel cells are also
checked by the run (scenario 4's "too-late cancels said removed") and by tests/bench.
"""

from __future__ import annotations

from typing import NamedTuple


class Features(NamedTuple):
    cancel: str
    listing: str
    max_delay: str
    precision: str
    log: str
    crash: str


TIMERSTORE = Features(
    "truthful: removed, or too_late (in flight/delivered, 409), or unknown",
    "yes: keys are in due-time order (`GET /v1/timers`)",
    "1000 years",
    "10 ms tick (engine)",
    "yes: log append and key delete in one WriteBatch",
    "WAL replay; nothing acknowledged lost (process kill); fsync per write with sync_writes",
)

FEATURES: dict[str, Features] = {
    "rocks": TIMERSTORE,
    "rocks-sync": TIMERSTORE,
    "wheel": Features(
        "truthful while the index remembers the timer; delivered: unknown",
        "no: slots by time, no ordered listing",
        "bounded by the roll window, then rolled (rewritten) again",
        "the slot width (1 s or 10 ms)",
        "yes (same engine and log)",
        "commit log replay; in-memory index rebuilt, O(pending)",
    ),
    "heap": Features(
        "truthful (lazy deletion)",
        "no (a heap is not sorted)",
        "unbounded",
        "10 ms tick",
        "no log",
        "everything lost",
    ),
    "aps": Features(
        "remove_job: JobLookupError when run or missing (truthful)",
        "get_jobs() sorted by next run time",
        "unbounded",
        "scheduler wakeup; misfire grace drops late jobs (1 s default)",
        "no: the job function runs, at most once",
        "memory store: all lost; SQLite store: jobs kept, runs in flight lost",
    ),
    "nats": Features(
        "purge of sched.<id>: purged 1, or 0 when fired (truthful)",
        "no: by subject only, no order by due time",
        "unbounded (@at any RFC 3339 instant)",
        "the server's scheduler (~0.25 s steps seen here)",
        "yes: fired into the same stream; no duplicate seen after a kill",
        "file store replay (fsync every 2 min); R3 survives a node, re-elects",
    ),
    "redis": Features(
        "ZREM: 1, or 0 when the poller took it (truthful); Sidekiq finds it by O(n) scan",
        "yes: ZRANGEBYSCORE",
        "unbounded (score = due ms)",
        "the poll interval (10 ms here; Sidekiq ~5 s, BullMQ marker + BZPOPMIN)",
        "no: taken by a Lua script, delivered by the client; lost if it dies between",
        "AOF replay (everysec: up to 1 s on power loss); a take whose reply dies is lost",
    ),
    "postgres": Features(
        "DELETE ... RETURNING: the row, or nothing when taken (truthful)",
        "yes: ORDER BY run_at (index)",
        "unbounded (bigint ms)",
        "the poll interval (10 ms here; river 5 s, Oban 1 s, pg-boss 2 s)",
        "only into a table in the same transaction; to a client, at most once per take",
        "WAL replay, nothing committed lost; a take (DELETE) whose reply dies is lost",
    ),
}

HEADER = (
    "| family | cancel (and too late) | listing pending by time | max delay | precision "
    "| exactly-once into a log | on a crash |"
)


def render(families: list[str]) -> list[str]:
    """The feature table for the families in this run, in their order."""
    lines = ["## What each system can do", "", HEADER, "|---" * 7 + "|"]
    for family in dict.fromkeys(families):
        f = FEATURES.get(family)
        if f is not None:
            lines.append(f"| {family} | " + " | ".join(f) + " |")
    return lines
