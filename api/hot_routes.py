"""The hot route, answered below FastAPI's router: single ``POST /v1/timers``.

Most users schedule one timer per order, so that request is the rate they meet first
(issue 36, part 3). Through FastAPI it passed the router's match over every route, the
dependency solver (the guard), an exit stack and the exception middleware's wrapper
before any of its own work: about as much Python again as the request itself. This ASGI
middleware answers it directly with the same code and the same rules: the guard
(``api.auth.guard``: 503 while shutting down, then the API key), the route's body
(``api.routes.timers.schedule_one``), and every domain error mapped by
``api.errors.domain_response``, the one table. Anything unexpected propagates to
Starlette's outermost middleware, which answers the JSON 500 as for every route. The
FastAPI route stays, for the OpenAPI document.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec
from starlette.requests import ClientDisconnect, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from api.auth import bearer_token, guard, key_matches
from api.bodies import media_kind_of, timer_decoder
from api.errors import domain_response, unexpected_response
from api.routes.timers import schedule_one
from api.schemas import timer_from_schedule
from app.config import Settings
from app.service import TimerService
from app.single_schedules import PendingSingle, SingleSchedules
from storage.errors import TimerStoreError

SCHEDULE_ONE_PATH = "/v1/timers"
SCHEDULE_ONE_RAW_PATH = SCHEDULE_ONE_PATH.encode()
Headers = Iterable[tuple[bytes, bytes]]  # an ASGI scope's: lower-case names, raw values
Answer = tuple[int, Headers, bytes]  # status, headers (content-type and -length), body


class HotRoutes:
    """ASGI middleware: ``POST /v1/timers`` answered here, everything else passed on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["path"] == SCHEDULE_ONE_PATH
            and scope["method"] == "POST"
        ):
            await _schedule_one(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def _schedule_one(scope: Scope, receive: Receive, send: Send) -> None:
    request = Request(scope, receive)
    try:
        await guard(request)
        response = await schedule_one(request)
    except TimerStoreError as exc:
        response = domain_response(exc)
    except ClientDisconnect:  # the client left before its body arrived: nobody to answer
        return
    await response(scope, receive, send)


class ScheduleOneAnswers:
    """``POST /v1/timers`` without ASGI, for the HTTP protocol (``api.http_protocol``).

    Only the plain request is answered here: the guard passes, the body is JSON or
    msgpack, its whole length declared and within the limits, and it decodes and checks.
    Anything else (``submit`` gives None) is the ASGI route's, which answers it with its
    own error; nothing is stored before ``submit`` returns a pending schedule, so the
    route's second look at the same request finds what ``submit`` found.
    """

    def __init__(self, service: TimerService, settings: Settings) -> None:
        self._service = service
        self._singles: SingleSchedules = service.singles
        self._api_keys = settings.api_keys
        self._max_body_bytes = settings.limits.max_body_bytes
        self.taken = 0  # schedules answered here: a test sees the path is taken at all

    def takes(self, method: str, raw_path: bytes, headers: Headers, max_body_bytes: int) -> bool:
        """Whether the request, by its head, may be answered here once its body is in:
        ``max_body_bytes`` is what the protocol holds without pausing its reads."""
        if method != "POST" or raw_path != SCHEDULE_ONE_RAW_PATH:
            return False
        length = None
        for name, value in headers:
            if name == b"content-length" and length is None:
                length = value
            elif name in (b"expect", b"transfer-encoding"):
                return False
        limit = min(self._max_body_bytes, max_body_bytes)
        return length is not None and length.isdigit() and int(length) <= limit

    def submit(self, headers: Headers, body: bytes) -> PendingSingle | None:
        """The schedule started, or None when the ASGI route is to answer the request."""
        if not self._service.accepting:
            return None
        content_type = authorization = None
        for name, value in headers:
            if name == b"content-type" and content_type is None:
                content_type = value.decode("latin-1")
            elif name == b"authorization" and authorization is None:
                authorization = value.decode("latin-1")
        if self._api_keys and not key_matches(bearer_token(authorization), self._api_keys):
            return None
        try:
            kind = media_kind_of(content_type, ("json", "msgpack"))
            pending = self._singles.submit(timer_decoder.decode(kind, body))
        except TimerStoreError:
            return None
        self.taken += 1
        return pending

    def answer(self, pending: PendingSingle) -> Answer:
        """The answer to a submitted schedule whose future is done."""
        try:
            result = self._singles.result(pending)
        except TimerStoreError as exc:
            response = domain_response(exc)
            return response.status_code, response.raw_headers, bytes(response.body)
        except Exception:  # the request's top, as Starlette's ServerErrorMiddleware: a 500
            response = unexpected_response("POST", SCHEDULE_ONE_PATH)
            return response.status_code, response.raw_headers, bytes(response.body)
        body = msgspec.json.encode(timer_from_schedule(result, pending.timer))
        headers = [
            (b"content-length", str(len(body)).encode("ascii")),
            (b"content-type", b"application/json"),
        ]
        return 200 if result.replaced else 201, headers, body
