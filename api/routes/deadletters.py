"""/v1/deadletters: timers that failed max_attempts times; list, replay (one timer or a
topic) and purge."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from api.docs import responses, timer_links
from api.params import Cursor, PageLimit, TimerIdPath, TopicFilter, TopicPath
from api.responses import MsgspecJSONResponse
from api.routes.deps import page_limit, service_of
from api.schemas import Purged, Replayed, TimerList, timer_from_replay, timer_from_view

router = APIRouter(prefix="/v1/deadletters", tags=["deadletters"])


@router.get(
    "",
    summary="List dead letters",
    response_class=MsgspecJSONResponse,
    responses=responses(
        {200: ("a page of dead letters", "TimerList")}, links=timer_links("/timers/0")
    ),
)
async def list_dead_letters(
    request: Request,
    topic: TopicFilter = None,
    limit: PageLimit = 100,
    cursor: Cursor = None,
) -> Response:
    page = await service_of(request).dead_letters(
        topic=topic, limit=page_limit(request, limit), cursor=cursor
    )
    return MsgspecJSONResponse(
        TimerList([timer_from_view(v) for v in page.timers], page.next_cursor)
    )


@router.post(
    "/{topic}/{id}/replay",
    summary="Schedule a dead letter again, due now",
    response_class=MsgspecJSONResponse,
    responses=responses(
        {200: ("the timer, pending again", "Timer")}, 404, 409, links=timer_links()
    ),
)
async def replay_dead_letter(request: Request, topic: TopicPath, timer_id: TimerIdPath) -> Response:
    result, before = await service_of(request).replay(topic, timer_id)
    return MsgspecJSONResponse(timer_from_replay(result, before))


@router.post(
    "/{topic}/replay",
    summary="Schedule every dead letter of a topic again, due now",
    response_class=MsgspecJSONResponse,
    # 409/404 as for one timer: a dead letter whose topic+id is scheduled again meanwhile
    responses=responses({200: ("how many were replayed", "Replayed")}, 404, 409),
)
async def replay_topic(request: Request, topic: TopicPath) -> Response:
    return MsgspecJSONResponse(Replayed(await service_of(request).replay_topic(topic)))


@router.delete(
    "",
    summary="Purge dead letters (all, or one topic's)",
    response_class=MsgspecJSONResponse,
    responses=responses({200: ("how many were purged", "Purged")}),
)
async def purge(request: Request, topic: TopicFilter = None) -> Response:
    return MsgspecJSONResponse(Purged(await service_of(request).purge_dead_letters(topic)))
