"""The one error hierarchy of timerstore.

Domain errors are raised by ``storage`` and ``app`` and mapped to HTTP status codes in
exactly one place (``api.errors``). Each carries a machine-readable ``code`` and, for
validation errors, the ``field`` it is about.
"""

from __future__ import annotations


class TimerStoreError(Exception):
    """Base class of every domain error."""

    code = "error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidInputError(TimerStoreError):
    """A value breaks a rule; ``field`` names it and the message names the rule."""

    code = "invalid"


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


class StoreClosedError(TimerStoreError):
    """The store is closed or shutting down; retry against a running service."""

    code = "unavailable"
