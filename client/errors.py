"""Typed exceptions for the server's error answers.

Every error the server sends is ``{"error": {"code", "message", "field"?, "state"?,
"problems"?}}``; the client raises the exception class of its ``code`` carrying all of it
and the HTTP status. An answer that is not that shape (a proxy's 502 page) is a plain
``TimerStoreClientError`` with code ``http_error``. Network failures stay httpx's own.
"""

from __future__ import annotations

import msgspec

from client.models import ErrorBody, ProblemItem


class TimerStoreClientError(Exception):
    """An error answer: ``status``, the server's ``code``, ``message`` and the ``field``
    that broke a rule (``state`` for a conflict, ``problems`` for a batch)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        state: str | None = None,
        problems: tuple[ProblemItem, ...] = (),
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message
        self.field, self.state, self.problems = field, state, problems


class InvalidInput(TimerStoreClientError):
    """422: a value breaks a rule; ``field`` names it (``problems`` lists a batch's)."""


class Unauthorized(TimerStoreClientError):
    """401: no API key, or one the server does not know."""


class Forbidden(TimerStoreClientError):
    """403: the request names something it may not reach."""


class NotFound(TimerStoreClientError):
    """404: no such timer (or route)."""


class Conflict(TimerStoreClientError):
    """409: too late for the timer's ``state`` (in flight or delivered), or unsupported."""


class TooLarge(TimerStoreClientError):
    """413: the body is larger than the server's limit."""


class UnsupportedMediaType(TimerStoreClientError):
    """415: the server does not read this body's media type."""


class Unavailable(TimerStoreClientError):
    """503: the server is shutting down; retry against a running one."""


class ServerError(TimerStoreClientError):
    """5xx other than 503: a defect on the server side."""


BY_CODE: dict[str, type[TimerStoreClientError]] = {
    "invalid": InvalidInput,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "conflict": Conflict,
    "unsupported": Conflict,
    "too_large": TooLarge,
    "unsupported_media_type": UnsupportedMediaType,
    "unavailable": Unavailable,
}
_ERROR_DECODER = msgspec.json.Decoder(ErrorBody)


def error_from(status: int, body: bytes) -> TimerStoreClientError:
    """The exception for an error answer (status >= 400) and its body."""
    try:
        detail = _ERROR_DECODER.decode(body).error
    except (msgspec.DecodeError, msgspec.ValidationError):
        kind = ServerError if status >= 500 else TimerStoreClientError
        text = body[:200].decode("utf-8", "replace")
        return kind(status, "http_error", text or f"HTTP {status}")
    kind = BY_CODE.get(detail.code, ServerError if status >= 500 else TimerStoreClientError)
    return kind(
        status,
        detail.code,
        detail.message,
        field=detail.field,
        state=detail.state,
        problems=tuple(detail.problems or ()),
    )
