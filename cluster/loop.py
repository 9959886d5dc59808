"""The store's one asyncio event-loop thread: nats-py runs there and nowhere else.

The TimerStore methods are synchronous and called from worker threads and the engine's
threads; they hand coroutines to this loop with ``asyncio.run_coroutine_threadsafe``.
The loop is uvloop's, as the API's is: its I/O, timers and thread-safe wake-ups run in
C, which took about 15% off a cluster node's CPU under batch load (issue 34, measured
with every request's writes and acknowledgements crossing this loop).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import uvloop

T = TypeVar("T")
STOP_TIMEOUT_S = 10.0


class LoopThread:
    def __init__(self, name: str) -> None:
        self.loop = uvloop.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result (never call from the loop); past
        ``timeout_s`` the coroutine is cancelled and TimeoutError raised."""
        future = self.submit(coro)
        try:
            return future.result(timeout_s)
        except TimeoutError:
            future.cancel()
            raise

    def call_soon(self, callback: Callable[..., object], *args: object) -> None:
        self.loop.call_soon_threadsafe(callback, *args)

    def in_loop(self) -> bool:
        return threading.current_thread() is self._thread

    def stop(self) -> None:
        """Cancel every task left, stop the loop and join its thread (idempotent)."""
        if self.loop.is_closed():
            return
        if self._thread.is_alive():
            self.submit(_cancel_others()).result(STOP_TIMEOUT_S)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(STOP_TIMEOUT_S)
        self.loop.close()


async def _cancel_others() -> None:
    me = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not me]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
