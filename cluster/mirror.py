"""The topic log mirrored into JetStream: stream ``TIMERSTORE_LOG``, subject
``tslog.<topic>``, one message per delivered message, ``Nats-Msg-Id`` ``<topic>/<offset>``.

Any NATS client can consume a topic natively from it. The embedded topic log stays the
source of what was delivered (the changelog's delivered records rebuild it); the mirror
follows it asynchronously: an owner sends a commit's messages after JetStream has
acknowledged the commit's record, and a new owner first sends what the mirror lacks of
each topic of the partition (from the mirror's last offset on). ``Nats-Msg-Id`` makes a
message sent twice within the stream's duplicate window (2 minutes) one message.

A topic's dots stay subject tokens (``orders.eu`` -> ``tslog.orders.eu``); a topic with
an empty token (a leading, trailing or double dot) has each dot written ``%2E``.
Headers: ``Timerstore-Id``, ``Timerstore-Offset``, ``Timerstore-Delivered-At-Ms``, and
the timer's own headers as JSON in ``Timerstore-Headers`` when it has any.

Not finished: the queue of messages to send is not bounded. The mirror sends one
JetStream publish a message (about 20,000 a second here), so a burst of a million
delivered messages waits in memory until it is sent. The plan is a follower that reads
each dirty topic's log from the mirror's last offset, a page at a time, on a connection of
its own. Until then, ``cluster.log_mirror`` false turns the copy off (docs/cluster.md).
"""

from __future__ import annotations

import asyncio
import logging

import msgspec
import nats.errors
import nats.js.errors
from nats.js import JetStreamContext

from cluster.changelog import ensure_stream
from cluster.loop import LoopThread
from storage.protocol import LoggedMessage, TimerStore

log = logging.getLogger(__name__)
LOG_STREAM = "TIMERSTORE_LOG"
LOG_PREFIX = "tslog."
PIPELINE = 256  # publishes awaited together
SEND_TRIES = 5
CATCH_UP_PAGE = 1_000


def log_subject(topic: str) -> str:
    if all(topic.split(".")):
        return LOG_PREFIX + topic
    return LOG_PREFIX + topic.replace(".", "%2E")


class LogMirror:
    def __init__(self, js: JetStreamContext, replicas: int, loop: LoopThread) -> None:
        self.js = js
        self.replicas = replicas
        self.loop = loop
        self._queue: asyncio.Queue[tuple[str, list[LoggedMessage]]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def ensure(self) -> None:
        await ensure_stream(self.js, LOG_STREAM, LOG_PREFIX + ">", self.replicas)
        self._task = asyncio.ensure_future(self._run())

    def send(self, topic: str, messages: list[LoggedMessage]) -> None:
        """Queue messages for the mirror (thread-safe; returns at once)."""
        if messages:
            self.loop.call_soon(self._queue.put_nowait, (topic, messages))

    async def _run(self) -> None:
        while True:
            topic, messages = await self._queue.get()
            for start in range(0, len(messages), PIPELINE):
                chunk = messages[start : start + PIPELINE]
                await asyncio.gather(*(self._publish(topic, m) for m in chunk))

    async def _publish(self, topic: str, m: LoggedMessage) -> None:
        headers = {
            "Nats-Msg-Id": f"{topic}/{m.offset}",
            "Timerstore-Id": m.id,
            "Timerstore-Offset": str(m.offset),
            "Timerstore-Delivered-At-Ms": str(m.delivered_at_ms),
        }
        if m.headers:
            headers["Timerstore-Headers"] = msgspec.json.encode(m.headers).decode()
        for _ in range(SEND_TRIES):
            try:
                await self.js.publish(log_subject(topic), m.payload, timeout=5, headers=headers)
                return
            except nats.errors.Error as e:
                failure = e
                await asyncio.sleep(0.2)
        # the next owner's catch-up sends it (catch_up): the mirror lags, loses nothing
        log.warning("mirror of %s/%d not sent: %r", topic, m.offset, failure)

    async def last_offset(self, topic: str) -> int:
        """The highest offset of ``topic`` in the mirror (-1: none)."""
        try:
            msg = await self.js.get_last_msg(LOG_STREAM, log_subject(topic))
        except nats.js.errors.NotFoundError:
            return -1
        return int((msg.headers or {}).get("Timerstore-Offset", -1))

    def catch_up(self, store: TimerStore) -> int:
        """Send what the mirror lacks of each topic of ``store`` (a worker thread)."""
        sent = 0
        for info in store.topics():
            offset = self.loop.run(self.last_offset(info.topic), 30) + 1
            while offset < info.log_end_offset:
                page = store.read_log(info.topic, offset, CATCH_UP_PAGE)
                if not page:
                    break
                self.send(info.topic, page)
                sent += len(page)
                offset = page[-1].offset + 1
        return sent

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


class NoMirror:
    """``cluster.log_mirror`` off: nothing is copied (the embedded topic log, rebuilt from
    the changelog, stays what REST consumers read)."""

    async def ensure(self) -> None:
        return None

    def send(self, topic: str, messages: list[LoggedMessage]) -> None:
        return None

    def catch_up(self, store: TimerStore) -> int:
        return 0

    async def stop(self) -> None:
        return None
