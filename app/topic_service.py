"""The topics resource of the service: topic logs (long-poll reads), consumer groups,
routes and the topic overview.

``TimerService.start`` builds it once the store is open and hands it what it needs: the
store, the route table and the group offsets (each the one owner of its state), the
notifier that wakes long-polls, and the service's ``call`` that runs a blocking store call
in a worker thread (503 once shutdown has begun).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import ParamSpec, Protocol, TypeVar

import msgspec

from app.clock import Clock
from app.groups import GroupOffset, GroupOffsets
from app.notify import TopicNotifier
from app.routing import Route, RouteTable, SinkSettings, check_route
from app.topics import TopicOrder, TopicPage, topic_overviews, topic_page
from storage.errors import NotFoundError
from storage.protocol import LoggedMessage, TimerStore

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")


class WorkerCall(Protocol):
    """Runs ``fn(*args, **kwargs)`` in a worker thread (``TimerService.call``)."""

    def __call__(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R]:
        raise NotImplementedError


class Messages(msgspec.Struct, frozen=True):
    messages: list[LoggedMessage]
    next_offset: int


class TopicService:
    def __init__(
        self,
        store: TimerStore,
        routes: RouteTable,
        groups: GroupOffsets,
        *,
        notifier: TopicNotifier,
        clock: Clock,
        sinks: SinkSettings,
        call: WorkerCall,
        accepting: Callable[[], bool],
        max_page_bytes: int | None = None,
    ) -> None:
        self.store, self.routes, self.groups = store, routes, groups
        self._notifier, self._clock, self._sinks = notifier, clock, sinks
        self._call, self._accepting = call, accepting
        self._max_page_bytes = max_page_bytes  # a page of messages ends at these bytes

    async def topics(self, order: TopicOrder, cursor: str | None, limit: int) -> TopicPage:
        """A page of topics with their counts, route and group lag (from memory)."""
        infos = await self._call(self.store.topics)
        committed = self.groups.committed_offsets()
        rows = topic_overviews(infos, self.routes.routed_topics(), committed)
        return topic_page(rows, order, cursor, limit)

    # ----------------------------------------------------------------- the topic log
    async def read_messages(self, topic: str, offset: int, limit: int, wait_ms: int) -> Messages:
        """Messages from ``offset``; with ``wait_ms`` > 0 wait for the first one to arrive.

        Fewer than ``limit`` when their payloads reach ``max_page_bytes``: ``next_offset``
        goes on from there."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_ms / 1000
        while True:
            version = self._notifier.version(topic)
            messages = await self._call(
                self.store.read_log, topic, offset, limit, self._max_page_bytes
            )
            remaining = deadline - loop.time()
            if messages or remaining <= 0 or not self._accepting():
                break
            woke = await self._notifier.wait(topic, version, remaining)
            if not woke and not self._accepting():
                break
        next_offset = messages[-1].offset + 1 if messages else offset
        return Messages(messages, next_offset)

    # ----------------------------------------------------------------- consumer groups
    def _log_end(self, topic: str) -> int:
        return next((i.log_end_offset for i in self.store.topics() if i.topic == topic), 0)

    async def read_group(self, topic: str, group: str, limit: int, wait_ms: int) -> Messages:
        """Messages from ``group``'s committed offset (0 for a new group)."""
        offset = await self._call(self.groups.committed, topic, group)
        return await self.read_messages(topic, offset, limit, wait_ms)

    async def commit_group(self, topic: str, group: str, offset: int, force: bool) -> GroupOffset:
        def commit() -> GroupOffset:
            return self.groups.commit(topic, group, offset, self._log_end(topic), force=force)

        return await self._call(commit)

    async def list_groups(self, topic: str) -> tuple[int, list[GroupOffset]]:
        """The topic's log end offset and its groups (lag is exact at that log end)."""

        def read() -> tuple[int, list[GroupOffset]]:
            log_end = self._log_end(topic)
            return log_end, self.groups.groups(topic, log_end)

        return await self._call(read)

    # ----------------------------------------------------------------- routes
    async def get_route(self, topic: str) -> Route:
        """The topic's route; NotFoundError when none is set (its timers go to the log)."""
        route = self.routes.explicit(topic)
        if route is None:
            raise NotFoundError(f"no route is set for {topic}: its timers go to the embedded log")
        return route

    async def put_route(self, topic: str, route: Route) -> Route:
        checked = check_route(route, self._sinks)
        stored = await self._call(self.routes.put, topic, checked, self._clock.now_ms())
        _log_route_change(topic, stored)
        return stored

    async def delete_route(self, topic: str) -> Route:
        """Return the topic to the embedded log; NotFoundError when no route was set."""
        await self.get_route(topic)
        stored = await self._call(self.routes.delete, topic, self._clock.now_ms())
        _log_route_change(topic, stored)
        return stored


def _log_route_change(topic: str, route: Route) -> None:
    """One line per route change (the secret is never logged)."""
    log.info(
        "route of %s is now %s%s",
        topic,
        route.sink,
        f" ({route.url})" if route.url else "",
        extra={"event": "route_changed", "topic": topic, "sink": route.sink},
    )
