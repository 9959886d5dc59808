"""The topic log mirrored into JetStream: stream ``TIMERSTORE_LOG``, subject
``tslog.<topic>``, one message per delivered message, ``Nats-Msg-Id`` ``<topic>/<offset>``.

Any NATS client can consume a topic natively from it. The embedded topic log stays the
source of what was delivered (the changelog's delivered records rebuild it); the mirror
*follows* it. A commit whose record JetStream acknowledged marks its topics dirty, with
the store holding their logs and the acknowledged end of each; one task reads each dirty
topic's log from the first offset the mirror lacks, a page at a time, and sends the page
as one JetStream atomic batch (ADR-50, nats-server 2.12+; the stream has
``allow_atomic``). So what waits is a set of topic names, never the messages: a burst of
a million deliveries holds a few pages in memory, not a million messages. A batch is
stored whole or not at all, and a topic has one batch in flight, so the mirror holds
each topic's offsets in order without gaps. One acknowledgement a page instead of one a
message also makes the copy about eight times cheaper (docs/cluster.md).

A new owner marks every topic of a partition it takes, and the mirror's last offset of
each is read from the stream. A page that holds a message the stream has already (a
former owner's copy, within the 2-minute duplicate window) is refused whole (error
10201); the follower then reads the last offset again and goes on from there.

The mirror has its own event-loop thread and NATS connection, so a burst of copying
never delays an append, a lease renewal or a forwarded call.

A topic's dots stay subject tokens (``orders.eu`` -> ``tslog.orders.eu``); a topic with
an empty token (a leading, trailing or double dot) has each dot written ``%2E``.
Headers: ``Timerstore-Id``, ``Timerstore-Offset``, ``Timerstore-Delivered-At-Ms``, and
the timer's own headers as JSON in ``Timerstore-Headers`` when it has any.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import StorageType, StreamConfig

from cluster.changelog import DUPLICATE_WINDOW_S
from cluster.connect import JETSTREAM_TIMEOUT_S, connect
from cluster.loop import LoopThread
from storage.errors import StoreOpenError, TimerStoreError
from storage.protocol import LoggedMessage, TimerStore

log = logging.getLogger(__name__)
LOG_STREAM = "TIMERSTORE_LOG"
LOG_PREFIX = "tslog."
PAGE = 1_000  # messages read from the store and sent as one atomic batch (the server's limit)
PAGE_BYTES = 4 * 1024 * 1024  # a page's payload bound
TOPICS_AT_ONCE = 4  # topics followed side by side (each with one batch in flight)
COMMIT_TIMEOUT_S = 10.0
RETRY_S = 1.0  # a topic whose copy failed is followed again after this long
BUSY_WINDOW_S = 0.2  # deliveries committed this recently: the node is delivering
YIELD_FACTOR = 3.0  # while it is, rest this many times as long as a page took
DUPLICATE_IN_BATCH = 10201
CLOSE_TIMEOUT_S = 10.0


def log_subject(topic: str) -> str:
    if all(topic.split(".")):
        return LOG_PREFIX + topic
    return LOG_PREFIX + topic.replace(".", "%2E")


def message_headers(topic: str, m: LoggedMessage) -> dict[str, str]:
    headers = {
        "Nats-Msg-Id": f"{topic}/{m.offset}",
        "Timerstore-Id": m.id,
        "Timerstore-Offset": str(m.offset),
        "Timerstore-Delivered-At-Ms": str(m.delivered_at_ms),
    }
    if m.headers:
        headers["Timerstore-Headers"] = msgspec.json.encode(m.headers).decode()
    return headers


class BatchRefusedError(Exception):
    def __init__(self, code: int, description: str) -> None:
        super().__init__(f"{code}: {description}")
        self.code = code


class _Ack(msgspec.Struct):
    error: dict[str, object] | None = None


async def ensure_log_stream(js: JetStreamContext, replicas: int) -> None:
    """The stream, made if missing, with atomic batches allowed (switched on when a stream
    made by an older timerstore lacks them)."""
    try:
        info = await js.stream_info(LOG_STREAM)
    except nats.js.errors.NotFoundError:
        info = await js.add_stream(
            StreamConfig(
                name=LOG_STREAM,
                subjects=[LOG_PREFIX + ">"],
                storage=StorageType.FILE,
                num_replicas=replicas,
                duplicate_window=DUPLICATE_WINDOW_S,
                allow_atomic=True,
            )
        )
    if not info.config.allow_atomic:
        info.config.allow_atomic = True
        info = await js.update_stream(info.config)
    if not info.config.allow_atomic:  # a server before 2.12 drops the field it does not know
        raise StoreOpenError(
            f"the log mirror needs atomic batch publish (nats-server 2.12.1 or newer) on "
            f"{LOG_STREAM}; upgrade the servers or set TIMERSTORE_CLUSTER__LOG_MIRROR=false"
        )


class LogMirror:
    def __init__(self, urls: list[str], node_id: str, replicas: int) -> None:
        self.urls = urls
        self.node_id = node_id
        self.replicas = replicas
        self.loop = LoopThread(f"ts-mirror-{node_id}")
        self.reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ts-mirror-read")
        self.client: Client | None = None
        self.js: JetStreamContext | None = None
        self._lock = threading.Lock()
        self._dirty: dict[str, tuple[TimerStore, int]] = {}  # topic -> (store, end offset)
        self._next: dict[str, int] = {}  # topic -> the first offset the mirror lacks
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._batch_ids = itertools.count()
        self._last_send_s = 0.0  # monotonic: the last commit that marked a topic

    async def ensure(self) -> None:
        """Connect and make the stream (awaited on the caller's loop; runs on the mirror's)."""
        await asyncio.wrap_future(self.loop.submit(self._open()))

    async def _open(self) -> None:
        if self.client is None:
            self.client = await connect(self.urls, f"{self.node_id}-mirror")
            self.js = self.client.jetstream(timeout=JETSTREAM_TIMEOUT_S)
        assert self.js is not None
        await ensure_log_stream(self.js, self.replicas)
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.ensure_future(self._run())

    def send(self, topic: str, store: TimerStore, end_offset: int) -> None:
        """Mark ``topic``: its log in ``store`` is acknowledged up to ``end_offset``
        (exclusive). Thread-safe; returns at once."""
        self._last_send_s = time.monotonic()
        self._mark(topic, store, end_offset, forget=False)

    def catch_up(self, store: TimerStore) -> int:
        """Mark every topic of ``store`` (a partition just taken), the mirror's last offset
        of each read again from the stream. How many topics were marked."""
        topics = store.topics()
        for info in topics:
            self._mark(info.topic, store, info.log_end_offset, forget=True)
        return len(topics)

    def _mark(self, topic: str, store: TimerStore, end_offset: int, *, forget: bool) -> None:
        with self._lock:
            wake = not self._dirty
            known = self._dirty.get(topic)
            if known is not None and known[0] is store:
                end_offset = max(end_offset, known[1])
            self._dirty[topic] = (store, end_offset)
            if forget:
                self._next.pop(topic, None)
        if wake:
            self.loop.call_soon(self._wake_up)

    def _wake_up(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _take(self, count: int) -> list[tuple[str, TimerStore, int]]:
        with self._lock:
            taken = list(itertools.islice(self._dirty.items(), count))
            for topic, _ in taken:
                del self._dirty[topic]
            return [(topic, store, end) for topic, (store, end) in taken]

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            while taken := self._take(TOPICS_AT_ONCE):
                await asyncio.gather(*(self._follow_logged(*t) for t in taken))

    async def _follow_logged(self, topic: str, store: TimerStore, end_offset: int) -> None:
        try:
            await self._follow(topic, store, end_offset)
        except TimerStoreError as e:  # the store closed: the partition moved, its owner copies
            log.info("mirror of %s stopped here: %s", topic, e.message)
        except Exception as e:  # the top of a topic's copy: log, try again later
            log.warning("mirror of %s behind (%r); tried again in %.0f s", topic, e, RETRY_S)
            self.loop.loop.call_later(RETRY_S, lambda: self.send(topic, store, end_offset))

    async def _follow(self, topic: str, store: TimerStore, end_offset: int) -> None:
        """Send ``topic``'s log from the first offset the mirror lacks up to ``end_offset``."""
        running = asyncio.get_running_loop()
        offset = self._next.get(topic)
        if offset is None:
            offset = self._next[topic] = await self.last_offset(topic) + 1
        while offset < end_offset:
            started_s = time.monotonic()
            limit = min(PAGE, end_offset - offset)
            page = await running.run_in_executor(
                self.reader, store.read_log, topic, offset, limit, PAGE_BYTES
            )
            page = [m for m in page if m.offset < end_offset]  # past a gap: unacknowledged
            if not page:
                return
            try:
                await self._send_batch(topic, page)
            except BatchRefusedError as e:
                if e.code != DUPLICATE_IN_BATCH:
                    raise
                offset = await self.last_offset(topic) + 1  # another copy got there first
            else:
                offset = page[-1].offset + 1
            self._next[topic] = offset
            await self._yield_to_delivery(started_s)

    async def _yield_to_delivery(self, page_started_s: float) -> None:
        """While the node is committing deliveries, rest YIELD_FACTOR times as long as the
        page took: in a burst, delivery keeps the CPU it needs (measured: 1M delivered in
        4.3 times the single node's time with the copy at full pace beside it, 1.2 times
        without it), and the copy still moves, at about a quarter of its pace, then at
        full pace once the burst is delivered."""
        now_s = time.monotonic()
        if now_s - self._last_send_s < BUSY_WINDOW_S:
            await asyncio.sleep((now_s - page_started_s) * YIELD_FACTOR)

    async def _send_batch(self, topic: str, page: list[LoggedMessage]) -> None:
        """``page`` as one atomic batch: stored whole once the commit is acknowledged."""
        assert self.client is not None
        subject = log_subject(topic)
        batch_id = f"{self.node_id}-{next(self._batch_ids)}"
        for sequence, m in enumerate(page[:-1], start=1):
            headers = message_headers(topic, m)
            headers["Nats-Batch-Id"] = batch_id
            headers["Nats-Batch-Sequence"] = str(sequence)
            await self.client.publish(subject, m.payload, headers=headers)
        headers = message_headers(topic, page[-1])
        headers["Nats-Batch-Id"] = batch_id
        headers["Nats-Batch-Sequence"] = str(len(page))
        headers["Nats-Batch-Commit"] = "1"
        reply = await self.client.request(
            subject, page[-1].payload, timeout=COMMIT_TIMEOUT_S, headers=headers
        )
        ack = msgspec.json.decode(reply.data, type=_Ack)
        if ack.error is not None:
            code = ack.error.get("err_code")
            raise BatchRefusedError(code if isinstance(code, int) else 0, str(ack.error))

    async def last_offset(self, topic: str) -> int:
        """The highest offset of ``topic`` in the mirror (-1: none)."""
        assert self.js is not None
        try:
            msg = await self.js.get_last_msg(LOG_STREAM, log_subject(topic))
        except nats.js.errors.NotFoundError:
            return -1
        return int((msg.headers or {}).get("Timerstore-Offset", -1))

    def backlog(self) -> int:
        """Topics marked and not yet followed (for tests and diagnostics)."""
        with self._lock:
            return len(self._dirty)

    def close(self) -> None:
        """Stop copying and close the mirror's connection (what is left is copied by the
        next owner's catch-up)."""
        try:
            if not self.loop.loop.is_closed():
                self.loop.run(self._close(), CLOSE_TIMEOUT_S)
        except (TimeoutError, nats.errors.Error) as e:
            log.warning("mirror: closing its connection: %r", e)
        finally:
            self.loop.stop()
            self.reader.shutdown(wait=False)

    async def _close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.client is not None:
            await self.client.close()


class NoMirror:
    """``cluster.log_mirror`` off: nothing is copied (the embedded topic log, rebuilt from
    the changelog, stays what REST consumers read)."""

    async def ensure(self) -> None:
        return None

    def send(self, topic: str, store: TimerStore, end_offset: int) -> None:
        return None

    def catch_up(self, store: TimerStore) -> int:
        return 0

    def close(self) -> None:
        return None
