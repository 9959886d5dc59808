"""NATS JetStream message schedules (nats-server 2.12+): the server fires each timer.

One file-storage stream ``TIMERS`` with ``allow_msg_schedules`` over ``sched.>`` and
``due.>``; a timer is a message on ``sched.<id>`` with ``Nats-Schedule: @at <RFC 3339>``
and ``Nats-Schedule-Target: due.bench``. At its time the server publishes it to
``due.bench`` in the same stream (the log) and removes the schedule. Scheduling is
nats-py's ``publish_async`` with a batch of acks in flight, as NATS recommends for
throughput. Lateness is the stream timestamp of the fired message minus its due time
(the moment it is in the log, as for the engine's topic log); a pull consumer reads
them. Cancel is a purge of the schedule's subject: truthful, ``purged: 0`` when it has
fired. There is no listing by due time (only by subject).
Replicas: R1 on one node, or R3 on three nodes (a cluster on loopback).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext, api
from nats.js.errors import NoStreamResponseError

from bench.systems.base import BenchTimer
from bench.systems.natsd import NatsServers
from bench.systems.peer import PeerSystem
from bench.systems.servers import wait_for
from cluster.connect import stream_subjects

STREAM = "TIMERS"
TARGET = "due.bench"
DUE_HEADER = "Bench-Due"
IN_FLIGHT = 20_000  # publish_async acks outstanding
INFO_TIMEOUT_S = 30.0  # a listing of up to 1,000,000 subjects on a loaded machine
FETCH = 1000
READER_STOP_S = 5.0
PUBLISH_TRIES = 50  # 10 s of publishes that reach no stream
T = TypeVar("T")
log = logging.getLogger(__name__)


async def _log_error(exc: Exception) -> None:
    log.debug("nats client: %s", exc)


def _purge_body(timer_id: str) -> bytes:
    return json.dumps({"filter": f"sched.{timer_id}"}).encode()


def rfc3339_ms(ms: int) -> str:
    at = dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds")
    return at.replace("+00:00", "Z")


def stream_config(replicas: int) -> api.StreamConfig:
    """The stream the schedules and their fired messages live in."""
    return api.StreamConfig(
        name=STREAM,
        subjects=["sched.>", "due.>"],
        storage=api.StorageType.FILE,
        num_replicas=replicas,
        allow_msg_schedules=True,
    )


class JetStreamSystem(PeerSystem):
    durable = True
    server_clock = True

    def __init__(self, name: str, workdir: str, *, nodes: int, record_ids: bool = False):
        super().__init__(name, workdir, record_ids=record_ids)
        self.replicas = nodes
        self.servers = NatsServers(workdir, nodes)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"{name}-loop")
        self._thread.daemon = True
        self._thread.start()
        self.nc: Client | None = None
        self.js: JetStreamContext | None = None
        self._reader: asyncio.Task[None] | None = None
        self._last_seq = 0
        self._reading = False
        try:
            self.restart_server()
        except BaseException:
            self.close()
            raise

    def _call(self, coro: Coroutine[Any, Any, T], timeout_s: float = 120) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    async def _connect(self) -> None:
        if self.nc is not None:
            await self.nc.close()
        self.nc = await nats.connect(
            self.servers.urls,
            reconnect_time_wait=0.05,
            max_reconnect_attempts=-1,
            error_cb=_log_error,
        )
        self.js = self.nc.jetstream(publish_async_max_pending=IN_FLIGHT)

    async def _ensure_stream(self) -> bool:
        """Create the stream (or find it after a restart); False until the cluster can
        take writes on it."""
        assert self.js is not None
        try:
            await self.js.add_stream(stream_config(self.replicas))
            info = await self.js.stream_info(STREAM)
        except (TimeoutError, nats.errors.Error):
            return False
        # an R3 stream answers its info before it has elected a leader; a publish then
        # gets no response (seen in a suite run), so ready means a leader too
        return info.cluster is None or info.cluster.leader is not None

    def restart_server(self) -> float:
        self.servers.start()

        def ready() -> bool:
            self.servers.check_alive()
            try:
                if self.nc is None or not self.nc.is_connected:
                    self._call(self._connect(), 5)
                return self._call(self._ensure_stream(), 10)
            except (TimeoutError, OSError, nats.errors.Error):
                return False

        return wait_for(ready, 120, "nats-server")

    def kill_server(self) -> None:
        self.stop()
        self.servers.kill()

    def _schedule(self, timers: Sequence[BenchTimer], now_ms: int) -> None:
        self._call(self._publish(timers))

    async def _publish(self, timers: Sequence[BenchTimer]) -> None:
        """Publish every timer and wait for every ack: the batch is acknowledged then.

        A publish answered "no responders" reached no stream (an R3 stream electing its
        leader, just made or restarted: a suite run met it after the stream's info named
        a leader), so nothing was stored and it is sent again, bounded."""
        todo = list(timers)
        for _ in range(PUBLISH_TRIES):
            answers = await asyncio.gather(
                *[await self._publish_one(t) for t in todo], return_exceptions=True
            )
            for answer in answers:
                if isinstance(answer, BaseException) and not isinstance(
                    answer, NoStreamResponseError
                ):
                    raise answer
            todo = [t for t, a in zip(todo, answers, strict=True) if isinstance(a, BaseException)]
            if not todo:
                return
            log.warning("jetstream: %d publishes reached no stream; again", len(todo))
            await asyncio.sleep(0.2)
        raise NoStreamResponseError

    async def _publish_one(self, t: BenchTimer) -> asyncio.Future[Any]:
        assert self.js is not None
        headers = {
            "Nats-Schedule": "@at " + rfc3339_ms(t.deliver_at_ms),
            "Nats-Schedule-Target": TARGET,
            DUE_HEADER: str(t.deliver_at_ms),
        }
        return await self.js.publish_async(f"sched.{t.id}", t.payload, headers=headers)

    def cancel(self, ids: Sequence[str]) -> int:
        return self._call(self._purge(ids))

    async def _purge(self, ids: Sequence[str]) -> int:
        assert self.nc is not None
        subject = f"$JS.API.STREAM.PURGE.{STREAM}"
        replies = await asyncio.gather(
            *(
                self.nc.request(subject, json.dumps({"filter": f"sched.{i}"}).encode(), 30)
                for i in ids
            )
        )
        return sum(int(json.loads(r.data).get("purged", 0)) for r in replies)

    def start(self) -> None:
        self._call(self._start_reader())

    async def _start_reader(self) -> None:
        self._reading = True
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _stop_reader(self) -> None:
        """Stop the reader; nats-py's fetch may swallow a cancel, so a flag ends it too."""
        self._reading = False
        if self._reader is not None:
            self._reader.cancel()
            # cancelled, or its unsubscribe failed on a killed server
            with contextlib.suppress(asyncio.CancelledError, TimeoutError, nats.errors.Error):
                await asyncio.wait_for(self._reader, READER_STOP_S)
            self._reader = None

    async def _read(self) -> None:
        """Read fired messages from ``_last_seq + 1`` on. A consumer that fails is made
        again from there. A fetch from a consumer that is gone, or not led yet after a
        restart of the servers, fails (503, no responders); a suite run whose reader
        died of such a failure counted 87 fired timers as lost."""
        while self._reading:
            try:
                await self._read_with_one_consumer()
            except (TimeoutError, nats.errors.Error) as exc:
                log.warning("jetstream reader: %r; making its consumer again", exc)
                await asyncio.sleep(0.1)

    async def _read_with_one_consumer(self) -> None:
        assert self.js is not None
        config = api.ConsumerConfig(
            ack_policy=api.AckPolicy.NONE,
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=self._last_seq + 1,
        )
        sub = await self.js.pull_subscribe(TARGET, stream=STREAM, config=config)
        try:
            while self._reading:
                try:
                    msgs = await sub.fetch(FETCH, timeout=0.05)
                except (TimeoutError, nats.errors.TimeoutError):
                    continue  # nothing fired in the last 50 ms
                self._record(msgs)
        finally:
            with contextlib.suppress(TimeoutError, nats.errors.Error):
                await sub.unsubscribe()

    def _record(self, msgs: list[Any]) -> None:
        for m in msgs:
            meta = m.metadata
            self._last_seq = max(self._last_seq, meta.sequence.stream)
            at_ms = int(meta.timestamp.timestamp() * 1000)
            tid = (m.headers or {}).get("Nats-Scheduler", "sched.?").removeprefix("sched.")
            self.record([(tid, int((m.headers or {}).get(DUE_HEADER, at_ms)))], at_ms)

    def stop(self) -> None:
        """Stop reading (and wait until the reader has recorded its last message)."""
        self._call(self._stop_reader(), 30)

    def pending(self) -> int:
        """Messages in the stream less the fired ones (one subject: a cheap count)."""
        info = self._call(self._info(TARGET))
        fired = int((info["state"].get("subjects") or {}).get(TARGET, 0))
        return int(info["state"]["messages"]) - fired

    async def _info(self, subjects: str) -> dict[str, Any]:
        """STREAM.INFO with the counts of ``subjects``, asked with this system's own
        timeout (``self.js`` keeps the short one its publishes need)."""
        assert self.nc is not None
        body = json.dumps({"subjects_filter": subjects}).encode()
        reply = await self.nc.request(f"$JS.API.STREAM.INFO.{STREAM}", body, INFO_TIMEOUT_S)
        data: dict[str, Any] = json.loads(reply.data)
        return data

    def pending_ids(self) -> set[str]:
        assert self.nc is not None
        subjects = self._call(stream_subjects(self.nc, STREAM, "sched.>", INFO_TIMEOUT_S))
        return {s.removeprefix("sched.") for s in subjects}

    def server_rss_bytes(self) -> int:
        return self.servers.rss_bytes()

    def close(self) -> None:
        try:
            self.stop()
            if self.nc is not None:
                self._call(self.nc.close(), 30)
        finally:
            try:  # nats-py's own tasks (its flusher) would otherwise die with the loop
                self._call(_cancel_other_tasks(), 10)
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(10)
                if not self._thread.is_alive():
                    self._loop.close()
                self.servers.stop()


async def _cancel_other_tasks() -> None:
    """Cancel every task on this loop but the caller, and wait until each has ended."""
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
