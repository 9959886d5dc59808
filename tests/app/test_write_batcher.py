"""Group commit of single schedules (app.write_batcher): concurrent ``schedule_one`` calls
share store calls, and each keeps its own answer (a 409 of one fails no other)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.clock import FakeClock
from app.config import load_settings
from app.service import TimerService
from app.stores import open_store
from storage.errors import ConflictError, StoreClosedError, StoreFullError
from storage.grouping import Outcome, schedule_each
from storage.protocol import NewTimer, ScheduleResult, TimerStore

T0_MS = 1_700_000_000_000


@dataclass
class Req:
    """A schedule request (the ``app.timer_requests.TimerRequest`` shape)."""

    topic: str
    id: str | None = None
    deliver_at_ms: int | None = None
    delay_ms: int | None = 60_000
    payload: str | None = "x"
    payload_b64: bytes | None = None
    headers: dict[str, str] | None = None


class CountingStore:
    """The real store, counting its ``schedule`` calls and the timers of each."""

    def __init__(self, store: TimerStore) -> None:
        self._store = store
        self.schedule_sizes: list[int] = []

    def schedule(self, timers: list[NewTimer], now_ms: int) -> list[ScheduleResult]:
        self.schedule_sizes.append(len(timers))
        return self._store.schedule(timers, now_ms)

    def schedule_each(self, timers: list[NewTimer], now_ms: int) -> list[Outcome]:
        return schedule_each(self.schedule, timers, now_ms)  # counted by ``schedule``

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _service(tmp_path: Path) -> tuple[TimerService, FakeClock, Callable[[], CountingStore]]:
    settings = load_settings(environ={}, overrides={"data_dir": str(tmp_path / "data")})
    clock = FakeClock(T0_MS)
    opened: list[CountingStore] = []

    def opener(s: Any) -> TimerStore:
        opened.append(CountingStore(open_store(s)))
        return opened[0]  # type: ignore[return-value]

    service = TimerService(settings, clock, store_opener=opener, run_engine=False)
    return service, clock, lambda: opened[0]


def _run(tmp_path: Path, body: Callable[..., Any]) -> None:
    async def main() -> None:
        service, clock, store = _service(tmp_path)
        await service.start()
        try:
            await body(service, clock, store())
        finally:
            await service.stop()

    asyncio.run(main())


def test_concurrent_single_schedules_share_store_calls(tmp_path: Path) -> None:
    async def body(service: TimerService, clock: FakeClock, store: CountingStore) -> None:
        answers = await asyncio.gather(
            *(service.schedule_one(Req("orders", f"o{i}")) for i in range(50))
        )
        assert [r.id for r, _ in answers] == [f"o{i}" for i in range(50)]
        assert not any(r.replaced for r, _ in answers)
        assert sum(store.schedule_sizes) == 50
        assert len(store.schedule_sizes) <= 2, store.schedule_sizes  # one per loop turn
        for i in range(50):
            assert (await service.get("orders", f"o{i}")).state == "pending"

    _run(tmp_path, body)


def test_a_conflict_fails_only_its_own_request(tmp_path: Path) -> None:
    async def body(service: TimerService, clock: FakeClock, store: CountingStore) -> None:
        await service.schedule_one(Req("orders", "paid", delay_ms=0))
        assert service.engine is not None
        assert service.engine.run_once(clock.now_ms()) == 1  # delivered: a reschedule is a 409
        answers = await asyncio.gather(
            service.schedule_one(Req("orders", "a")),
            service.schedule_one(Req("orders", "paid")),
            service.schedule_one(Req("orders", "b")),
            return_exceptions=True,
        )
        conflict = answers[1]
        assert isinstance(conflict, ConflictError), answers
        assert (conflict.field, conflict.state) == ("id", "delivered")
        assert "timers[" not in conflict.message
        for answer, timer_id in ((answers[0], "a"), (answers[2], "b")):
            assert not isinstance(answer, BaseException), answer
            assert answer[0].id == timer_id
            assert (await service.get("orders", timer_id)).state == "pending"

    _run(tmp_path, body)


def test_the_same_identity_twice_in_a_group_is_new_then_rescheduled(tmp_path: Path) -> None:
    async def body(service: TimerService, clock: FakeClock, store: CountingStore) -> None:
        first, second = await asyncio.gather(
            service.schedule_one(Req("orders", "o1", delay_ms=1_000)),
            service.schedule_one(Req("orders", "o1", delay_ms=2_000)),
        )
        assert (first[0].replaced, second[0].replaced) == (False, True)
        assert (await service.get("orders", "o1")).deliver_at_ms == T0_MS + 2_000

    _run(tmp_path, body)


def test_after_shutdown_began_every_waiting_schedule_is_refused(tmp_path: Path) -> None:
    async def body(service: TimerService, clock: FakeClock, store: CountingStore) -> None:
        service.begin_shutdown()
        answers = await asyncio.gather(
            *(service.schedule_one(Req("orders", f"o{i}")) for i in range(3)),
            return_exceptions=True,
        )
        assert all(isinstance(a, StoreClosedError) for a in answers), answers
        assert store.schedule_sizes == []

    _run(tmp_path, body)


@pytest.mark.parametrize("count", [1, 3])
def test_each_caller_gets_its_own_server_made_id(tmp_path: Path, count: int) -> None:
    async def body(service: TimerService, clock: FakeClock, store: CountingStore) -> None:
        answers = await asyncio.gather(*(service.schedule_one(Req("t")) for _ in range(count)))
        ids = [r.id for r, _ in answers]
        assert len(set(ids)) == count and all(t.id == r.id for r, t in answers)

    _run(tmp_path, body)


def test_a_store_wide_error_is_every_callers_without_writing_each_alone(tmp_path: Path) -> None:
    """A full disk refuses the whole group: each caller gets it from that one call, and the
    group is not written again timer by timer (that fallback is for one timer's fault)."""

    async def body(service: TimerService, clock: FakeClock, store: CountingStore) -> None:
        def full(timers: list[NewTimer], now_ms: int) -> list[ScheduleResult]:
            store.schedule_sizes.append(len(timers))
            raise StoreFullError("no space left on device")

        store.schedule = full  # type: ignore[method-assign]
        answers = await asyncio.gather(
            *(service.schedule_one(Req("orders", f"f{i}")) for i in range(20)),
            return_exceptions=True,
        )
        assert all(isinstance(a, StoreFullError) for a in answers), answers
        assert len(store.schedule_sizes) < 20  # grouped, and no one-by-one retry
        assert sum(store.schedule_sizes) == 20

    _run(tmp_path, body)
