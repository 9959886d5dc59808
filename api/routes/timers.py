"""/v1/timers: schedule (one or a batch), inspect, cancel, list pending."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from api import bodies
from api.docs import request_body, responses, timer_links
from api.params import Cursor, FromMs, PageLimit, TimerIdPath, ToMs, TopicFilter, TopicPath
from api.responses import MsgspecJSONResponse
from api.routes.deps import page_limit, service_of, settings_of
from api.schemas import (
    BATCH_EXAMPLE,
    CANCEL_BATCH_EXAMPLE,
    TIMER_EXAMPLE,
    BatchScheduled,
    ScheduledTimer,
    TimerList,
    batch_cancelled,
    timer_from_schedule,
    timer_from_view,
)
from app.timer_requests import DEFAULT_PAGE_LIMIT

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
        {201: ("scheduled", "Timer"), 200: ("rescheduled", "Timer")},
        409,
        413,
        415,
        links=timer_links(),
    ),
)
async def schedule_timer(request: Request) -> Response:
    """Documents the operation; ``api.hot_routes`` answers it (``schedule_one``)."""
    return await schedule_one(request)


async def schedule_one(request: Request) -> Response:
    """The answer to one ``POST /v1/timers`` whose guard passed (domain errors raise)."""
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
    "item by index and field; the valid batch is then stored in one atomic write, so a 409 "
    "for one item (in flight or delivered) stores none of them.",
    response_class=MsgspecJSONResponse,
    openapi_extra=request_body("TimerBatchCreate", BATCH_EXAMPLE, msgpack=True),
    responses=responses(
        {200: ("scheduled", "BatchScheduled")}, 409, 413, 415, links=timer_links("/timers/0")
    ),
)
async def schedule_batch(request: Request) -> Response:
    kind = bodies.media_kind(request, ("json", "msgpack"))
    limits = settings_of(request).limits
    body = await bodies.read_body(request, limits.max_body_bytes)
    items, problems = bodies.decode_batch(kind, body, limits)
    results = await service_of(request).schedule_many(items, problems)
    out = [ScheduledTimer(r.topic, r.id, r.deliver_at_ms) for r in results]
    return MsgspecJSONResponse(BatchScheduled(len(out), out))


@router.post(
    "/cancel",
    summary="Cancel a batch of timers (JSON or msgpack)",
    description="Each identity is cancelled on its own, with the answer a DELETE would "
    "give it: cancelled (removed, never delivered; a dead letter of it goes too), unknown, "
    "or too_late with the state (in_flight, delivered). The answers come in the order "
    "given; an identity listed twice is cancelled once and then answered unknown. Bad "
    "items (422, every one listed by index and field) cancel nothing.",
    response_class=MsgspecJSONResponse,
    openapi_extra=request_body("CancelBatch", CANCEL_BATCH_EXAMPLE, msgpack=True),
    responses=responses({200: ("each identity's outcome", "BatchCancelled")}, 413, 415),
)
async def cancel_batch(request: Request) -> Response:
    kind = bodies.media_kind(request, ("json", "msgpack"))
    limits = settings_of(request).limits
    body = await bodies.read_body(request, limits.max_body_bytes)
    refs, problems = bodies.decode_cancel_batch(kind, body, limits)
    idents, results = await service_of(request).cancel_many(refs, problems)
    return MsgspecJSONResponse(batch_cancelled(idents, results))


@router.get(
    "",
    summary="List pending timers in due-time order",
    description="Follow next_cursor until it is null: with a topic filter a page may hold "
    "fewer than limit timers, or none, and still have a next_cursor (a request visits at "
    "most 100 times limit keys, so it never walks an unbounded range).",
    response_class=MsgspecJSONResponse,
    responses=responses(
        {200: ("a page of pending timers", "TimerList")}, links=timer_links("/timers/0")
    ),
)
async def list_timers(
    request: Request,
    topic: TopicFilter = None,
    from_ms: FromMs = 0,
    to_ms: ToMs = None,
    limit: PageLimit = DEFAULT_PAGE_LIMIT,
    cursor: Cursor = None,
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
    "/{topic}/{id}",
    summary="Inspect a timer",
    description="state: pending, in_flight, delivered (with delivered_at_ms and offset, "
    "within the retention window) or dead_lettered.",
    response_class=MsgspecJSONResponse,
    responses=responses({200: ("the timer", "Timer")}, 404, links=timer_links()),
)
async def get_timer(request: Request, topic: TopicPath, timer_id: TimerIdPath) -> Response:
    view = await service_of(request).get(topic, timer_id)
    return MsgspecJSONResponse(timer_from_view(view))


@router.delete(
    "/{topic}/{id}",
    summary="Cancel a timer",
    description="204: removed, it will never be delivered (a dead letter of the same topic "
    "and id goes too). 404: unknown. "
    "409: too late (in flight or delivered), with the state in the body.",
    status_code=204,
    response_class=Response,
    responses=responses({204: ("removed", None)}, 404, 409),
)
async def cancel_timer(request: Request, topic: TopicPath, timer_id: TimerIdPath) -> Response:
    await service_of(request).cancel(topic, timer_id)
    return Response(status_code=204)
