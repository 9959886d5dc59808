"""Schemathesis hooks for the contract run (loaded with ``SCHEMATHESIS_HOOKS``).

The document offers ``application/msgpack`` bodies beside JSON; schemathesis has no
msgpack serializer of its own. Values are generated in their JSON shape, where binary
``payload_b64`` is base64 text: in msgpack it travels as bin, so valid base64 is decoded
first (invalid text stays text and the server rejects it, as it should).

A listing cursor carries a check (``storage.cursors``): one the server did not issue is a
422 naming ``cursor``. A generated cursor that decodes is signed as the server would have
issued it, so the run still walks arbitrary positions; the cases the hook does not see
(schemathesis's coverage phase) are unsigned, and their 422 naming ``cursor`` is the
server keeping its rule, not a schema-valid request rejected: that one failure is dropped.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
from typing import Any

import msgspec
import schemathesis

from storage.cursors import encode_cursor


def _as_msgpack_shape(value: Any) -> Any:
    if isinstance(value, list):
        return [_as_msgpack_shape(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {key: _as_msgpack_shape(item) for key, item in value.items()}
    text = out.get("payload_b64")
    if isinstance(text, str):
        with contextlib.suppress(binascii.Error, ValueError):
            out["payload_b64"] = base64.b64decode(text, validate=True)
    return out


@schemathesis.serializer("application/msgpack")
def msgpack_body(ctx: Any, value: Any) -> bytes:
    try:
        return msgspec.msgpack.encode(_as_msgpack_shape(value))
    except (OverflowError, TypeError, msgspec.EncodeError):
        # an integer beyond 64 bits has no msgpack form: send it as the JSON text it is
        # (a body the server must reject as malformed msgpack with a 422)
        return msgspec.json.encode(value)


@schemathesis.hook
def map_query(ctx: Any, query: dict[str, Any] | None) -> dict[str, Any] | None:
    cursor = (query or {}).get("cursor")
    if not isinstance(cursor, str):
        return query
    try:
        key = base64.b64decode(cursor.encode(), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        return query
    return {**(query or {}), "cursor": encode_cursor(key)} if key else query


@schemathesis.hook
def filter_failure(ctx: Any, failure: Any, case: Any, response: Any) -> bool:
    """Keep every failure but a 422 naming ``cursor`` for a cursor the server did not issue."""
    if getattr(failure, "code", None) != "ST202" or response is None:
        return True
    try:
        error = msgspec.json.decode(response.content).get("error", {})
    except (msgspec.DecodeError, AttributeError):
        return True
    return not (response.status_code == 422 and error.get("field") == "cursor")
