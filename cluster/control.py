"""``store.control`` of the cluster: storage's ControlStore over the JetStream KV bucket
``ts_control`` (R = replicas), so routes and consumer-group offsets are read and written
from any node. Key ``c.<hex space>.<hex name>``: hex keeps every byte a KV key may not
hold out of it, and sorts as the bytes do, so ``scan`` returns names in order. ``scan``
lists the keys from the bucket stream's subjects (``cluster.connect.stream_subjects``).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js.kv import KeyValue

from cluster.connect import stream_subjects
from cluster.loop import LoopThread
from storage.errors import StoreClosedError

CONTROL_BUCKET = "ts_control"
CALL_TIMEOUT_S = 15.0
T = TypeVar("T")


def _key(space: str, name: str) -> str:
    return f"c.{space.encode().hex()}.{name.encode().hex()}"


class KvControl:
    def __init__(self, loop: LoopThread, client: Client, bucket: KeyValue) -> None:
        self.loop = loop
        self.client = client
        self.bucket = bucket

    def _run(self, work: Coroutine[Any, Any, T]) -> T:
        try:
            return self.loop.run(work, CALL_TIMEOUT_S)
        except (nats.errors.Error, TimeoutError) as e:
            raise StoreClosedError(f"control data unreachable in NATS: {e!r}") from e

    def get(self, space: str, name: str) -> bytes | None:
        return self._run(self._get(_key(space, name)))

    async def _get(self, key: str) -> bytes | None:
        try:
            entry = await self.bucket.get(key)
        except nats.js.errors.KeyNotFoundError:  # also a deleted key
            return None
        return entry.value

    def put(self, space: str, name: str, value: bytes) -> None:
        self._run(self.bucket.put(_key(space, name), value))

    def delete(self, space: str, name: str) -> bool:
        return self._run(self._delete(_key(space, name)))

    async def _delete(self, key: str) -> bool:
        if await self._get(key) is None:
            return False
        await self.bucket.delete(key)
        return True

    def scan(self, space: str, prefix: str = "") -> list[tuple[str, bytes]]:
        return self._run(self._scan(space, prefix))

    async def _scan(self, space: str, prefix: str) -> list[tuple[str, bytes]]:
        head = f"c.{space.encode().hex()}."
        prefix_subject = f"$KV.{CONTROL_BUCKET}."
        subjects = await stream_subjects(
            self.client, f"KV_{CONTROL_BUCKET}", f"{prefix_subject}{head}*"
        )
        found: list[tuple[str, bytes]] = []
        for key in sorted(s[len(prefix_subject) :] for s in subjects):
            name = bytes.fromhex(key[len(head) :]).decode()
            if not name.startswith(prefix):
                continue
            value = await self._get(key)  # None: deleted (its marker holds the subject)
            if value is not None:
                found.append((name, value))
        return found
