"""One input row -> the store's exact keys and values, or a reject reason (runs on executors).

The rules mirror the API's: topic and id through ``validate_name``; exactly one of
``deliver_at_ms`` (epoch ms) and ``delay_ms`` (relative to the job's base time); at most
one of ``payload`` (text, stored as UTF-8) and ``payload_b64`` (binary); ``headers`` a
string-to-string object; no other field. The value is the same ``TimerRecord`` that
``RocksTimerStore.schedule`` writes, created at the job's ``now_ms``, and a past-due time
is clamped to ``floor_ms`` as ``schedule`` clamps to the scan floor.

Types follow the input's format (``fmt``), as the API's JSON decoder takes them:

* ``jsonl``: JSON values. An integer is a JSON integer or a whole number (``2.0``), never
  a string; ``headers`` an object of strings.
* ``csv``, and a Parquet string column: text. An integer is plain ASCII digits (no sign,
  space or ``_``: the API's times and delays are never negative); ``headers`` the JSON
  text of an object of strings (an empty cell: none).
* ``parquet``: typed columns. Integers of any width, an integral decimal (Spark reads
  ``uint64`` as ``decimal(20,0)``) or a whole float; ``headers`` a map or struct.
"""

from __future__ import annotations

import base64
import binascii
import re
from decimal import Decimal
from typing import Any

import msgspec

from storage import records
from storage.errors import InvalidInputError
from storage.names import validate_name
from storage.rocks import keys as layout
from storage.rules import MAX_DELAY_MS, MAX_TIME_MS, RecordLimits

MAX_MS = MAX_TIME_MS  # 9999-12-31T23:59:59.999Z: the API's limit (and MAX_DELAY_MS its delay's)
COLUMNS = ("topic", "id", "deliver_at_ms", "delay_ms", "payload", "payload_b64", "headers")
# what a rejects file adds to each row (pipeline.rejects): ignored, so a rejects file whose
# rows were corrected imports as it is
REJECT_COLUMNS = ("reject_reason", "reject_row", "reject_file")
FORMATS = ("jsonl", "csv", "parquet")
_DIGITS = re.compile(r"[0-9]+")  # ASCII only: str.isdigit() and int() also take "١٢"
_EXACT = 2**53  # beyond this a float does not spell one integer (as the API's decoder)


# The limits a row must keep, shipped to the executors: the store's rule's own struct,
# built by the driver from the service's settings (``pipeline.importer.limits_of``).
Limits = RecordLimits


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


def check_columns(columns: list[str]) -> None:
    """Refuse an input whose columns (CSV header, Parquet schema) include one that is no
    timer field, as the API refuses an unknown field: a misspelt ``payload_base64`` would
    otherwise import every timer without its payload."""
    for name in columns:
        if name not in COLUMNS and name not in REJECT_COLUMNS:
            raise InvalidInputError(
                f"unknown column {name!r}: the columns are {', '.join(COLUMNS)}", field=name
            )


def _check_fields(row: dict[str, Any]) -> None:
    for name in row:
        if name not in COLUMNS and name not in REJECT_COLUMNS:
            raise Rejected(f"unknown field {name!r}: the fields are {', '.join(COLUMNS)}")


def _int(row: dict[str, Any], name: str, fmt: str) -> int:
    """The integer value of ``row[name]`` by the rules of ``fmt`` (see the module docstring)."""
    value = row[name]
    if isinstance(value, str):
        if fmt == "jsonl":
            raise Rejected(f"{name} must be an integer, not a string (got {value!r})")
        if not _DIGITS.fullmatch(value):
            raise Rejected(f"{name} must be an integer of digits 0-9, got {value!r}")
        try:
            return int(value)
        except ValueError:  # more digits than int() reads: far out of range anyway
            raise Rejected(f"{name} is out of range ({len(value)} digits)") from None
    if isinstance(value, float):
        if not (value.is_integer() and -_EXACT <= value <= _EXACT):
            raise Rejected(f"{name} must be an integer, got {value!r}")
        return int(value)
    if isinstance(value, Decimal):
        if not (value.is_finite() and value == value.to_integral_value()):
            raise Rejected(f"{name} must be an integer, got {value}")
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Rejected(f"{name} must be an integer")
    return value


def _in_range(row: dict[str, Any], name: str, fmt: str, most: int) -> int:
    value = _int(row, name, fmt)
    if not 0 <= value <= most:
        raise Rejected(f"{name} must be between 0 and {most}, got {value}")
    return value


def _deliver_ms(row: dict[str, Any], times: JobTimes, fmt: str) -> int:
    at, delay = _present(row, "deliver_at_ms"), _present(row, "delay_ms")
    if at == delay:
        raise Rejected("exactly one of deliver_at_ms and delay_ms is required")
    if at:
        return _in_range(row, "deliver_at_ms", fmt, MAX_MS)
    deliver_ms = times.base_ms + _in_range(row, "delay_ms", fmt, MAX_DELAY_MS)
    if deliver_ms > MAX_MS:
        raise Rejected(f"delay_ms reaches past {MAX_MS}")
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


def _headers(row: dict[str, Any], limits: Limits, fmt: str) -> dict[str, str]:
    return headers_of(row.get("headers"), limits, fmt)


def headers_of(value: Any, limits: Limits, fmt: str = "jsonl") -> dict[str, str]:
    """The headers object from a ``headers`` value of the format ``fmt``: an object; in a
    text column (CSV, a Parquet string) its JSON text; in Parquet also a map (key/value
    pairs, as Arrow gives it)."""
    if value is None:
        return {}
    if isinstance(value, str) and fmt != "jsonl":
        if value == "":
            return {}  # an empty cell: no headers
        try:
            value = msgspec.json.decode(value)
        except msgspec.DecodeError:
            raise Rejected("headers is not the JSON text of an object") from None
    elif isinstance(value, list) and fmt == "parquet":  # an Arrow map: key/value pairs
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


def encode_row(row: dict[str, Any], times: JobTimes, limits: Limits, fmt: str = "jsonl") -> Encoded:
    """The store's bytes for one row of the format ``fmt``, or raise Rejected with the reason."""
    _check_fields(row)
    try:
        topic_b = validate_name("topic", row.get("topic", ""))
        id_b = validate_name("id", row.get("id", ""))
    except InvalidInputError as exc:
        raise Rejected(exc.message) from None
    requested_ms = _deliver_ms(row, times, fmt)
    payload, binary = _payload(row, limits)
    headers = _headers(row, limits, fmt)
    key_ms = max(requested_ms, times.floor_ms)
    return Encoded(
        topic_b.decode(),
        layout.ident_key(topic_b, id_b),
        layout.u64(key_ms),
        layout.timer_key(key_ms, topic_b, id_b),
        records.encode_new_timer(payload, headers, times.now_ms, requested_ms, binary),
    )
