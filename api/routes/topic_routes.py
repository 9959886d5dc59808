"""/v1/topics/{topic}/route: where a topic's due timers go (admin-guarded).

``PUT`` sets the route (log, webhook or redis_stream), ``GET`` shows it, ``DELETE``
returns the topic to the embedded log. A bad route is a 422 naming the field; the
webhook secret is stored for signing and never echoed back (``secret_set`` says one is).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from api.bodies import BodyDecoder, media_kind, read_body
from api.docs import responses
from api.params import TopicPath
from api.responses import MsgspecJSONResponse
from api.routes.deps import settings_of, topics_of
from api.schemas import RouteRequest, route_view
from app.routing import SECRET_MAX_CHARS, STREAM_MAX_CHARS, URL_PATTERNS, SinkSettings

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
_SINKS = SinkSettings()  # the document states the default settings' bounds


def _nullable_int(low: int, high: int, what: str) -> dict[str, Any]:
    return {"type": ["integer", "null"], "minimum": low, "maximum": high, "description": what}


def _route_schema() -> dict[str, Any]:
    """One object per sink (the server's rules exactly: required fields, bounds, URL form)."""
    timeout = _nullable_int(1, _SINKS.max_timeout_ms, "per attempt (null: the default)")
    attempts = _nullable_int(1, _SINKS.max_max_attempts, "then dead-lettered (null: default)")

    def variant(sink: str, required: list[str], **props: Any) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"sink": {"type": "string", "enum": [sink]}, **props},
            "required": ["sink", *required],
            "additionalProperties": False,
        }

    return {
        "oneOf": [
            variant("log", []),
            variant(
                "webhook",
                ["url", "secret"],
                url={"type": "string", "pattern": URL_PATTERNS["webhook"]},
                secret={"type": "string", "minLength": 1, "maxLength": SECRET_MAX_CHARS},
                timeout_ms=timeout,
                max_attempts=attempts,
            ),
            variant(
                "redis_stream",
                ["url", "stream"],
                url={"type": "string", "pattern": URL_PATTERNS["redis_stream"]},
                stream={"type": "string", "minLength": 1, "maxLength": STREAM_MAX_CHARS},
                maxlen=_nullable_int(1, 1 << 40, "approximate stream length (null: default)"),
                timeout_ms=timeout,
                max_attempts=attempts,
            ),
        ],
        "discriminator": {"propertyName": "sink"},
    }


_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": _route_schema(), "examples": EXAMPLES}},
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
async def put_route(request: Request, topic: TopicPath) -> Response:
    body = await read_body(request, settings_of(request).limits.max_body_bytes)
    route = route_decoder.decode(media_kind(request, ["json"]), body)
    stored = await topics_of(request).put_route(topic, route)
    return MsgspecJSONResponse(route_view(topic, stored))


@router.get(
    "/{topic}/route",
    summary="A topic's route (404: none is set, its timers go to the embedded log)",
    response_class=MsgspecJSONResponse,
    responses=responses(_OK, 404),
)
async def get_route(request: Request, topic: TopicPath) -> Response:
    route = await topics_of(request).get_route(topic)
    return MsgspecJSONResponse(route_view(topic, route))


@router.delete(
    "/{topic}/route",
    summary="Return a topic to the embedded log (404: no route was set)",
    response_class=MsgspecJSONResponse,
    responses=responses(_OK, 404),
)
async def delete_route(request: Request, topic: TopicPath) -> Response:
    route = await topics_of(request).delete_route(topic)
    return MsgspecJSONResponse(route_view(topic, route))
