"""The asyncio client, on ``httpx.AsyncClient`` (the same operations as ``client.sync``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import TypeVar

import httpx

from client import calls
from client.calls import (
    LONG_POLL_LIMITS,
    Call,
    Payload,
    http_options,
    resendable,
    timeout_of,
)
from client.errors import TimerStoreClientError
from client.models import (
    BatchCancelled,
    BatchScheduled,
    Cancelled,
    GroupList,
    GroupOffset,
    MessagePage,
    Scheduled,
    Timer,
    TimerPage,
    TimerSpec,
    Topic,
    TopicList,
)
from client.routing import OwnerMap, Part, merged, split_by_owner

T = TypeVar("T")


class AsyncTimerStoreClient:
    """Schedule, inspect, list, cancel and consume timers on a timerstore server.

    Error answers raise the ``client.errors`` class of the server's code (carrying
    ``status``, ``code``, ``message``, ``field``); ``cancel`` instead returns what it did.
    Use as a context manager, or call ``close()``.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
        route_batches: bool = False,
    ) -> None:
        options = http_options(api_key, timeout_s)
        self._http = httpx.AsyncClient(base_url=base_url, transport=transport, **options)
        # long-polls in a pool of their own (see calls.LONG_POLL_LIMITS); a transport
        # given serves every call
        self._polls = self._http
        if transport is None:
            self._polls = httpx.AsyncClient(base_url=base_url, limits=LONG_POLL_LIMITS, **options)
        self._timeout_s = timeout_s
        self._route_batches = route_batches  # see client.routing
        self._owners: OwnerMap | None = None
        self._reaching: set[tuple[str, str]] = set()  # (url, node id) that answered as it

    async def _send(self, call: Call[T]) -> T:
        try:
            answer = await self._request(call)
        except httpx.RemoteProtocolError:
            if not resendable(call):
                raise
            answer = await self._request(call)  # the pool dropped the closed connection
        return call.read(answer.status_code, answer.content)

    async def _request(self, call: Call[T]) -> httpx.Response:
        http = self._polls if call.wait_ms > 0 else self._http
        return await http.request(
            call.method,
            call.path,
            params=call.params,
            content=call.body,
            headers=call.headers,
            timeout=timeout_of(call, self._timeout_s),
        )

    async def schedule(
        self,
        topic: str,
        *,
        id: str | None = None,
        deliver_at_ms: int | None = None,
        delay_ms: int | None = None,
        payload: Payload | None = None,
        headers: dict[str, str] | None = None,
    ) -> Scheduled:
        """One timer, due at ``deliver_at_ms`` or after ``delay_ms``; a ``str`` payload
        is text, ``bytes``/``bytearray``/``memoryview`` binary (another type: TypeError).
        ``replaced`` says whether it rescheduled a pending topic+id."""
        spec = calls.spec(
            topic,
            id=id,
            deliver_at_ms=deliver_at_ms,
            delay_ms=delay_ms,
            payload=payload,
            headers=headers,
        )
        return await self._send(calls.schedule(spec))

    async def schedule_many(self, specs: Sequence[TimerSpec]) -> BatchScheduled:
        """A batch, stored all together or not at all (InvalidInput lists every bad one).

        With ``route_batches`` (for a cluster) each partition owner's part goes straight
        to it, and each part is stored all or nothing on its own (see ``client.routing``).
        """
        if not self._route_batches or not specs:
            return await self._send(calls.schedule_many(specs))
        parts = split_by_owner(specs, await self._owner_map())
        answers = await asyncio.gather(*(self._send_part(p) for p in parts))
        return merged(parts, answers)

    async def _owner_map(self) -> OwnerMap:
        """The owners, read again once stale; a URL is used once it answered as its node."""
        if self._owners is None or not self._owners.fresh:
            owners = OwnerMap.of(await self._send(calls.cluster()))
            for url, node in owners.node_of.items():
                if (url, node) not in self._reaching and await self._answers_as(url, node):
                    self._reaching.add((url, node))  # (one that did not is asked again)
            self._owners = owners.reaching(lambda u: (u, owners.node_of[u]) in self._reaching)
        return self._owners

    async def _answers_as(self, url: str, node_id: str) -> bool:
        try:
            return (await self._send(calls.cluster().at(url))).node_id == node_id
        except (httpx.TransportError, TimerStoreClientError):
            return False

    async def _send_part(self, part: Part) -> BatchScheduled | TimerStoreClientError:
        """One owner's part; a refusal is returned (``merged`` raises the first)."""
        call = calls.schedule_many(part.specs)
        try:
            if part.url is not None:
                try:
                    return await self._send(call.at(part.url))
                except httpx.ConnectError:  # nothing sent: any node takes it instead
                    self._owners = (await self._owner_map()).without(part.url)
            return await self._send(call)
        except TimerStoreClientError as refused:
            return refused

    async def get(self, topic: str, timer_id: str) -> Timer:
        return await self._send(calls.get(topic, timer_id))

    async def cancel(self, topic: str, timer_id: str) -> Cancelled:
        return await self._send(calls.cancel(topic, timer_id))

    async def cancel_many(self, idents: Sequence[tuple[str, str]]) -> BatchCancelled:
        """Cancel each ``(topic, id)`` on its own, in one request; each outcome as
        ``cancel`` gives it (a cluster node forwards each partition's part to its owner)."""
        return await self._send(calls.cancel_many(idents))

    async def list_pending(
        self,
        *,
        topic: str | None = None,
        from_ms: int = 0,
        to_ms: int | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> TimerPage:
        return await self._send(calls.list_pending(topic, from_ms, to_ms, limit, cursor))

    async def iter_pending(
        self, *, topic: str | None = None, limit: int = 100
    ) -> AsyncIterator[Timer]:
        """Every pending timer in due-time order, page by page, until the last page."""
        cursor: str | None = None
        while True:
            page = await self.list_pending(topic=topic, limit=limit, cursor=cursor)
            for timer in page.timers:
                yield timer
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def consume(
        self,
        topic: str,
        *,
        offset: int | None = None,
        group: str | None = None,
        limit: int = 100,
        wait_ms: int = 0,
    ) -> MessagePage:
        """Delivered messages from ``offset`` (default 0), or from ``group``'s committed
        offset when only a group is given; waits up to ``wait_ms`` for the first."""
        return await self._send(calls.consume(topic, offset, group, limit, wait_ms))

    async def commit(
        self, topic: str, group: str, offset: int, *, force: bool = False
    ) -> GroupOffset:
        """Commit the next offset ``group`` reads (never back unless ``force``: Conflict)."""
        return await self._send(calls.commit(topic, group, offset, force))

    async def groups(self, topic: str) -> GroupList:
        """The topic's consumer groups with committed offsets and exact lag."""
        return await self._send(calls.groups(topic))

    async def list_topics(
        self, *, order: str = "topic", limit: int = 100, cursor: str | None = None
    ) -> TopicList:
        """A page of topics by name, or with ``order="pending"`` most pending first."""
        return await self._send(calls.topics(order, limit, cursor))

    async def topics(self, *, limit: int = 1000) -> list[Topic]:
        """Every topic by name, page by page until the last page."""
        found: list[Topic] = []
        cursor: str | None = None
        while True:
            page = await self.list_topics(limit=limit, cursor=cursor)
            found += page.topics
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor

    async def dead_letters(
        self, *, topic: str | None = None, limit: int = 100, cursor: str | None = None
    ) -> TimerPage:
        return await self._send(calls.dead_letters(topic, limit, cursor))

    async def replay(self, topic: str, timer_id: str) -> Timer:
        return await self._send(calls.replay(topic, timer_id))

    async def replay_topic(self, topic: str) -> int:
        """Schedule every dead letter of ``topic`` again, due now; how many there were."""
        return (await self._send(calls.replay_topic(topic))).replayed

    async def purge_dead_letters(self, *, topic: str | None = None) -> int:
        """Delete the dead letters (all, or ``topic``'s); how many were deleted."""
        return (await self._send(calls.purge_dead_letters(topic))).purged

    async def close(self) -> None:
        await self._http.aclose()
        await self._polls.aclose()  # closing a closed client does nothing

    async def __aenter__(self) -> AsyncTimerStoreClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
