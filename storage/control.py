"""Durable control data beside the timers: topic routes and consumer-group offsets.

A tiny key-value protocol that both stores implement (``store.control``): values are
opaque bytes (the app layer encodes its records), keys are ``(space, name)``. Every
``put`` and ``delete`` is durable on return with the store's own durability (the RocksDB
WAL in the reserved ``control`` column family; an fsynced, atomically renamed file in
the wheel store's directory), so a route or a committed offset survives a SIGKILL.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

SEPARATOR = b"\x00"


def control_key(space: str, name: str) -> bytes:
    """``space | 0x00 | name``: names follow the name rule, so they hold no 0x00."""
    return space.encode() + SEPARATOR + name.encode()


def split_key(key: bytes) -> tuple[str, str]:
    space, _, name = key.partition(SEPARATOR)
    return space.decode(), name.decode()


@runtime_checkable
class ControlStore(Protocol):
    def get(self, space: str, name: str) -> bytes | None: ...

    def put(self, space: str, name: str, value: bytes) -> None: ...

    def delete(self, space: str, name: str) -> bool:
        """Remove the value; True when there was one."""
        ...

    def scan(self, space: str, prefix: str = "") -> list[tuple[str, bytes]]:
        """Every ``(name, value)`` of ``space`` whose name starts with ``prefix``, by name."""
        ...
