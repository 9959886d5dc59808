"""One row per topic for ``/v1/topics`` and the dashboard: the store's counts, the topic's
route and its consumer groups' lag, all from memory (no store iteration).

A topic appears when the store knows it (timers pending or a log), when a route is set for
it, or when a group has committed on it, so a route set before the first timer shows up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from app.groups import GroupOffset
from app.routing import LOG_ROUTE, Route, SinkKind
from storage.protocol import TopicInfo


class TopicOverview(msgspec.Struct, frozen=True):
    topic: str
    pending: int
    log_end_offset: int
    sink: SinkKind  # where the topic's timers go when due (``log`` unless a route is set)
    groups: list[GroupOffset]  # lag exact at ``log_end_offset``


def topic_overviews(
    infos: Iterable[TopicInfo],
    routes: Mapping[str, Route],
    committed: Mapping[tuple[str, str], int],
) -> list[TopicOverview]:
    """Join the store's topic counts with routes and committed offsets, sorted by topic."""
    counts = {i.topic: (i.pending, i.log_end_offset) for i in infos}
    groups_of: dict[str, list[tuple[str, int]]] = {}
    for (topic, group), offset in committed.items():
        groups_of.setdefault(topic, []).append((group, offset))
    rows = []
    for topic in sorted(counts.keys() | routes.keys() | groups_of.keys()):
        pending, log_end = counts.get(topic, (0, 0))
        groups = [
            GroupOffset(group, offset, max(0, log_end - offset))
            for group, offset in sorted(groups_of.get(topic, []))
        ]
        sink = routes.get(topic, LOG_ROUTE).sink
        rows.append(TopicOverview(topic, pending, log_end, sink, groups))
    return rows
