"""The FastAPI application: routers, error mapping, docs, and the service lifespan.

Lifespan: open the store and start the engine (``TimerService.start``), then the
housekeeping scheduler. On shutdown: refuse new /v1 work (503), stop the scheduler,
let the engine commit what is queued, close the store.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from api.auth import admin_guard, guard, metrics_guard
from api.docs import install_docs
from api.errors import error_response, install_error_handlers
from api.hot_routes import HotRoutes, ScheduleOneAnswers
from api.routes import (
    admin,
    cluster,
    deadletters,
    groups,
    health,
    metrics,
    stats,
    timers,
    topic_routes,
    topics,
)
from api.schemas import ErrorDetail
from api.ui import install_ui
from app.clock import Clock
from app.config import Settings
from app.engine.sinks import Sink
from app.housekeeping import Housekeeper
from app.service import TimerService

DESCRIPTION = """A durable timer service for delayed messages.

Schedule a message for a topic at a time (`deliver_at_ms`) or after a delay (`delay_ms`),
inspect or cancel it until then; when it is due it is appended to the topic's log, which
consumers read (and long-poll) by offset. All times are integer epoch milliseconds.
"""

_ENCODED_SLASH = re.compile(rb"%2f", re.IGNORECASE).search
ENCODED_SLASH_RULE = (
    "path: a name (topic, id, group) may contain only A-Z a-z 0-9 . _ : -, "
    "so an encoded slash (%2F) is never part of one"
)


class RefuseEncodedSlashes:
    """ASGI middleware: a /v1 request whose path holds an encoded slash is a 422.

    Starlette routes on the decoded path, where ``%2F`` is a ``/`` like any other: the
    replay of topic ``a%2Fb`` would have replayed the dead letter ``a``/``b`` instead.
    No name may hold a slash, so such a path names nothing and is refused before routing.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _encoded_slash_under_v1(scope):
            detail = ErrorDetail("invalid", ENCODED_SLASH_RULE, "path")
            await error_response(422, detail)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _encoded_slash_under_v1(scope: Scope) -> bool:
    path: str = scope["path"]
    under_v1 = path == "/v1" or path.startswith("/v1/")
    return under_v1 and _ENCODED_SLASH(scope.get("raw_path") or b"") is not None


def create_app(
    settings: Settings,
    *,
    service: TimerService | None = None,
    clock: Clock | None = None,
    sink: Sink | None = None,
    run_engine: bool = True,
) -> FastAPI:
    """Build the app; nothing is opened until the lifespan starts."""
    svc = service or TimerService(settings, clock, sink=sink, run_engine=run_engine)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await svc.start()
        housekeeper = Housekeeper(svc, settings.housekeeping, settings.memory)
        housekeeper.start()
        app.state.housekeeper = housekeeper
        try:
            yield
        finally:
            svc.begin_shutdown()
            await housekeeper.stop()
            await svc.stop()

    app = FastAPI(
        title="timerstore",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
        generate_unique_id_function=lambda route: route.name,  # operationId = function name
        # a trailing slash is a 404, not a 307 to the path without it: no client following
        # redirects lands on an operation it did not ask for, and the document lists no 307
        redirect_slashes=False,
        # FastAPI's native OpenTelemetry bridge: off, the service exports Prometheus
        # metrics (/metrics). On, it asked whether a provider was configured on every
        # request (three provider lookups and environment reads), 13% of the Python
        # of a single schedule (docs/perf.md, "The single schedule").
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.add_middleware(HotRoutes)
    app.add_middleware(RefuseEncodedSlashes)  # added last: the outermost, before HotRoutes
    app.state.service = svc
    app.state.settings = settings
    # the HTTP protocol answers the plain single schedule itself (api.http_protocol)
    app.state.schedule_one_answers = ScheduleOneAnswers(svc, settings)
    install_error_handlers(app)
    app.include_router(health.router)
    for module in (timers, topics, groups, stats, deadletters, cluster):
        app.include_router(module.router, dependencies=[Depends(guard)])
    for module in (admin, topic_routes):  # routes hold webhook URLs and secrets
        app.include_router(module.router, dependencies=[Depends(admin_guard)])
    app.include_router(metrics.router, dependencies=[Depends(metrics_guard)])
    install_docs(app)
    install_ui(app)
    return app
