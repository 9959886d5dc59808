"""Wake-ups for long-polling consumers when the dispatcher appends to a topic log.

The dispatcher runs in its own thread and calls ``notify_threadsafe(topics)`` after each
commit; the notifier hops onto the event loop with ``call_soon_threadsafe`` and wakes
the waiters of those topics. A per-topic version number closes the lost-wake-up race: a
reader takes the version *before* reading the log, and ``wait`` returns at once when
the version moved in between.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Iterable


class TopicNotifier:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._versions: dict[str, int] = defaultdict(int)
        self._waiters: dict[str, set[asyncio.Future[None]]] = defaultdict(set)
        self._closed = False

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._closed = False

    def version(self, topic: str) -> int:
        return self._versions.get(topic, 0)

    def waiting(self, topic: str) -> int:
        """How many long-polls are parked on ``topic`` now (an operator's and a test's view)."""
        return len(self._waiters.get(topic, ()))

    def notify_threadsafe(self, topics: Iterable[str]) -> None:
        """Called from any thread (the dispatcher's); never raises."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed in between
            loop.call_soon_threadsafe(self._wake, tuple(topics))

    def close(self) -> None:
        """Wake every waiter and make further waits return at once (shutdown)."""
        self._closed = True
        for topic in list(self._waiters):
            self._wake((topic,))

    def close_threadsafe(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            self._closed = True
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self.close)

    def _wake(self, topics: tuple[str, ...]) -> None:
        for topic in topics:
            self._versions[topic] += 1
            for future in self._waiters.pop(topic, ()):
                if not future.done():
                    future.set_result(None)

    async def wait(self, topic: str, seen_version: int, timeout_s: float) -> bool:
        """Wait until ``topic`` moves past ``seen_version``; False on timeout or close."""
        if self._closed:
            return False
        if self.version(topic) != seen_version:
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters[topic].add(future)
        try:
            await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            return False
        finally:
            waiters = self._waiters.get(topic)
            if waiters is not None:
                waiters.discard(future)
                if not waiters:
                    del self._waiters[topic]
        return not self._closed
