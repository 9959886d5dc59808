"""One row per topic for ``/v1/topics`` and the dashboard: the store's counts, the topic's
route and its consumer groups' lag, all from memory (no store iteration).

A topic appears when the store knows it (timers pending or a log), when a route is set for
it, or when a group has committed on it, so a route set before the first timer shows up.

A listing is paged (``topic_page``): a service may hold a topic per tenant, and a page of
every topic was megabytes on every dashboard refresh. A page goes on after a position:
the topic's name in name order, or ``u64(MAX - pending) + name`` in the order of most
pending, so a cursor never goes stale (one the server did not issue is refused:
``storage.cursors``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping
from typing import Literal, NamedTuple

import msgspec

from app.groups import GroupOffset
from app.routing import LOG_ROUTE, Route, SinkKind
from storage.cursors import decode_cursor, encode_cursor
from storage.protocol import TopicInfo

TopicOrder = Literal["topic", "pending"]
_MAX_U64 = (1 << 64) - 1


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


class TopicPage(NamedTuple):
    rows: list[TopicOverview]
    next_cursor: str | None  # the position the next page starts after; None: the last page
    total: int  # topics in the listing, on every page


def topic_position(order: TopicOrder, row: TopicOverview) -> bytes:
    """A row's place in ``order``: its name, or most pending first with names after."""
    name = row.topic.encode()
    if order == "pending":
        pending = min(max(row.pending, 0), _MAX_U64)
        return (_MAX_U64 - pending).to_bytes(8, "big") + name
    return name


def topic_page(
    rows: list[TopicOverview], order: TopicOrder, cursor: str | None, limit: int
) -> TopicPage:
    """The ``limit`` rows in ``order`` after the position ``cursor`` names (None: from the
    first). InvalidInputError naming ``cursor`` when it is no cursor at all."""
    after = None if cursor is None else decode_cursor(cursor)
    placed = sorted((topic_position(order, row), i) for i, row in enumerate(rows))
    start = 0 if after is None else bisect_right(placed, (after, len(rows)))
    chosen = placed[start : start + limit]
    more = start + limit < len(placed)
    next_cursor = encode_cursor(chosen[-1][0]) if more and chosen else None
    return TopicPage([rows[i] for _, i in chosen], next_cursor, len(rows))
