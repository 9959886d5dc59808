"""A Redis sorted set of due times: Sidekiq's ``schedule`` set, BullMQ's delayed set.

Written the way those projects do it: the timer id is the member and the due time in
ms its score (BullMQ keeps the job body beside it; here one hash, ``payloads``); a
schedule is one pipelined MULTI of ``ZADD`` + ``HSET`` per batch; a poller runs one Lua
script that takes up to ``batch`` due ids with ``ZRANGEBYSCORE ... LIMIT`` and removes
them (``ZREM`` + ``HDEL``) atomically, so two pollers never take the same timer.
Cancel is ``ZREM`` + ``HDEL``: truthful, ``ZREM`` says 0 when the poller took it first.
The server runs with the AOF on, ``appendfsync`` ``everysec`` or ``always``, no RDB.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import redis

from bench.systems.base import BenchTimer
from bench.systems.peer import PeerSystem, Poller
from bench.systems.servers import ServerProcess, binary, free_port, wait_for

ZSET = "timers:due"
HASH = "timers:payloads"
TAKE_DUE = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, ARGV[2])
if #ids == 0 then return ids end
local only = {}
for i = 1, #ids, 2 do only[#only + 1] = ids[i] end
redis.call('ZREM', KEYS[1], unpack(only))
redis.call('HDEL', KEYS[2], unpack(only))
return ids
"""
POLL_MS = 10  # Sidekiq polls every ~5 s; 10 ms matches the engine's tick (100 polls/s idle)
BATCH = 1000  # BullMQ promotes at most 1000 delayed jobs per call


class RedisZsetSystem(PeerSystem):
    durable = True

    def __init__(
        self, name: str, workdir: str, *, appendfsync: str, record_ids: bool = False
    ) -> None:
        super().__init__(name, workdir, record_ids=record_ids)
        self.appendfsync = appendfsync
        self.port = free_port()
        args = [binary("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--dir", os.path.abspath(workdir), "--save", "", "--appendonly", "yes"]
        args += ["--appendfsync", appendfsync, "--protected-mode", "no"]
        self.server = ServerProcess(args, os.path.join(workdir, "redis.log"))
        self.client = redis.Redis(host="127.0.0.1", port=self.port)
        self._poller: Poller | None = None
        try:
            self.restart_server()
            self._take = self.client.register_script(TAKE_DUE)
        except BaseException:
            self.server.stop()
            raise

    def _answers(self) -> bool:
        if not self.server.alive:
            raise RuntimeError(f"redis-server exited: {self.server.log_tail()}")
        try:
            return bool(self.client.ping())
        except (redis.ConnectionError, redis.BusyLoadingError):
            return False

    def restart_server(self) -> float:
        self.server.start()
        return wait_for(self._answers, 60, "redis-server")

    def kill_server(self) -> None:
        self.server.kill()

    def _schedule(self, timers: Sequence[BenchTimer], now_ms: int) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.zadd(ZSET, {t.id: t.deliver_at_ms for t in timers})
        pipe.hset(HASH, mapping={t.id: t.payload for t in timers})
        pipe.execute()

    def cancel(self, ids: Sequence[str]) -> int:
        pipe = self.client.pipeline(transaction=True)
        pipe.zrem(ZSET, *ids)
        pipe.hdel(HASH, *ids)
        removed, _ = pipe.execute()
        return int(removed)

    def take_due(self, now_ms: int) -> list[tuple[str, int]]:
        flat = self._take(keys=[ZSET, HASH], args=[now_ms, BATCH])
        return [(flat[i].decode(), int(flat[i + 1])) for i in range(0, len(flat), 2)]

    def start(self) -> None:
        self._poller = Poller(self, self.take_due, POLL_MS, BATCH)
        self._poller.start()

    def stop(self) -> None:
        if self._poller is not None:
            self._poller.stop()
            self._poller = None

    def pending(self) -> int:
        return int(self.client.zcard(ZSET))

    def pending_ids(self) -> set[str]:
        members: list[Any] = self.client.zrange(ZSET, 0, -1)
        return {bytes(m).decode() for m in members}

    def server_rss_bytes(self) -> int:
        return self.server.rss_bytes()

    def counters(self) -> dict[str, Any]:
        out = super().counters()
        if self.server.alive:
            out["used_memory"] = int(self.client.info("memory")["used_memory"])
        return out

    def close(self) -> None:
        try:
            self.stop()
            self.client.close()
        finally:
            self.server.stop()
