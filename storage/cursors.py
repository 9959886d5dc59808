"""Listing cursors and page budgets, one rule for every store: a cursor is the base64url
(padded) of the RocksDB key a listing stopped at, and the next page starts after that key.

A cursor is a position in key order, so any well-formed one (base64url, padded, not
empty) is accepted and reads only what a listing could read anyway; the API documents
that form, so every cursor its document allows is one the server takes. The wheel store
has no such keys on disk, but orders its timers and dead letters the same way, so it
takes the same cursors. Anything else is a 422 naming ``cursor``.
"""

from __future__ import annotations

import base64
import binascii

from storage.errors import InvalidInputError


def encode_cursor(key: bytes) -> str:
    return base64.urlsafe_b64encode(key).decode()


def decode_cursor(cursor: str) -> bytes:
    """The key a cursor names: the listing goes on after it."""
    try:
        key = base64.b64decode(cursor.encode(), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if not key:
        raise InvalidInputError("cursor is not a well-formed cursor", field="cursor")
    return key


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
