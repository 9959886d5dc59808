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

from starlette.requests import ClientDisconnect, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from api.auth import guard
from api.errors import domain_response
from api.routes.timers import schedule_one
from storage.errors import TimerStoreError

SCHEDULE_ONE_PATH = "/v1/timers"


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
