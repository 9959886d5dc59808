"""Request bodies: size limit (413), media type (415), msgspec decoding (422).

The decoder is chosen by Content-Type: JSON (also when no type is given) or msgpack.
A batch is decoded in one pass; only when that fails is it decoded item by item, so
that the 422 can list every bad item, not just the first msgspec stopped at.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Generic, Literal, TypeVar

import msgspec
from fastapi import Request

from api.errors import invalid_from_msgspec, malformed
from api.schemas import TimerBatchCreate, TimerBatchRaw, TimerCreate
from storage.errors import InvalidInputError, Problem, TooLargeError, UnsupportedMediaTypeError

T = TypeVar("T")
Kind = Literal["json", "msgpack"]
JSON_TYPES = frozenset({"application/json"})
MSGPACK_TYPES = frozenset(
    {"application/msgpack", "application/x-msgpack", "application/vnd.msgpack"}
)
MEDIA_TYPES = {"json": "application/json", "msgpack": "application/msgpack"}


def media_kind(request: Request, allowed: Sequence[Kind]) -> Kind:
    raw = request.headers.get("content-type")
    base = "application/json" if raw is None else raw.split(";", 1)[0].strip().lower()
    kind: Kind | None = (
        "json" if base in JSON_TYPES else "msgpack" if base in MSGPACK_TYPES else None
    )
    if kind is None or kind not in allowed:
        names = " or ".join(MEDIA_TYPES[k] for k in allowed)
        raise UnsupportedMediaTypeError(f"Content-Type must be {names}, got {base}")
    return kind


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, or 413 as soon as it is known to exceed ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> TooLargeError:
    return TooLargeError(f"the request body must be at most {limit} bytes", field="body")


class BodyDecoder(Generic[T]):
    def __init__(self, kind: type[T]) -> None:
        self.json = msgspec.json.Decoder(kind)
        self.msgpack = msgspec.msgpack.Decoder(kind)

    def decode(self, kind: Kind, body: bytes, prefix: str = "") -> T:
        decoder = self.json if kind == "json" else self.msgpack
        try:
            return decoder.decode(body)
        except msgspec.ValidationError as exc:
            whole = _whole_floats_as_ints(body) if kind == "json" and _FLOAT(str(exc)) else None
            if whole is None:
                raise invalid_from_msgspec(exc, prefix) from None
            try:
                return decoder.decode(whole)
            except msgspec.ValidationError as again:
                raise invalid_from_msgspec(again, prefix) from None
        except msgspec.DecodeError as exc:
            raise malformed(exc, kind) from None


_FLOAT = re.compile(r"Expected `int[^`]*`, got `float`").search
_EXACT = 2**53  # beyond this a float does not spell one integer


def _whole_floats_as_ints(body: bytes) -> bytes | None:
    """The JSON body with every whole number (``2.0``, ``1e3``) written as an integer.

    JSON Schema counts ``2.0`` as the integer 2, so the document's ``integer`` fields take
    it; msgspec's strict decoding does not (and its lax mode would also take ``"2"``).
    Only a body that failed on exactly that is rewritten: the hot path never comes here.
    """
    try:
        return msgspec.json.encode(_ints(msgspec.json.decode(body)))
    except (msgspec.DecodeError, msgspec.EncodeError, UnicodeError):
        return None


def _ints(value: object) -> object:
    if isinstance(value, float) and value.is_integer() and -_EXACT <= value <= _EXACT:
        return int(value)
    if isinstance(value, list):
        return [_ints(item) for item in value]
    if isinstance(value, dict):
        return {key: _ints(item) for key, item in value.items()}
    return value


timer_decoder = BodyDecoder(TimerCreate)
batch_decoder = BodyDecoder(TimerBatchCreate)
raw_batch_decoder = BodyDecoder(TimerBatchRaw)


def decode_batch(kind: Kind, body: bytes) -> tuple[list[TimerCreate | None], list[Problem]]:
    """The batch's items (None where an item failed) and a problem per failed item."""
    try:
        return list(batch_decoder.decode(kind, body).timers), []
    except InvalidInputError:
        pass  # find every bad item below
    raw = raw_batch_decoder.decode(kind, body)  # raises for a bad envelope
    items: list[TimerCreate | None] = []
    problems: list[Problem] = []
    for i, item in enumerate(raw.timers):
        try:
            items.append(timer_decoder.decode(kind, bytes(item), prefix=f"timers[{i}]"))
        except InvalidInputError as exc:
            items.append(None)
            problems.append(Problem(exc.field or f"timers[{i}]", exc.message, i))
    return items, problems
