"""Bearer API keys, compared in constant time.

With ``api_keys`` configured every ``/v1`` call needs ``Authorization: Bearer <key>``;
with none configured the API is open (it binds to 127.0.0.1 by default). Admin routes
need one of ``admin_keys`` when those are set, and otherwise follow the ``/v1`` rule.
"""

from __future__ import annotations

import hmac

from fastapi import Request

from app.config import Settings
from app.service import TimerService
from storage.errors import StoreClosedError, UnauthorizedError


def _bearer(request: Request) -> bytes | None:
    return bearer_token(request.headers.get("authorization"))


def bearer_token(header: str | None) -> bytes | None:
    """The token of an ``Authorization: Bearer <token>`` header's value, or None."""
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip().encode()


def key_matches(token: bytes | None, keys: tuple[str, ...]) -> bool:
    """Constant time in the token: every configured key is compared, match or not."""
    if token is None:
        return False
    found = False
    for key in keys:
        found |= hmac.compare_digest(token, key.encode())
    return found


def _require(request: Request, keys: tuple[str, ...]) -> None:
    if keys and not key_matches(_bearer(request), keys):
        raise UnauthorizedError("a valid API key is required: Authorization: Bearer <key>")


def _accepting(request: Request) -> None:
    service: TimerService = request.app.state.service
    if not service.accepting:
        raise StoreClosedError("the service is shutting down or not started")


async def guard(request: Request) -> None:
    """Every /v1 route: 503 while shutting down, then the API key."""
    _accepting(request)
    settings: Settings = request.app.state.settings
    _require(request, settings.api_keys)


async def admin_guard(request: Request) -> None:
    """Admin routes: 503 while shutting down, then an admin key (or an API key if none)."""
    _accepting(request)
    settings: Settings = request.app.state.settings
    _require(request, settings.admin_keys or settings.api_keys)


async def metrics_guard(request: Request) -> None:
    """/metrics: the /v1 API-key rule unless ``metrics_public`` is set."""
    settings: Settings = request.app.state.settings
    if not settings.metrics_public:
        _require(request, settings.api_keys)
