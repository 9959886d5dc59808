"""The asyncio client against a real server: the same operations, awaited."""

from __future__ import annotations

import asyncio

import pytest

from client import AsyncTimerStoreClient, CancelOutcome, InvalidInput, NotFound, spec

FAR_MS = 4_000_000_000_000


async def _first_pending_ids(
    ts: AsyncTimerStoreClient, *, topic: str, limit: int, most: int
) -> list[str]:
    """Up to ``most`` ids from ``iter_pending``: bounded, so a cursor that never ends
    fails the comparison instead of hanging the test."""
    ids: list[str] = []
    async for timer in ts.iter_pending(topic=topic, limit=limit):
        ids.append(timer.id)
        if len(ids) >= most:
            break
    return ids


async def _flow(base_url: str) -> None:
    async with AsyncTimerStoreClient(base_url) as ts:
        made = await ts.schedule("a", id="one", deliver_at_ms=FAR_MS, payload="hi")
        assert not made.replaced and (await ts.get("a", "one")).payload == "hi"
        batch = [spec("a", id=f"b{i}", deliver_at_ms=FAR_MS + i + 1) for i in range(3)]
        assert (await ts.schedule_many(batch)).scheduled == 3
        ids = await _first_pending_ids(ts, topic="a", limit=2, most=5)
        assert ids == ["one", "b0", "b1", "b2"]
        assert (await ts.cancel("a", "one")).outcome is CancelOutcome.CANCELLED
        assert (await ts.cancel("a", "one")).outcome is CancelOutcome.UNKNOWN
        with pytest.raises(NotFound):
            await ts.get("a", "one")
        with pytest.raises(InvalidInput) as bad:
            await ts.consume("a", offset=-1)
        assert bad.value.field == "offset"
        await ts.schedule("a", id="now", delay_ms=0, payload=b"\x00")
        page = await ts.consume("a", wait_ms=3000)
        for _ in range(10):  # bounded: ten long-polls of 3 s
            if page.messages:
                break
            page = await ts.consume("a", wait_ms=3000)
        assert [(m.id, m.payload_b64) for m in page.messages] == [("now", b"\x00")]
        late = await ts.cancel("a", "now")
        assert (late.outcome, late.state) == (CancelOutcome.TOO_LATE, "delivered")
        assert (await ts.dead_letters()).timers == []


def test_the_async_client_does_every_operation(base_url: str) -> None:
    asyncio.run(_flow(base_url))


async def _polls_on_one_client(base_url: str) -> list[list[str]]:
    async with AsyncTimerStoreClient(base_url) as ts:
        polls = asyncio.gather(*(ts.consume(f"w{i}", wait_ms=20_000) for i in range(3)))
        await asyncio.gather(*(ts.schedule(f"w{i}", id=f"m{i}", delay_ms=0) for i in range(3)))
        return [[m.id for m in page.messages] for page in await polls]


def test_concurrent_long_polls_on_one_client_each_get_their_topics_message(
    base_url: str,
) -> None:
    assert asyncio.run(_polls_on_one_client(base_url)) == [["m0"], ["m1"], ["m2"]]


async def _topics(base_url: str) -> None:
    async with AsyncTimerStoreClient(base_url) as ts:
        await ts.schedule_many([spec(f"t{i}", id="x", deliver_at_ms=FAR_MS) for i in range(5)])
        await ts.schedule("t3", id="y", deliver_at_ms=FAR_MS)
        assert [t.topic for t in await ts.topics(limit=2)] == [f"t{i}" for i in range(5)]
        page = await ts.list_topics(order="pending", limit=1)
        assert [(t.topic, t.pending) for t in page.topics] == [("t3", 2)] and page.total == 5


def test_async_topics_follow_every_page(base_url: str) -> None:
    asyncio.run(_topics(base_url))
