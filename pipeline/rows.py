"""One input row -> the store's exact keys and values, or a reject reason (runs on executors).

The rules mirror the API's: topic and id through ``validate_name``; exactly one of
``deliver_at_ms`` (epoch ms) and ``delay_ms`` (relative to the job's base time); at most
one of ``payload`` (text, stored as UTF-8) and ``payload_b64`` (binary); ``headers`` a
string-to-string object (or its JSON text, as CSV carries it). The value is the same
``TimerRecord`` that ``RocksTimerStore.schedule`` writes, created at the job's ``now_ms``,
and a past-due time is clamped to ``floor_ms`` as ``schedule`` clamps to the scan floor.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import msgspec

from storage import records
from storage.errors import InvalidInputError
from storage.names import validate_name
from storage.rocks import keys as layout

MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, the API's limit
COLUMNS = ("topic", "id", "deliver_at_ms", "delay_ms", "payload", "payload_b64", "headers")


class Limits(msgspec.Struct, frozen=True):
    """The request limits a row must keep, shipped to the executors.

    No defaults here: the driver builds it from the service's settings
    (``pipeline.importer.limits_of(settings.limits)``), the one place they are set.
    """

    max_payload_bytes: int
    max_headers: int
    max_headers_bytes: int


class JobTimes(msgspec.Struct, frozen=True):
    now_ms: int  # created_at_ms of every imported record
    base_ms: int  # what delay_ms is relative to
    floor_ms: int  # the clamp floor for past-due rows


class Encoded(msgspec.Struct, frozen=True):
    topic: str
    ident_key: bytes
    ids_value: bytes
    timer_key: bytes
    timer_value: bytes


class Rejected(Exception):
    pass


def _present(row: dict[str, Any], name: str) -> bool:
    """Null or missing means absent, as in the API (an empty payload_b64 is an empty body)."""
    return row.get(name) is not None


def _int(row: dict[str, Any], name: str) -> int:
    value = row[name]
    if isinstance(value, bool):
        raise Rejected(f"{name} must be an integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise Rejected(f"{name} must be an integer, got {value!r}")
        value = int(value)
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise Rejected(f"{name} must be an integer, got {value!r}") from None
    if not isinstance(value, int):
        raise Rejected(f"{name} must be an integer")
    if not 0 <= value <= MAX_MS:
        raise Rejected(f"{name} must be between 0 and {MAX_MS}, got {value}")
    return value


def _deliver_ms(row: dict[str, Any], times: JobTimes) -> int:
    at, delay = _present(row, "deliver_at_ms"), _present(row, "delay_ms")
    if at == delay:
        raise Rejected("exactly one of deliver_at_ms and delay_ms is required")
    if at:
        return _int(row, "deliver_at_ms")
    deliver_ms = times.base_ms + _int(row, "delay_ms")
    if deliver_ms > MAX_MS:
        raise Rejected("delay_ms is too large")
    return deliver_ms


def _payload(row: dict[str, Any], limits: Limits) -> tuple[bytes, bool]:
    return payload_of(row.get("payload"), row.get("payload_b64"), limits)


def payload_of(text: Any, b64: Any, limits: Limits) -> tuple[bytes, bool]:
    """(payload bytes, binary) from the ``payload`` and ``payload_b64`` values (None: absent)."""
    if text is not None and b64 is not None:
        raise Rejected("give payload or payload_b64, not both")
    if b64 is not None:
        if not isinstance(b64, str):
            raise Rejected("payload_b64 must be a base64 string")
        try:
            payload, binary = base64.b64decode(b64, validate=True), True
        except (binascii.Error, ValueError):
            raise Rejected("payload_b64 is not valid base64") from None
    elif text is not None:
        if isinstance(text, bytes | bytearray):
            payload, binary = bytes(text), True
        elif isinstance(text, str):
            try:
                payload, binary = text.encode(), False
            except UnicodeEncodeError:
                raise Rejected("payload must be valid UTF-8 text") from None
        else:
            raise Rejected("payload must be a string")
    else:
        payload, binary = b"", False
    if len(payload) > limits.max_payload_bytes:
        raise Rejected(f"payload is {len(payload)} bytes, more than {limits.max_payload_bytes}")
    return payload, binary


def _headers(row: dict[str, Any], limits: Limits) -> dict[str, str]:
    return headers_of(row.get("headers"), limits)


def headers_of(value: Any, limits: Limits) -> dict[str, str]:
    """The headers object from a ``headers`` value: a dict, key/value pairs or JSON text."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = msgspec.json.decode(value)
        except msgspec.DecodeError:
            raise Rejected("headers is not a JSON object") from None
    if isinstance(value, list):  # an Arrow map arrives as key/value pairs
        try:
            value = dict(value)
        except (TypeError, ValueError):
            raise Rejected("headers must be an object of strings") from None
    if not isinstance(value, dict):
        raise Rejected("headers must be an object of strings")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise Rejected("headers must map strings to strings")
    if len(value) > limits.max_headers:
        raise Rejected(f"more than {limits.max_headers} headers")
    size = sum(len(k.encode()) + len(v.encode()) for k, v in value.items())
    if size > limits.max_headers_bytes:
        raise Rejected(f"headers are {size} bytes, more than {limits.max_headers_bytes}")
    return value


def encode_row(row: dict[str, Any], times: JobTimes, limits: Limits) -> Encoded:
    """The store's bytes for one row, or raise Rejected with the reason."""
    try:
        topic_b = validate_name("topic", row.get("topic", ""))
        id_b = validate_name("id", row.get("id", ""))
    except InvalidInputError as exc:
        raise Rejected(exc.message) from None
    requested_ms = _deliver_ms(row, times)
    payload, binary = _payload(row, limits)
    headers = _headers(row, limits)
    key_ms = max(requested_ms, times.floor_ms)
    record = records.TimerRecord(payload, headers, times.now_ms, requested_ms, 0, binary)
    return Encoded(
        topic_b.decode(),
        layout.ident_key(topic_b, id_b),
        layout.u64(key_ms),
        layout.timer_key(key_ms, topic_b, id_b),
        records.encode(record),
    )
