"""The application service behind the REST API: api -> app (this) -> storage.

It owns the store and the engine for the life of the process, turns requests into
``NewTimer``s (clock, ids, limits), and runs every store call that touches RocksDB in a
worker thread so the event loop is never blocked by a write, a lock wait or a scan.
A batch is one store call, so it is stored all together or not at all, a 409 included.
``limits.max_batch_timers`` (10,000) bounds that call: ``db.write`` holds the GIL, and
10,000 timers held it for about 15 ms here (a 100,000-entry WriteBatch froze the loop for
85 ms; see DESIGN.md).

Lifecycle: ``start`` (open store, start engine) -> ``begin_shutdown`` (refuse new work
with StoreClosedError = 503, wake long-polls) -> ``stop`` (wait for store calls in
progress, stop the engine so queued batches commit, close the store).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import operator
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

import anyio.to_thread

from app import readiness
from app import stats as stats_mod
from app.clock import Clock, SystemClock
from app.cluster_view import CLUSTER_INGEST_REFUSED, cluster_view_of
from app.config import Settings
from app.dead_letter_service import DeadLetterService
from app.engine import Engine
from app.engine.redis_sink import REDIS_SINK, RedisStreamSender
from app.engine.routing_sink import RoutingSink, SenderFactory
from app.engine.sinks import SettlingSink, Sink
from app.engine.webhook_sink import WEBHOOK_SINK, WebhookSender
from app.groups import GroupOffsets
from app.notify import TopicNotifier
from app.routing import RouteTable
from app.single_schedules import SingleSchedules
from app.stats import ServiceStats
from app.stores import log_store_opened, open_store
from app.telemetry import Telemetry
from app.telemetry_gauges import ServiceGauges
from app.timer_requests import (
    IdMaker,
    Problem,
    TimerRefRequest,
    TimerRequest,
    to_idents,
    to_new_timers,
)
from app.topic_service import TopicService
from app.write_batcher import WriteBatcher
from storage.errors import (
    ConflictError,
    NotFoundError,
    StoreClosedError,
    StoreFullError,
    UnsupportedError,
)
from storage.protocol import (
    CancelOutcome,
    CancelResult,
    ClusterView,
    HousekeepingReport,
    IngestReport,
    NewTimer,
    ScheduleResult,
    StoreReadings,
    SupportsCluster,
    SupportsIngest,
    TimerPage,
    TimerStore,
    TimerView,
)

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")
CLOSE_WAIT_S = 30.0
_REPLACED = operator.attrgetter("replaced")


class TimerService:
    def __init__(
        self,
        settings: Settings,
        clock: Clock | None = None,
        *,
        store_opener: Callable[[Settings], TimerStore] = open_store,
        sink: Sink | SettlingSink | None = None,
        run_engine: bool = True,
    ) -> None:
        self.settings = settings
        self.clock: Clock = clock or SystemClock()
        self.limits = settings.limits
        self.ids = IdMaker()
        self.notifier = TopicNotifier()
        self._store_opener = store_opener
        self._sink = sink
        self._run_engine = run_engine
        self._store: TimerStore | None = None
        self._topics: TopicService | None = None
        self._dead_letters: DeadLetterService | None = None
        self.engine: Engine | None = None
        self.accepting = False
        self._active = 0  # store calls running in worker threads
        self._idle: asyncio.Event | None = None
        self.last_snapshot: ServiceStats | None = None
        self.last_housekeeping: HousekeepingReport | None = None
        self.last_oldest_due_ms: int | None = None  # at the last stats snapshot
        self.telemetry = Telemetry()
        self.telemetry.registry.register(ServiceGauges(self))
        # single schedules arriving together share one store call (app.write_batcher)
        batcher = WriteBatcher(lambda: self.store, self.call)
        self.singles = SingleSchedules(self.clock, self.ids, self.limits, self.telemetry, batcher)

    # ----------------------------------------------------------------- lifecycle
    @property
    def store(self) -> TimerStore:
        if self._store is None:
            raise StoreClosedError("the store is not open")
        return self._store

    @property
    def readings(self) -> StoreReadings:
        """What this node's stats snapshot and gauges read (``app.stats.readings_of``)."""
        return stats_mod.readings_of(self.store)

    @property
    def ready(self) -> bool:
        return self.unready_reason() is None

    def unready_reason(self) -> str | None:
        """Why ``/readyz`` answers 503 (``app.readiness``), or None when ready."""
        engine_ok = self.engine is not None and (self.engine.running or not self._run_engine)
        started = self.accepting and engine_ok
        now_ms = self.clock.now_ms()
        return readiness.unready_reason(self._store, self.engine, started=started, now_ms=now_ms)

    async def readiness(self) -> str | None:
        """``unready_reason``, after a probe write when the disk was full: a load balancer
        that stopped sending requests still sees the service back once space is freed."""
        store = readiness.needs_write_probe(self._store)
        if store is not None and self.accepting:
            with contextlib.suppress(StoreFullError):
                await self.call(store.probe_write)
        return self.unready_reason()

    async def start(self) -> None:
        self.notifier.bind(asyncio.get_running_loop())
        self._idle = asyncio.Event()
        self._idle.set()
        self._store = await anyio.to_thread.run_sync(self._store_opener, self.settings)
        routes = RouteTable(self._store.control)
        self._topics = TopicService(
            self._store,
            routes,
            GroupOffsets(self._store.control),
            notifier=self.notifier,
            clock=self.clock,
            sinks=self.settings.sinks,
            call=self.call,
            accepting=lambda: self.accepting,
            max_page_bytes=self.limits.max_page_bytes,
        )
        self._dead_letters = DeadLetterService(
            self._store,
            clock=self.clock,
            call=self.call,
            telemetry=self.telemetry,
            limits=self.limits,
        )
        self.engine = Engine(
            self._store,
            self.clock,
            self.settings.engine,
            sink=self._sink or self._routing_sink(routes),
            on_delivered=self.notifier.notify_threadsafe,
            telemetry=self.telemetry,
        )
        if self._run_engine:
            self.engine.start()
        self.accepting = True
        self._log_started(self._store)

    def _log_started(self, store: TimerStore) -> None:
        if isinstance(store, SupportsCluster):  # its counts need every partition owned
            log.info("joining the cluster", extra={"event": "cluster_joining"})
        else:
            log_store_opened(store, self.settings)
        log.info("service started", extra={"event": "started", "engine": self._run_engine})

    def _routing_sink(self, routes: RouteTable) -> RoutingSink:
        senders: dict[str, SenderFactory] = {
            WEBHOOK_SINK: WebhookSender,
            REDIS_SINK: RedisStreamSender,
        }
        return RoutingSink(routes, self.settings.sinks, self.clock, senders)

    def begin_shutdown(self) -> None:
        """Refuse new work from now on and end long-polls (safe from a signal handler)."""
        self.accepting = False
        self.notifier.close_threadsafe()

    async def stop(self) -> None:
        self.begin_shutdown()
        self.notifier.close()
        if self._idle is not None and self._active:
            try:
                await asyncio.wait_for(self._idle.wait(), CLOSE_WAIT_S)
            except TimeoutError:
                log.error("store calls still running after %.0f s: not closing", CLOSE_WAIT_S)
                return  # every acknowledged write is in the WAL already
        try:
            if self.engine is not None:
                await anyio.to_thread.run_sync(self.engine.stop)
        finally:  # a store error in the engine's last settle must not keep the store open
            if self._store is not None:
                store, self._store = self._store, None
                await anyio.to_thread.run_sync(store.close)
            log.info("service stopped", extra={"event": "stopped"})

    async def call(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run a blocking store call in a worker thread; 503 once shutdown has begun."""
        if not self.accepting:
            raise StoreClosedError("the service is shutting down")
        assert self._idle is not None
        self._active += 1
        self._idle.clear()
        try:
            return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))
        except StoreFullError as exc:  # a 507 for the client, a line without a trace for us
            log.error(exc.message, extra={"event": "disk_full", "data_dir": self.settings.data_dir})
            raise
        finally:
            self._active -= 1
            if not self._active:
                self._idle.set()

    # ----------------------------------------------------------------- timers
    async def schedule_one(self, req: TimerRequest) -> tuple[ScheduleResult, NewTimer]:
        return await self.singles.schedule(req)

    async def schedule_many(
        self, reqs: Sequence[TimerRequest | None], problems: Sequence[Problem] = ()
    ) -> list[ScheduleResult]:
        """Validate every item first, then store them in one store call (all or nothing).

        ``None`` items failed to decode and ``problems`` says why: they are reported
        together with every other bad item, and nothing is stored.
        """
        now_ms = self.clock.now_ms()
        started = time.perf_counter()
        timers = to_new_timers(reqs, now_ms, self.ids, self.limits, problems)
        results = await self.call(self.store.schedule, timers, now_ms)
        replaced = sum(map(_REPLACED, results))  # C-level: this runs on the event loop
        self.telemetry.scheduled(len(results), replaced, "batch", _since(started))
        return results

    async def ingest(self, stage_dir: str, *, replace: bool = False) -> IngestReport:
        """Ingest a staged bulk import into the running store (only stores that can)."""
        store = self.store
        if isinstance(store, SupportsCluster):
            raise UnsupportedError(CLUSTER_INGEST_REFUSED)
        if not isinstance(store, SupportsIngest):
            raise UnsupportedError(f"the {store.name} store cannot ingest SST files")
        now_ms = self.clock.now_ms()
        report = await self.call(
            store.ingest_staged,
            stage_dir,
            limits=self.limits.record_limits(),
            replace=replace,
            now_ms=now_ms,
        )
        self.telemetry.ingested(report.added, report.replaced)
        return report

    async def get(self, topic: str, timer_id: str) -> TimerView:
        view = await self.call(self.store.get, topic, timer_id)
        if view is None:  # field "id": the path named no timer (a client tells it apart)
            raise NotFoundError(f"no timer {topic}/{timer_id}", field="id")
        return view

    async def cancel(self, topic: str, timer_id: str) -> None:
        (result,) = await self.call(self.store.cancel, [(topic, timer_id)])
        self.telemetry.cancelled.labels(str(result.outcome)).inc()
        if result.outcome is CancelOutcome.UNKNOWN:
            raise NotFoundError(f"no timer {topic}/{timer_id}", field="id")
        if result.outcome is CancelOutcome.TOO_LATE:
            state = str(result.state)
            raise ConflictError(f"too late to cancel {topic}/{timer_id}: {state}", state=state)

    async def cancel_many(
        self, refs: Sequence[TimerRefRequest | None], problems: Sequence[Problem] = ()
    ) -> tuple[list[tuple[str, str]], list[CancelResult]]:
        """Cancel each identity on its own (one store call); the identities and each one's
        truthful outcome in their order. Bad items are reported together, nothing removed."""
        idents = to_idents(refs, self.limits, problems)
        results = await self.call(self.store.cancel, idents)
        for outcome, count in Counter(r.outcome for r in results).items():
            self.telemetry.cancelled.labels(str(outcome)).inc(count)
        return idents, results

    async def list_pending(
        self,
        *,
        topic: str | None,
        from_ms: int,
        to_ms: int | None,
        limit: int,
        cursor: str | None,
    ) -> TimerPage:
        return await self.call(
            self.store.list_pending,
            from_ms=from_ms,
            to_ms=to_ms,
            topic=topic,
            limit=limit,
            cursor=cursor,
            max_bytes=self.limits.max_page_bytes,
        )

    # ----------------------------------------------------------------- topics
    @property
    def topic_service(self) -> TopicService:
        """Topic logs, consumer groups and routes (app.topic_service)."""
        if self._topics is None:
            raise StoreClosedError("the store is not open")
        return self._topics

    @property
    def groups(self) -> GroupOffsets:
        return self.topic_service.groups

    @property
    def dead_letter_service(self) -> DeadLetterService:
        """Dead letters: list, replay, purge (app.dead_letter_service)."""
        if self._dead_letters is None:
            raise StoreClosedError("the store is not open")
        return self._dead_letters

    # ----------------------------------------------------------------- stats, housekeeping
    async def cluster_view(self) -> ClusterView:
        return await self.call(cluster_view_of, self.store, self.settings)

    async def stats(self) -> ServiceStats:
        """``GET /v1/stats``: the whole store's (every partition's, in a cluster). On a
        single node this is also the gauges' snapshot."""
        readings = self.readings
        if isinstance(readings, stats_mod.WholeStoreReadings):
            return await self.snapshot()
        now_ms, cap = self.clock.now_ms(), self.settings.housekeeping.stats_count_cap
        whole = stats_mod.WholeStoreReadings(self.store)
        return await self.call(stats_mod.collect, whole, self.engine, now_ms, cap)

    async def snapshot(self) -> ServiceStats:
        """The gauges' snapshot (the housekeeper takes one every interval): of this node's
        readings, which in a cluster are the partitions it owns."""
        readings = self.readings
        snapshot = await self.call(
            stats_mod.collect,
            readings,
            self.engine,
            self.clock.now_ms(),
            self.settings.housekeeping.stats_count_cap,
        )
        self.last_snapshot = snapshot
        self.last_oldest_due_ms = await self.call(readings.oldest_pending_due_ms)
        return snapshot

    async def metrics(self) -> bytes:
        """The Prometheus text exposition (in a worker thread: RocksDB property reads)."""
        return await self.call(self.telemetry.render)

    async def housekeep(self) -> HousekeepingReport:
        report = await self.call(self.store.housekeep, self.clock.now_ms())
        self.last_housekeeping = report
        return report


def _since(started: float) -> float:
    return time.perf_counter() - started
