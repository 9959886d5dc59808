"""The dead-letters resource of the service: list, replay (one or a topic's), purge.

``TimerService.start`` builds it once the store is open, with the service's ``call``
(a blocking store call in a worker thread, 503 once shutdown has begun), as it builds
``app.topic_service``.
"""

from __future__ import annotations

import logging

from app.clock import Clock
from app.telemetry import Telemetry
from app.timer_requests import RequestLimits
from app.topic_service import WorkerCall
from storage.errors import ConflictError, NotFoundError
from storage.protocol import ScheduleResult, TimerPage, TimerStore, TimerView

log = logging.getLogger(__name__)


class DeadLetterService:
    def __init__(
        self,
        store: TimerStore,
        *,
        clock: Clock,
        call: WorkerCall,
        telemetry: Telemetry,
        limits: RequestLimits,
    ) -> None:
        self.store = store
        self.clock = clock
        self.call = call
        self.telemetry = telemetry
        self.limits = limits

    async def page(self, *, topic: str | None, limit: int, cursor: str | None) -> TimerPage:
        return await self.call(
            self.store.dead_letters,
            topic=topic,
            limit=limit,
            after=cursor,
            max_bytes=self.limits.max_page_bytes,
        )

    async def replay(self, topic: str, timer_id: str) -> tuple[ScheduleResult, TimerView | None]:
        """Schedule one dead letter again, due now; with the result, the identity as it was
        read just before (the dead letter: its payload, headers and requested time, which
        the replay keeps), for the answer to show the whole timer."""
        before = await self.call(self.store.get, topic, timer_id)
        return await self._replay_one(topic, timer_id), before

    async def _replay_one(self, topic: str, timer_id: str) -> ScheduleResult:
        now_ms = self.clock.now_ms()
        result = await self.call(self.store.replay_dead_letter, topic, timer_id, now_ms)
        self.telemetry.replayed.inc()
        return result

    async def replay_topic(self, topic: str) -> int:
        """Replay every dead letter of ``topic`` (pages of ``max_page_limit``).

        A dead letter whose topic+id lives again (scheduled anew since: pending, in flight
        or delivered) stays a dead letter, as its replay alone would be a 409, and one gone
        meanwhile (cancelled, purged) is passed over: the rest are replayed all the same.
        Stopping at the first one left the replay half done behind a 409 that said nothing
        of the timers already replayed, and stuck at that one on every retry.
        """
        replayed, cursor = 0, None
        while True:
            limit = self.limits.max_page_limit
            page = await self.page(topic=topic, limit=limit, cursor=cursor)
            for view in page.timers:
                try:
                    await self._replay_one(view.topic, view.id)
                except (ConflictError, NotFoundError):
                    continue
                replayed += 1
            if page.next_cursor is None or not page.timers:
                return replayed
            cursor = page.next_cursor

    async def purge(self, topic: str | None) -> int:
        purged = await self.call(self.store.purge_dead_letters, topic)
        self.telemetry.purged.inc(purged)
        log.info(
            "purged %d dead letters%s",
            purged,
            f" of topic {topic}" if topic else "",
            extra={"event": "dead_letters_purged", "topic": topic, "count": purged},
        )
        return purged
