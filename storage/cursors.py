"""Listing cursors and page budgets, one rule for every store: a cursor is the base64url
(padded) of the RocksDB key a listing stopped at followed by the key's CRC-32, and the
next page starts after that key.

The check makes a cursor the server did not issue a 422 naming ``cursor`` (a typo, a
cursor cut short, ``AAAA``) instead of a listing from wherever those bytes point. It is
no secret: a client that signs a key of its own gets the listing from that position, which
is only what a listing could read anyway. The wheel store has no such keys on disk, but
orders its timers and dead letters the same way, so it takes the same cursors.
"""

from __future__ import annotations

import base64
import binascii
import zlib

from storage.errors import InvalidInputError

CHECK_BYTES = 4


def encode_cursor(key: bytes) -> str:
    return base64.urlsafe_b64encode(key + _check(key)).decode()


def decode_cursor(cursor: str) -> bytes:
    """The key a cursor names: the listing goes on after it."""
    try:
        raw = base64.b64decode(cursor.encode(), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    key, check = raw[:-CHECK_BYTES], raw[-CHECK_BYTES:]
    if not key or _check(key) != check:
        raise InvalidInputError(
            "cursor is not one this server issued: pass next_cursor as it was given",
            field="cursor",
        )
    return key


def _check(key: bytes) -> bytes:
    return zlib.crc32(key).to_bytes(CHECK_BYTES, "big")


class PageBudget:
    """The bytes a listing page may still take (``TimerStore``'s ``max_bytes``): its items'
    payloads and headers. The item that reaches it is the page's last."""

    def __init__(self, max_bytes: int | None) -> None:
        self.left = max_bytes

    def spend(self, payload: bytes | None, headers: dict[str, str] | None) -> bool:
        """Count one item; True once the page is full."""
        if self.left is None:
            return False
        self.left -= len(payload or b"") + sum(len(k) + len(v) for k, v in (headers or {}).items())
        return self.left <= 0
