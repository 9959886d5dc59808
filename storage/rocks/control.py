"""``store.control`` of the RocksDB store: the reserved ``control`` column family.

Writes go through the store's write options (WAL always on, fsync per write when
``sync_writes``), the same durability as every acknowledged timer write.
"""

from __future__ import annotations

from typing import cast

import rocksdict as rd

from storage.control import control_key, split_key
from storage.rocks.core import RocksCore


class RocksControl:
    def __init__(self, core: RocksCore) -> None:
        self._core = core

    def get(self, space: str, name: str) -> bytes | None:
        _, family, _ = self._core.control_parts()
        return cast(bytes | None, family.get(control_key(space, name)))

    def put(self, space: str, name: str, value: bytes) -> None:
        db, _, _ = self._core.control_parts()
        batch = rd.WriteBatch(raw_mode=True)
        batch.put(control_key(space, name), value, db.get_column_family_handle("control"))
        self._core.write(batch)  # the store's write: a full disk is a StoreFullError

    def delete(self, space: str, name: str) -> bool:
        db, family, _ = self._core.control_parts()
        key = control_key(space, name)
        if family.get(key) is None:
            return False
        batch = rd.WriteBatch(raw_mode=True)
        batch.delete(key, db.get_column_family_handle("control"))
        self._core.write(batch)  # the store's write: a full disk is a StoreFullError
        return True

    def scan(self, space: str, prefix: str = "") -> list[tuple[str, bytes]]:
        _, family, _ = self._core.control_parts()
        start = control_key(space, prefix)
        found: list[tuple[str, bytes]] = []
        for key, value in cast(list[tuple[bytes, bytes]], family.items(from_key=start)):
            if not key.startswith(start):
                break
            found.append((split_key(key)[1], value))
        return found
