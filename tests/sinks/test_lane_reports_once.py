"""A lane answers every timer exactly once, also when its sender raises while a send of
its own is still going: the send that finishes later must not answer its timers again
(the dispatcher would commit as delivered timers it had already moved to a retry)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from app.engine.routing_sink import Lane
from app.engine.sinks import Outcome, Settled
from app.routing import Route, SinkSettings
from storage.protocol import DueTimer
from storage.records import TimerRecord

NOW = 1_700_000_000_000


def _timers(n: int) -> list[DueTimer]:
    record = TimerRecord(b"p", {}, NOW, NOW)
    return [DueTimer(f"k{i}".encode(), "t", f"t{i}", NOW, record) for i in range(n)]


class HalfDoneSender:
    """Sends the first timer in a task of its own, then raises (a bug) before the task is
    done: the task reports its timer delivered afterwards."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def send(self, timers: Sequence[DueTimer], limit: object, report) -> None:
        async def first() -> None:
            await self.release.wait()
            report(Settled(timers[:1], Outcome.DELIVERED, "webhook"))

        self.task = asyncio.create_task(first())
        raise RuntimeError("sender bug")

    async def close(self) -> None:
        return None


def test_a_timer_is_answered_once_when_its_send_ends_after_the_sender_raised() -> None:
    answers: list[Settled] = []
    sender = HalfDoneSender()
    route = Route("webhook", "http://127.0.0.1:9/x", "k")
    lane = Lane(route, sender, SinkSettings())  # type: ignore[arg-type]
    timers = _timers(3)

    async def scenario() -> None:
        assert lane.reserve(len(timers))
        await lane.run(timers, answers.append)
        sender.release.set()  # the send still going ends now, after the lane's answer
        assert sender.task is not None
        await sender.task

    asyncio.run(scenario())
    answered = [t.id for item in answers for t in item.timers]
    assert sorted(answered) == ["t0", "t1", "t2"], answers  # each once
    assert [a.outcome for a in answers] == [Outcome.FAILED]
    assert lane.in_flight == 0 and lane.settled == 3
