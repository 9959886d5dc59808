"""Both clients against a real server: long-polls do not starve other calls of
connections, a delivered timer names its sink, and a topic's dead letters are replayed and
purged."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from client import AsyncTimerStoreClient, MessagePage, TimerStoreClient, spec
from tests.api.helpers import ThreadServer, make_settings
from tests.waiting import wait_for

POLLS = 100  # httpx's default pool: this many long-polls held every connection of it


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[ThreadServer, str]]:
    """A real server and its URL, kept at hand to see how many long-polls are parked."""
    srv = ThreadServer(make_settings(tmp_path / "data", engine={"tick_ms": 5}))
    try:
        yield srv, srv.start()
    finally:
        srv.stop()


def _parked(srv: ThreadServer) -> int:
    return sum(srv.service.notifier.waiting(f"lp{i}") for i in range(POLLS))


def test_long_polls_leave_connections_for_other_calls(
    server: tuple[ThreadServer, str],
) -> None:
    srv, url = server
    with TimerStoreClient(url, timeout_s=2) as ts, ThreadPoolExecutor(POLLS) as pool:
        polls = [pool.submit(ts.consume, f"lp{i}", wait_ms=20_000) for i in range(POLLS)]
        wait_for(lambda: _parked(srv) == POLLS, timeout_s=15, what="every long-poll parked")
        # before the fix: PoolTimeout after timeout_s, every connection held by a poll
        done = ts.schedule_many([spec(f"lp{i}", id=f"m{i}", delay_ms=0) for i in range(POLLS)])
        assert done.scheduled == POLLS
        pages: list[MessagePage] = [poll.result(timeout=15) for poll in polls]
    assert [[m.id for m in page.messages] for page in pages] == [[f"m{i}"] for i in range(POLLS)]


async def _polls_then_schedule(srv: ThreadServer, url: str) -> list[list[str]]:
    async with AsyncTimerStoreClient(url, timeout_s=2) as ts:
        polls = [asyncio.create_task(ts.consume(f"lp{i}", wait_ms=20_000)) for i in range(POLLS)]
        try:
            for _ in range(1500):  # bounded: 15 s
                if _parked(srv) == POLLS:
                    break
                await asyncio.sleep(0.01)  # polling a state, not ordering events
            assert _parked(srv) == POLLS
            # before the fix: PoolTimeout after timeout_s, every connection held by a poll
            await ts.schedule_many([spec(f"lp{i}", id=f"m{i}", delay_ms=0) for i in range(POLLS)])
            pages = await asyncio.wait_for(asyncio.gather(*polls), 15)
        finally:  # no poll outlives the test, whatever failed
            for poll in polls:
                poll.cancel()
            await asyncio.gather(*polls, return_exceptions=True)
        return [[m.id for m in page.messages] for page in pages]


def test_async_long_polls_leave_connections_for_other_calls(
    server: tuple[ThreadServer, str],
) -> None:
    assert asyncio.run(_polls_then_schedule(*server)) == [[f"m{i}"] for i in range(POLLS)]


def test_a_delivered_timer_names_its_sink(base_url: str) -> None:
    with TimerStoreClient(base_url) as ts:
        ts.schedule("s", id="d", delay_ms=0)
        wait_for(lambda: ts.get("s", "d").state == "delivered", timeout_s=15, what="delivered")
        assert ts.get("s", "d").sink == "log"


@pytest.fixture
def refusing_url() -> Iterator[str]:
    """A URL whose port is bound but never listens: every connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/hook"


def _route_to(base_url: str, topic: str, url: str) -> None:
    """Routes are not the client's (they are an admin's): set one over plain HTTP."""
    route = {"sink": "webhook", "url": url, "secret": "s", "max_attempts": 1}
    answer = httpx.put(f"{base_url}/v1/topics/{topic}/route", json=route, timeout=10)
    assert answer.status_code == 200, answer.text


def test_dead_letters_of_a_topic_are_replayed_and_purged(base_url: str, refusing_url: str) -> None:
    _route_to(base_url, "dead", refusing_url)
    with TimerStoreClient(base_url) as ts:
        ts.schedule_many([spec("dead", id=f"x{i}", delay_ms=0) for i in range(2)])
        ts.schedule("alive", id="p", deliver_at_ms=4_000_000_000_000)

        def dead() -> bool:
            return all(ts.get("dead", f"x{i}").state == "dead_lettered" for i in range(2))

        wait_for(dead, timeout_s=15, what="two dead letters")
        assert ts.replay_topic("dead") == 2
        wait_for(dead, timeout_s=15, what="dead again: the route still refuses")
        assert ts.purge_dead_letters(topic="alive") == 0
        assert ts.purge_dead_letters(topic="dead") == 2
        assert ts.dead_letters().timers == []
        assert ts.replay_topic("dead") == 0


async def _replay_and_purge(base_url: str) -> tuple[int, int, int]:
    async with AsyncTimerStoreClient(base_url) as ts:
        await ts.schedule("adead", id="y", delay_ms=0)
        for _ in range(1500):  # bounded: 15 s
            if (await ts.dead_letters(topic="adead")).timers:
                break
            await asyncio.sleep(0.01)  # polling a state, not ordering events
        replayed = await ts.replay_topic("adead")
        for _ in range(1500):
            if (await ts.get("adead", "y")).state == "dead_lettered":
                break
            await asyncio.sleep(0.01)
        return replayed, await ts.purge_dead_letters(), len((await ts.dead_letters()).timers)


def test_async_dead_letters_of_a_topic_are_replayed_and_purged(
    base_url: str, refusing_url: str
) -> None:
    _route_to(base_url, "adead", refusing_url)
    assert asyncio.run(_replay_and_purge(base_url)) == (1, 1, 0)
