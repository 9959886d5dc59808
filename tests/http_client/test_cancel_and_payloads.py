"""Both clients against a real server: which 404 a cancel reads as "unknown", and which
payload types go as binary."""

from __future__ import annotations

import asyncio

import pytest

from client import (
    AsyncTimerStoreClient,
    CancelOutcome,
    InvalidInput,
    NotFound,
    TimerStoreClient,
    spec,
)

FAR_MS = 4_000_000_000_000  # year 2096: never due during a test
BINARY = (bytearray(b"data\x00\xff"), memoryview(b"data\x00\xff"))


def test_cancel_is_unknown_only_for_the_timers_own_not_found(base_url: str) -> None:
    with TimerStoreClient(base_url) as ts:
        ts.schedule("cl", id="x", deliver_at_ms=FAR_MS)
        assert ts.cancel("cl", "x").outcome is CancelOutcome.CANCELLED
        assert ts.cancel("cl", "x").outcome is CancelOutcome.UNKNOWN
    wrong = TimerStoreClient(f"{base_url}/wrong")  # no such route on the server
    with wrong, pytest.raises(NotFound) as raised:
        wrong.cancel("cl", "x")
    assert (raised.value.status, raised.value.message) == (404, "Not Found")


def test_cancel_many_answers_each_identity(base_url: str) -> None:
    with TimerStoreClient(base_url) as ts:
        ts.schedule_many([spec("cm", id=i, deliver_at_ms=FAR_MS) for i in ("a", "b")])
        answer = ts.cancel_many([("cm", "b"), ("cm", "zz"), ("cm", "a"), ("cm", "a")])
        assert answer.cancelled == 2
        assert [(t.id, t.outcome) for t in answer.timers] == [
            ("b", CancelOutcome.CANCELLED),
            ("zz", CancelOutcome.UNKNOWN),
            ("a", CancelOutcome.CANCELLED),
            ("a", CancelOutcome.UNKNOWN),
        ]
        with pytest.raises(InvalidInput) as raised:
            ts.cancel_many([("cm", "ok"), ("cm", "not ok")])
        assert raised.value.field == "timers[1].id"


async def _cancel_many(base_url: str) -> list[CancelOutcome]:
    async with AsyncTimerStoreClient(base_url) as ts:
        await ts.schedule("acm", id="a", deliver_at_ms=FAR_MS)
        answer = await ts.cancel_many([("acm", "a"), ("acm", "a")])
        return [t.outcome for t in answer.timers]


def test_async_cancel_many(base_url: str) -> None:
    outcomes = asyncio.run(_cancel_many(base_url))
    assert outcomes == [CancelOutcome.CANCELLED, CancelOutcome.UNKNOWN]


async def _cancel_twice_then_at_a_wrong_url(base_url: str) -> NotFound:
    async with AsyncTimerStoreClient(base_url) as ts:
        await ts.schedule("cl", id="y", deliver_at_ms=FAR_MS)
        assert (await ts.cancel("cl", "y")).outcome is CancelOutcome.CANCELLED
        assert (await ts.cancel("cl", "y")).outcome is CancelOutcome.UNKNOWN
    async with AsyncTimerStoreClient(f"{base_url}/wrong") as wrong:
        with pytest.raises(NotFound) as raised:
            await wrong.cancel("cl", "y")
    return raised.value


def test_async_cancel_is_unknown_only_for_the_timers_own_not_found(base_url: str) -> None:
    error = asyncio.run(_cancel_twice_then_at_a_wrong_url(base_url))
    assert (error.status, error.message) == (404, "Not Found")


def test_bytearray_and_memoryview_payloads_are_stored_as_binary(base_url: str) -> None:
    with TimerStoreClient(base_url) as ts:
        for n, payload in enumerate(BINARY):
            ts.schedule("bin", id=f"one{n}", deliver_at_ms=FAR_MS, payload=payload)
        ts.schedule_many([spec("bin", id="many", deliver_at_ms=FAR_MS, payload=BINARY[0])])
        for timer_id in ("one0", "one1", "many"):
            got = ts.get("bin", timer_id)
            assert (got.payload_b64, got.payload) == (b"data\x00\xff", None), timer_id


async def _schedule_binary_and_read_back(base_url: str) -> list[bytes | None]:
    async with AsyncTimerStoreClient(base_url) as ts:
        for n, payload in enumerate(BINARY):
            await ts.schedule("abin", id=f"a{n}", deliver_at_ms=FAR_MS, payload=payload)
        return [(await ts.get("abin", f"a{n}")).payload_b64 for n in range(len(BINARY))]


def test_async_bytearray_and_memoryview_payloads_are_stored_as_binary(base_url: str) -> None:
    stored = asyncio.run(_schedule_binary_and_read_back(base_url))
    assert stored == [b"data\x00\xff"] * len(BINARY)


@pytest.mark.parametrize("payload", [123, {"a": 1}, ["x"], 1.5])
def test_a_payload_of_another_type_is_a_type_error_naming_payload(payload: object) -> None:
    with pytest.raises(TypeError, match="payload"):
        spec("t", delay_ms=1, payload=payload)  # type: ignore[arg-type]
