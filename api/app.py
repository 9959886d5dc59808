"""The FastAPI application: routers, error mapping, docs, and the service lifespan.

Lifespan: open the store and start the engine (``TimerService.start``), then the
housekeeping scheduler. On shutdown: refuse new /v1 work (503), stop the scheduler,
let the engine commit what is queued, close the store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI

from api.auth import admin_guard, guard, metrics_guard
from api.docs import install_docs
from api.errors import install_error_handlers
from api.routes import (
    admin,
    deadletters,
    groups,
    health,
    metrics,
    stats,
    timers,
    topic_routes,
    topics,
)
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
        housekeeper = Housekeeper(svc, settings.housekeeping)
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
    )
    app.state.service = svc
    app.state.settings = settings
    install_error_handlers(app)
    app.include_router(health.router)
    for module in (timers, topics, groups, stats, deadletters):
        app.include_router(module.router, dependencies=[Depends(guard)])
    for module in (admin, topic_routes):  # routes hold webhook URLs and secrets
        app.include_router(module.router, dependencies=[Depends(admin_guard)])
    app.include_router(metrics.router, dependencies=[Depends(metrics_guard)])
    install_docs(app)
    install_ui(app)
    return app
