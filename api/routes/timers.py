"""/v1/timers: schedule (one or a batch), inspect, cancel, list pending."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from api import bodies
from api.docs import request_body, responses
from api.responses import MsgspecJSONResponse
from api.routes.deps import page_limit, service_of, settings_of
from api.schemas import (
    BATCH_EXAMPLE,
    TIMER_EXAMPLE,
    BatchScheduled,
    ScheduledTimer,
    TimerList,
    timer_from_schedule,
    timer_from_view,
)

router = APIRouter(prefix="/v1/timers", tags=["timers"])


@router.post(
    "",
    summary="Schedule one timer",
    description="201 for a new timer, 200 when the same topic+id was pending and is "
    "rescheduled (idempotent upsert). 409 when that identity is in flight or delivered.",
    status_code=201,
    response_class=MsgspecJSONResponse,
    openapi_extra=request_body("TimerCreate", TIMER_EXAMPLE, msgpack=True),
    responses=responses(
        {201: ("scheduled", "Timer"), 200: ("rescheduled", "Timer")}, 409, 413, 415
    ),
)
async def schedule_timer(request: Request) -> Response:
    kind = bodies.media_kind(request, ("json", "msgpack"))
    body = await bodies.read_body(request, settings_of(request).limits.max_body_bytes)
    req = bodies.timer_decoder.decode(kind, body)
    result, timer = await service_of(request).schedule_one(req)
    status = 200 if result.replaced else 201
    return MsgspecJSONResponse(timer_from_schedule(result, timer), status_code=status)


@router.post(
    "/batch",
    summary="Schedule a batch of timers (JSON or msgpack)",
    description="All or nothing: every item is validated first and the 422 lists every bad "
    "item by index and field. Batches are written in store calls of a few thousand timers.",
    response_class=MsgspecJSONResponse,
    openapi_extra=request_body("TimerBatchCreate", BATCH_EXAMPLE, msgpack=True),
    responses=responses({200: ("scheduled", "BatchScheduled")}, 409, 413, 415),
)
async def schedule_batch(request: Request) -> Response:
    kind = bodies.media_kind(request, ("json", "msgpack"))
    body = await bodies.read_body(request, settings_of(request).limits.max_body_bytes)
    items, problems = bodies.decode_batch(kind, body)
    results = await service_of(request).schedule_many(items, problems)
    out = [ScheduledTimer(r.topic, r.id, r.deliver_at_ms) for r in results]
    return MsgspecJSONResponse(BatchScheduled(len(out), out))


@router.get(
    "",
    summary="List pending timers in due-time order",
    response_class=MsgspecJSONResponse,
    responses=responses({200: ("a page of pending timers", "TimerList")}),
)
async def list_timers(
    request: Request,
    topic: str | None = Query(None, description="only this topic"),
    from_ms: int = Query(0, ge=0, description="due at or after (epoch ms)"),
    to_ms: int | None = Query(None, ge=0, description="due at or before (epoch ms)"),
    limit: int = Query(100, description="page size (1 to max_page_limit)"),
    cursor: str | None = Query(None, description="next_cursor of the previous page"),
) -> Response:
    page = await service_of(request).list_pending(
        topic=topic,
        from_ms=from_ms,
        to_ms=to_ms,
        limit=page_limit(request, limit),
        cursor=cursor,
    )
    timers = [timer_from_view(v) for v in page.timers]
    return MsgspecJSONResponse(TimerList(timers, page.next_cursor))


@router.get(
    "/{topic}/{timer_id}",
    summary="Inspect a timer",
    description="state: pending, in_flight, delivered (with delivered_at_ms and offset, "
    "within the retention window) or dead_lettered.",
    response_class=MsgspecJSONResponse,
    responses=responses({200: ("the timer", "Timer")}, 404),
)
async def get_timer(request: Request, topic: str, timer_id: str) -> Response:
    view = await service_of(request).get(topic, timer_id)
    return MsgspecJSONResponse(timer_from_view(view))


@router.delete(
    "/{topic}/{timer_id}",
    summary="Cancel a timer",
    description="204: removed, it will never be delivered. 404: unknown. "
    "409: too late (in flight or delivered), with the state in the body.",
    status_code=204,
    response_class=Response,
    responses=responses({204: ("removed", None)}, 404, 409),
)
async def cancel_timer(request: Request, topic: str, timer_id: str) -> Response:
    await service_of(request).cancel(topic, timer_id)
    return Response(status_code=204)
