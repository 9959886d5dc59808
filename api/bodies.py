"""Request bodies: size limit (413), media type (415), msgspec decoding (422).

The decoder is chosen by Content-Type: JSON or msgpack. A body without a Content-Type is
a 415 like any other type the operation does not read (it was taken as JSON).
A batch is decoded in one pass; only when that fails is it decoded item by item, so
that the 422 can list every bad item, not just the first msgspec stopped at. That second
pass runs on the event loop, so it is bounded: a batch of more than max_batch_timers
items is refused before it, and it stops after ``MAX_BATCH_PROBLEMS`` bad items.

Every body that is not well-formed is a 422 naming ``body`` (or the batch item): msgspec
reports most as a DecodeError, but invalid UTF-8 inside a string as UnicodeDecodeError
and nesting deeper than Python's recursion limit as RecursionError (``NOT_WELL_FORMED``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Generic, Literal, TypeVar

import msgspec
from fastapi import Request

from api.errors import invalid_from_msgspec, malformed
from api.schemas import CancelBatch, TimerBatchCreate, TimerBatchRaw, TimerCreate, TimerRef
from app.timer_requests import MAX_BATCH_PROBLEMS, RequestLimits, check_batch_size
from storage.errors import InvalidInputError, Problem, TooLargeError, UnsupportedMediaTypeError

T = TypeVar("T")
Kind = Literal["json", "msgpack"]
JSON_TYPES = frozenset({"application/json"})
MSGPACK_TYPES = frozenset(
    {"application/msgpack", "application/x-msgpack", "application/vnd.msgpack"}
)
MEDIA_TYPES = {"json": "application/json", "msgpack": "application/msgpack"}
NOT_WELL_FORMED = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)


def media_kind(request: Request, allowed: Sequence[Kind]) -> Kind:
    return media_kind_of(request.headers.get("content-type"), allowed)


def media_kind_of(raw: str | None, allowed: Sequence[Kind]) -> Kind:
    """The body's kind by its ``Content-Type`` value, or a 415 naming what is read."""
    base = "" if raw is None else raw.split(";", 1)[0].strip().lower()
    kind: Kind | None = (
        "json" if base in JSON_TYPES else "msgpack" if base in MSGPACK_TYPES else None
    )
    if kind is None or kind not in allowed:
        names = " or ".join(MEDIA_TYPES[k] for k in allowed)
        got = "none was given" if raw is None else f"got {base or repr(raw)}"
        raise UnsupportedMediaTypeError(
            f"Content-Type must be {names}; {got}", field="Content-Type"
        )
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
        """The body as ``T``, or InvalidInputError naming the field (after ``prefix``)."""
        try:
            return self._decode(kind, body, prefix)
        except NOT_WELL_FORMED as exc:  # a ValidationError never gets here: see _decode
            raise malformed(exc, kind, prefix, body) from None

    def _decode(self, kind: Kind, body: bytes, prefix: str) -> T:
        decoder = self.json if kind == "json" else self.msgpack
        try:
            return decoder.decode(body)
        except msgspec.ValidationError as exc:
            whole = _whole_floats_as_ints(kind, body) if _FLOAT(str(exc)) else None
            if whole is None:
                raise invalid_from_msgspec(exc, prefix) from None
            try:
                return decoder.decode(whole)
            except msgspec.ValidationError as again:
                raise invalid_from_msgspec(again, prefix) from None


_FLOAT = re.compile(r"Expected `int[^`]*`, got `float`").search
_EXACT = 2**53  # beyond this a float does not spell one integer


def _whole_floats_as_ints(kind: Kind, body: bytes) -> bytes | None:
    """The body with every whole number (``2.0``, ``1e3``) written as an integer.

    JSON Schema counts ``2.0`` as the integer 2, so the document's ``integer`` fields take
    it; msgspec's strict decoding does not (and its lax mode would also take ``"2"``).
    The msgpack body follows the same schema, so a whole msgpack float counts too (a
    client whose numbers are floats sends one). Only a body that failed on exactly that
    is rewritten: the hot path never comes here. None when the body cannot be rewritten
    (then the first error stands).
    """
    codec = msgspec.json if kind == "json" else msgspec.msgpack
    try:
        return codec.encode(_ints(codec.decode(body)))
    except (*NOT_WELL_FORMED, msgspec.EncodeError, UnicodeError):
        return None


def _ints(value: object) -> object:
    """``value`` (decoded JSON, changed in place) with whole floats as ints.

    A loop, not recursion: a body may nest as deep as msgspec decodes, and that is deeper
    than Python recursion has room for when the request arrives.
    """
    root = [value]
    todo: list[list[Any] | dict[str, Any]] = [root]
    while todo:
        container = todo.pop()
        keys: Iterable[Any] = range(len(container)) if isinstance(container, list) else [*container]
        for key in keys:
            item = container[key]
            if isinstance(item, float) and item.is_integer() and -_EXACT <= item <= _EXACT:
                container[key] = int(item)
            elif isinstance(item, (list, dict)):
                todo.append(item)
    return root[0]


# A batch body longer than this many bytes a timer may hold more items than a batch may:
# its items are counted first (one msgspec.Raw each), so a 31 MiB body of 1.2 million
# tiny valid items is refused in a third of the time it took to decode them all first
# (0.12 against 0.31 s, on the event loop). Below it, decoding every item first costs at
# most about 45 ms. A valid batch that long pays the count too: 3.5 ms of the 12 ms its
# decode takes for 10,000 timers of 1 KB.
COUNT_FIRST_ITEM_BYTES = 256

timer_decoder = BodyDecoder(TimerCreate)
batch_decoder = BodyDecoder(TimerBatchCreate)
raw_batch_decoder = BodyDecoder(TimerBatchRaw)
ref_decoder = BodyDecoder(TimerRef)
cancel_batch_decoder = BodyDecoder(CancelBatch)


def decode_batch(
    kind: Kind, body: bytes, limits: RequestLimits
) -> tuple[list[TimerCreate | None], list[Problem]]:
    """A schedule batch's items (None where an item failed) and a problem per failed item
    (see ``decode_items``)."""
    return decode_items(kind, body, limits, batch_decoder, timer_decoder)


def decode_cancel_batch(
    kind: Kind, body: bytes, limits: RequestLimits
) -> tuple[list[TimerRef | None], list[Problem]]:
    """A cancel batch's identities, as ``decode_batch`` decodes a schedule batch."""
    return decode_items(kind, body, limits, cancel_batch_decoder, ref_decoder)


def decode_items(
    kind: Kind,
    body: bytes,
    limits: RequestLimits,
    whole: BodyDecoder[Any],
    item: BodyDecoder[T],
) -> tuple[list[T | None], list[Problem]]:
    """The items of a body ``{"timers": [...]}`` (None where an item failed) and a problem
    per failed item.

    When the batch does not decode whole, each item is decoded on its own to name every
    bad one; that is refused first for a batch of too many items (the count rule of
    ``app.timer_requests``) and stops after ``MAX_BATCH_PROBLEMS`` bad items (the rest
    are left None, unchecked: the 422 lists the first bad items only). A body long
    enough to hold too many items has them counted before any is decoded.
    """
    if len(body) > limits.max_batch_timers * COUNT_FIRST_ITEM_BYTES:
        check_batch_size(len(raw_batch_decoder.decode(kind, body).timers), limits)
    try:
        return list(whole.decode(kind, body).timers), []
    except InvalidInputError:
        pass  # find every bad item below
    raw = raw_batch_decoder.decode(kind, body).timers  # raises for a bad envelope
    check_batch_size(len(raw), limits)
    items: list[T | None] = [None] * len(raw)
    problems: list[Problem] = []
    for i, one in enumerate(raw):
        try:
            items[i] = item.decode(kind, bytes(one), prefix=f"timers[{i}]")
        except InvalidInputError as exc:
            problems.append(Problem(exc.field or f"timers[{i}]", exc.message, i))
            if len(problems) >= MAX_BATCH_PROBLEMS:
                break
    return items, problems
