"""Liveness and readiness (no auth: load balancers and orchestrators call them).

Each also answers HEAD, as GET without the body (same status and headers): some load
balancers probe with HEAD. The HEAD operations are routes of their own, so that each has
its own operationId in the OpenAPI document.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from api.docs import ref
from api.responses import MsgspecJSONResponse
from api.routes.deps import service_of
from api.schemas import Health

router = APIRouter(tags=["health"])
_HEALTH = {"content": {"application/json": {"schema": ref("Health")}}}
_HEAD = " (HEAD: the same status and headers, no body)"


@router.get(
    "/healthz",
    summary="The process is up",
    response_class=MsgspecJSONResponse,
    responses={200: {"description": "up", **_HEALTH}},
)
async def healthz() -> Response:
    return MsgspecJSONResponse(Health("ok"))


@router.get(
    "/readyz",
    summary="The store is open and the engine running",
    response_class=MsgspecJSONResponse,
    responses={
        200: {"description": "ready", **_HEALTH},
        503: {
            "description": "starting or shutting down, the disk full, or a stage of the "
            "engine failing for longer than engine.stage_failure_unready_ms (`reason` says "
            "which)",
            **_HEALTH,
        },
    },
)
async def readyz(request: Request) -> Response:
    reason = await service_of(request).readiness()
    if reason is None:
        return MsgspecJSONResponse(Health("ready"))
    return MsgspecJSONResponse(Health("not_ready", reason), status_code=503)


router.add_api_route(
    "/healthz",
    healthz,
    methods=["HEAD"],
    name="healthz_head",
    summary="The process is up" + _HEAD,
    response_class=Response,
    responses={200: {"description": "up"}},
)
router.add_api_route(
    "/readyz",
    readyz,
    methods=["HEAD"],
    name="readyz_head",
    summary="The store is open and the engine running" + _HEAD,
    response_class=Response,
    responses={200: {"description": "ready"}, 503: {"description": "starting or shutting down"}},
)
