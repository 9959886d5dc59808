"""The one error hierarchy of timerstore.

Domain errors are raised by ``storage`` and ``app`` and mapped to HTTP status codes in
exactly one place (``api.errors``). Each carries a machine-readable ``code`` and, for
validation errors, the ``field`` it is about.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One bad item of a batch: the field (``timers[3].delay_ms``), the rule, the index."""

    field: str
    message: str
    index: int | None = None


class TimerStoreError(Exception):
    """Base class of every domain error."""

    code = "error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidInputError(TimerStoreError):
    """A value breaks a rule; ``field`` names it and the message names the rule.

    ``problems`` lists every bad item when a batch has several (``field``/``message``
    then describe the first).
    """

    code = "invalid"

    def __init__(
        self, message: str, *, field: str | None = None, problems: tuple[Problem, ...] = ()
    ) -> None:
        super().__init__(message, field=field)
        self.problems = problems


class UnauthorizedError(TimerStoreError):
    """The request carries no API key, or one that is not configured."""

    code = "unauthorized"


class ForbiddenError(TimerStoreError):
    """The request names something outside what it may reach (a path outside staging)."""

    code = "forbidden"


class TooLargeError(TimerStoreError):
    """The request body is larger than ``limits.max_body_bytes``."""

    code = "too_large"


class UnsupportedMediaTypeError(TimerStoreError):
    """The request body's media type is not one the operation reads."""

    code = "unsupported_media_type"


class UnsupportedError(TimerStoreError):
    """This store cannot do the operation (the wheel store cannot ingest SST files)."""

    code = "unsupported"


class NotFoundError(TimerStoreError):
    code = "not_found"


class ConflictError(TimerStoreError):
    """The operation is too late for the timer's state (in flight or delivered)."""

    code = "conflict"

    def __init__(self, message: str, *, state: str, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.state = state


class ConfigError(TimerStoreError):
    """A setting is unknown or breaks its rule; raised at startup, never by a request."""

    code = "config"


class StoreOpenError(TimerStoreError):
    """A data directory cannot be opened; the message names it, the cause and what to do."""

    code = "store_open"


class StoreFormatError(StoreOpenError):
    """The data directory holds another format version than this build reads."""

    code = "store_format"

    def __init__(self, message: str, *, found: int, expected: int) -> None:
        super().__init__(message)
        self.found = found
        self.expected = expected


class StoreCorruptError(TimerStoreError):
    """Stored data breaks an invariant of its layout (never caused by a request's input)."""

    code = "store_corrupt"


class StoreFullError(TimerStoreError):
    """The disk under the store has no space left: the write was refused and nothing of
    it stored. Writes succeed again by themselves once space is freed."""

    code = "disk_full"


class StoreClosedError(TimerStoreError):
    """The store is closed or shutting down; retry against a running service."""

    code = "unavailable"


class HandedOverError(StoreClosedError):
    """What the call needed is no longer this store's to serve: a cluster partition moved
    to another node, or its last write's outcome is for the new owner to tell. A 503 to
    a client; to the engine, work that passed to the new owner, not a failed step."""

    code = "unavailable"


class HttpProtocolError(TimerStoreError):
    """A webhook receiver answered something that is no HTTP/1.1 answer (a failed
    delivery attempt, never an answer of ours: it does not reach the API)."""

    code = "http_protocol"
