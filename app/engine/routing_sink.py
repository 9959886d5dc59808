"""The routing sink: each topic's due timers go where the topic's route says.

Timers routed to the embedded log settle at once (the store's commit is their delivery,
exactly-once). Timers routed to a webhook or a Redis stream go to that route's *lane*:
its own sender (a pooled client), its own bounded concurrency and its own cap on timers
in flight. Lanes run on one asyncio loop in a thread of their own, so the dispatcher
hands them work without waiting; what they settle (delivered, failed) wakes the
dispatcher's settler, which collects and commits it at once. A lane at its cap takes nothing
more: its timers are deferred (rescheduled, no attempt counted), so one dead endpoint can
neither fill the delivery queue nor block other topics. A deferral rewrites the timers in
the store, so the lane spreads what it defers behind what it deferred before, at the
rate it settles (``Lane.defer_ms``): a backlog is rewritten about twice, not every
``busy_retry_ms`` until the route catches up (a busy loop that starved the route too).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from typing import Protocol

from app.clock import Clock
from app.engine.sinks import Outcome, Settled
from app.routing import Route, SinkSettings
from storage.protocol import LOG_SINK, DueTimer

log = logging.getLogger(__name__)


class RouteLookup(Protocol):
    def route_for(self, topic: str, due_ms: int) -> Route: ...

    def live_routes(self) -> set[Route]: ...


Report = Callable[[Settled], None]


class RouteSender(Protocol):
    """Delivers one route's timers (a webhook client, a Redis client); runs on the loop."""

    async def send(
        self, timers: Sequence[DueTimer], limit: asyncio.Semaphore, report: Report
    ) -> None:
        """Attempt every timer, at most ``limit`` requests at a time, and ``report`` each
        outcome as soon as it is known (so a slow request does not hold up the others)."""
        ...

    async def close(self) -> None: ...


SenderFactory = Callable[[Route, SinkSettings, Clock], RouteSender]


DEFER_MAX_MS = 60_000  # a saturated lane defers timers at most this far ahead
RATE_WINDOW_S = 1.0  # a lane's settle rate is measured over at least this long


class Lane:
    """One route's sender, concurrency limit and in-flight count."""

    def __init__(self, route: Route, sender: RouteSender, settings: SinkSettings) -> None:
        self.route = route
        self.sender = sender
        self.limit = asyncio.Semaphore(settings.concurrency)
        self.cap = settings.max_in_flight
        self.in_flight = 0
        self.settled = 0  # timers answered since the lane opened
        self._busy_retry_ms = settings.busy_retry_ms
        # until measured, the lane is taken to settle its cap every busy_retry_ms
        self._rate_per_s = settings.max_in_flight * 1000 / settings.busy_retry_ms
        self._horizon_ms = 0  # the timers deferred so far come back before this time
        self._window: tuple[float, int] = (time.monotonic(), 0)  # (monotonic s, settled)
        self._lock = threading.Lock()

    def reserve(self, n: int) -> bool:
        with self._lock:
            if self.in_flight and self.in_flight + n > self.cap:
                return False
            self.in_flight += n
            return True

    def _free(self, n: int) -> None:
        with self._lock:
            self.in_flight -= n
            self.settled += n

    def defer_ms(self, n: int, now_ms: int) -> int:
        """How far to defer ``n`` timers the lane had no room for: ``busy_retry_ms`` when
        nothing deferred is still to come back, else behind the timers deferred before,
        with room for ``n`` more at the rate the lane settled while saturated; at most
        DEFER_MAX_MS (a clock that jumped back, a stalled endpoint that recovers) unless
        ``busy_retry_ms`` is longer."""
        with self._lock:
            self._measure(now_ms)
            soonest_ms = now_ms + self._busy_retry_ms
            latest_ms = now_ms + max(DEFER_MAX_MS, self._busy_retry_ms)
            start_ms = min(max(soonest_ms, self._horizon_ms), latest_ms)
            spread_ms = math.ceil(n * 1000 / self._rate_per_s)
            self._horizon_ms = min(start_ms + spread_ms, latest_ms)
            return start_ms - now_ms

    def _measure(self, now_ms: int) -> None:
        """Update the settle rate over the window since the last (lock held). A window
        starts anew when the deferred timers have all come back: the rate is measured
        while the lane is saturated, where it is the route's own pace. Deferred timers
        are spread at twice that rate: a lane fed more slowly than it can go would measure
        only how fast it was fed, and stay that slow."""
        now_s, (since_s, since_settled) = time.monotonic(), self._window
        if self._horizon_ms <= now_ms:
            self._window = (now_s, self.settled)
        elif now_s - since_s >= RATE_WINDOW_S:
            rate = (self.settled - since_settled) / (now_s - since_s)
            self._rate_per_s = max(2 * rate, 1000 / DEFER_MAX_MS)
            self._window = (now_s, self.settled)

    async def run(self, timers: Sequence[DueTimer], out: Report) -> None:
        """Send ``timers``; every one is answered to ``out`` exactly once.

        A timer already answered is not answered again: after a sender raised, its timers
        are answered as failed, and a send of its own still going must not answer them
        later as delivered (they were moved to a retry meanwhile)."""
        done: set[bytes] = set()

        def report(item: Settled) -> None:
            fresh = _rest(item.timers, done)
            if len(fresh) < len(item.timers):
                if not fresh:
                    return
                item = dataclasses.replace(item, timers=fresh)
            done.update(t.key for t in fresh)
            self._free(len(fresh))
            out(item)

        try:
            await self.sender.send(timers, self.limit, report)
        except asyncio.CancelledError:  # stopping: back to pending, delivered again later
            report(Settled(_rest(timers, done), Outcome.RELEASED))
        except Exception as exc:  # a sender bug must not strand timers in flight
            log.exception("route sender failed")
            # the route's attempt: its sink (metrics, logs) and its max_attempts
            error = f"{type(exc).__name__}: {exc}"
            route = self.route
            rest = _rest(timers, done)
            report(Settled(rest, Outcome.FAILED, route.sink, error, route.max_attempts))
        rest = _rest(timers, done)
        if rest:  # a sender that forgot some: never strand them
            report(Settled(rest, Outcome.RELEASED))


def _due_ms(t: DueTimer) -> int:
    """When ``t`` fell due: its key time, or its creation when that came later. A past-due
    timer's key time is clamped to the scan cursor, which lags the clock by up to a tick,
    so one scheduled just after a route change would otherwise take the replaced route."""
    return max(t.key_ms, t.record.created_at_ms)


def _rest(timers: Sequence[DueTimer], done: set[bytes]) -> list[DueTimer]:
    return [t for t in timers if t.key not in done]


class RoutingSink:
    """A settling sink over the route table (see the module docstring)."""

    name = "routing"

    def __init__(
        self,
        routes: RouteLookup,
        settings: SinkSettings,
        clock: Clock,
        senders: dict[str, SenderFactory],
    ) -> None:
        self._routes = routes
        self._settings = settings
        self._clock = clock
        self._senders = senders
        self._lanes: dict[Route, Lane] = {}
        self._settled: deque[Settled] = deque()
        self._has_settled = threading.Event()  # set with each answer, cleared by collect
        self._running: set[Future[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if self._loop is not None:
                return
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=self._loop.run_forever, name="timerstore-sinks", daemon=True
            )
            self._thread.start()

    def submit(self, batch: Sequence[DueTimer]) -> list[Settled]:
        groups: dict[Route, list[DueTimer]] = defaultdict(list)
        for t in batch:
            groups[self._routes.route_for(t.topic, _due_ms(t))].append(t)
        settled: list[Settled] = []
        for route, timers in groups.items():
            if route.sink == LOG_SINK:
                settled.append(Settled(timers, Outcome.DELIVERED, LOG_SINK))
            elif (failure := self._try_dispatch(route, timers)) is not None:
                settled.append(failure)
        return settled

    def _try_dispatch(self, route: Route, timers: list[DueTimer]) -> Settled | None:
        """None when a lane took the timers, else what became of them."""
        try:
            lane = self._lane(route)
            taken = self._dispatch(lane, timers)
        except Exception as exc:  # the sink boundary: a client that cannot be built
            log.exception("route %s could not take %d timers", route.sink, len(timers))
            error = f"{type(exc).__name__}: {exc}"[:200]
            return Settled(timers, Outcome.FAILED, route.sink, error, route.max_attempts)
        if not taken:
            busy = f"route {route.sink} busy: {self._settings.max_in_flight} in flight"
            ms = lane.defer_ms(len(timers), self._clock.now_ms())
            return Settled(timers, Outcome.DEFERRED, route.sink, busy, defer_ms=ms)
        return None

    def _lane(self, route: Route) -> Lane:
        self.start()  # idempotent: a service whose engine never started still delivers
        lane = self._lanes.get(route)
        if lane is None:
            self._prune()
            sender = self._senders[route.sink](route, self._settings, self._clock)
            lane = self._lanes[route] = Lane(route, sender, self._settings)
        return lane

    def _dispatch(self, lane: Lane, timers: list[DueTimer]) -> bool:
        if not lane.reserve(len(timers)):
            return False
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(lane.run(timers, self._answered), self._loop)
        self._running.add(future)
        future.add_done_callback(self._running.discard)
        return True

    def _prune(self) -> None:
        """Close idle lanes of routes no timer can take any more (changed routes)."""
        live = self._routes.live_routes()
        for route, lane in list(self._lanes.items()):
            if route not in live and lane.in_flight == 0:
                del self._lanes[route]
                assert self._loop is not None
                asyncio.run_coroutine_threadsafe(lane.sender.close(), self._loop)

    def lane_count(self) -> int:
        """Routes with an open lane (a pooled client)."""
        return len(self._lanes)

    def _answered(self, item: Settled) -> None:
        """A lane's answer (on the loop): queued for ``collect``, which it wakes."""
        self._settled.append(item)
        self._has_settled.set()

    def wait_settled(self, timeout_s: float) -> bool:
        return self._has_settled.wait(timeout_s)

    def collect(self) -> list[Settled]:
        """What settled since the last call, like outcomes merged (one commit each; the
        merged items' send times kept, one each)."""
        self._has_settled.clear()  # before draining: an answer appended after is not missed
        merged: dict[tuple[object, ...], list[DueTimer]] = {}
        sends: dict[tuple[object, ...], list[float]] = {}
        first: dict[tuple[object, ...], Settled] = {}
        while self._settled:
            item = self._settled.popleft()
            key = (item.outcome, item.sink, item.error, item.max_attempts, item.defer_ms)
            first.setdefault(key, item)
            merged.setdefault(key, []).extend(item.timers)
            sends.setdefault(key, []).extend(item.sends_s)
        return [
            dataclasses.replace(first[key], timers=ts, sends_s=tuple(sends[key]))
            for key, ts in merged.items()
        ]

    def in_flight(self) -> int:
        return sum(lane.in_flight for lane in list(self._lanes.values()))

    def stop(self) -> None:
        """Let running sends finish for ``stop_wait_ms``, cancel the rest (released)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        _, late = wait_futures(list(self._running), timeout=self._settings.stop_wait_ms / 1000)
        senders = [lane.sender for lane in self._lanes.values()]
        ending = asyncio.run_coroutine_threadsafe(_cancel_and_close(senders), loop)
        wait_futures([ending], timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
        self._loop = self._thread = None
        self._lanes.clear()
        if late:
            log.info("sinks stopped with %d sends unfinished (released)", len(late))


async def _cancel_and_close(senders: list[RouteSender]) -> None:
    """Cancel every running send (each releases its timers) and close the clients."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.gather(*(sender.close() for sender in senders), return_exceptions=True)
