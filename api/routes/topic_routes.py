"""/v1/topics/{topic}/route: where a topic's due timers go (admin-guarded).

``PUT`` sets the route (log, webhook or redis_stream), ``GET`` shows it, ``DELETE``
returns the topic to the embedded log. A bad route is a 422 naming the field; the
webhook secret is stored for signing and never echoed back (``secret_set`` says one is).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from api.bodies import BodyDecoder, media_kind, read_body
from api.docs import responses
from api.responses import MsgspecJSONResponse
from api.routes.deps import service_of, settings_of
from api.schemas import RouteRequest, route_view

router = APIRouter(prefix="/v1/topics", tags=["routes"])
route_decoder = BodyDecoder(RouteRequest)

EXAMPLES = {
    "log": {"summary": "the embedded topic log (default)", "value": {"sink": "log"}},
    "webhook": {
        "summary": "a signed HTTP POST per timer",
        "value": {
            "sink": "webhook",
            "url": "https://orders.example.com/timeouts",
            "secret": "s3cr3t",
            "timeout_ms": 5000,
            "max_attempts": 5,
        },
    },
    "redis_stream": {
        "summary": "XADD into a Redis stream",
        "value": {
            "sink": "redis_stream",
            "url": "redis://127.0.0.1:6379/0",
            "stream": "orders-due",
            "maxlen": 1000000,
            "max_attempts": 5,
        },
    },
}
_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {"$ref": "#/components/schemas/Route"},
                "examples": EXAMPLES,
            }
        },
    }
}
_OK: dict[int, tuple[str, str | None]] = {
    200: ("the topic's route (the secret is never echoed)", "RouteView")
}


@router.put(
    "/{topic}/route",
    summary="Route a topic's due timers to the log, a webhook or a Redis stream",
    description="Applies to timers that fall due after the change; nothing pending is lost "
    "or duplicated. 422 names the field of a bad route.",
    response_class=MsgspecJSONResponse,
    openapi_extra=_BODY,
    responses=responses(_OK, 413, 415),
)
async def put_route(request: Request, topic: str) -> Response:
    body = await read_body(request, settings_of(request).limits.max_body_bytes)
    route = route_decoder.decode(media_kind(request, ["json"]), body)
    stored = await service_of(request).put_route(topic, route)
    return MsgspecJSONResponse(route_view(topic, stored))


@router.get(
    "/{topic}/route",
    summary="A topic's route",
    response_class=MsgspecJSONResponse,
    responses=responses(_OK),
)
async def get_route(request: Request, topic: str) -> Response:
    route = await service_of(request).get_route(topic)
    return MsgspecJSONResponse(route_view(topic, route))


@router.delete(
    "/{topic}/route",
    summary="Return a topic to the embedded log",
    response_class=MsgspecJSONResponse,
    responses=responses(_OK),
)
async def delete_route(request: Request, topic: str) -> Response:
    route = await service_of(request).delete_route(topic)
    return MsgspecJSONResponse(route_view(topic, route))
