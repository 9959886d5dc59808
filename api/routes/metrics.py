"""/metrics: the Prometheus text exposition of ``app.telemetry`` (the api only renders it).

HEAD answers as GET without the body (some monitoring checks probe with HEAD), as a route
of its own so that it has its own operationId in the OpenAPI document.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from api.docs import responses
from api.routes.deps import service_of
from app.telemetry import CONTENT_TYPE

router = APIRouter(tags=["operations"])
_GUARDED: dict[int | str, dict[str, Any]] = {
    401: responses({})[401],  # API keys are set and metrics_public is not
    503: responses({})[503],  # the service is shutting down
}


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text format",
            "content": {CONTENT_TYPE: {"schema": {"type": "string"}}},
        },
        **_GUARDED,
    },
)
async def metrics(request: Request) -> Response:
    return Response(await service_of(request).metrics(), media_type=CONTENT_TYPE)


router.add_api_route(
    "/metrics",
    metrics,
    methods=["HEAD"],
    name="metrics_head",
    summary="Prometheus metrics (HEAD: the same status and headers, no body)",
    response_class=Response,
    responses={200: {"description": "Prometheus text format"}, **_GUARDED},
)
