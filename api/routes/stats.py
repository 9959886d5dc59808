"""/v1/stats: counters, queue, lateness, scan cost, due-time buckets."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from api.docs import responses
from api.responses import MsgspecJSONResponse
from api.routes.deps import service_of

router = APIRouter(prefix="/v1/stats", tags=["stats"])


@router.get(
    "",
    summary="Service statistics",
    response_class=MsgspecJSONResponse,
    responses=responses({200: ("statistics", "ServiceStats")}),
)
async def get_stats(request: Request) -> Response:
    return MsgspecJSONResponse(await service_of(request).stats())
