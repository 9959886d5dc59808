"""/v1/deadletters: timers that failed max_attempts times; list, replay (one timer or a
topic) and purge."""

from __future__ import annotations

from collections import Counter

from fastapi import APIRouter, Request
from starlette.responses import Response

from api.docs import responses, timer_links
from api.params import Cursor, PageLimit, TimerIdPath, TopicFilter, TopicPath
from api.responses import MsgspecJSONResponse
from api.routes.deps import dead_letters_of, page_limit
from api.schemas import Purged, Replayed, TimerList, timer_from_replay, timer_from_view
from app.timer_requests import DEFAULT_PAGE_LIMIT
from storage.errors import InvalidInputError

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
    limit: PageLimit = DEFAULT_PAGE_LIMIT,
    cursor: Cursor = None,
) -> Response:
    page = await dead_letters_of(request).page(
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
    result, before = await dead_letters_of(request).replay(topic, timer_id)
    return MsgspecJSONResponse(timer_from_replay(result, before))


@router.post(
    "/{topic}/replay",
    summary="Schedule every dead letter of a topic again, due now",
    description="A dead letter whose topic+id was scheduled again since (its replay alone "
    "would be a 409) stays a dead letter, and the others are replayed; replayed counts "
    "the ones replayed. It takes no query parameter (one is a 422 that replays nothing: "
    "replay one timer with POST /v1/deadletters/{topic}/{id}/replay).",
    response_class=MsgspecJSONResponse,
    # no 404/409: a dead letter scheduled again or gone meanwhile is passed over
    responses=responses({200: ("how many were replayed", "Replayed")}),
)
async def replay_topic(request: Request, topic: TopicPath) -> Response:
    _refuse_other_queries(request)
    return MsgspecJSONResponse(Replayed(await dead_letters_of(request).replay_topic(topic)))


@router.delete(
    "",
    summary="Purge dead letters (all, or one topic's)",
    description="Without topic every dead letter is deleted, so any other query parameter "
    "(a misspelt filter) or a second topic is a 422 naming it, and nothing is deleted.",
    response_class=MsgspecJSONResponse,
    responses=responses({200: ("how many were purged", "Purged")}),
)
async def purge(request: Request, topic: TopicFilter = None) -> Response:
    _refuse_other_queries(request, frozenset({"topic"}))
    return MsgspecJSONResponse(Purged(await dead_letters_of(request).purge(topic)))


def _refuse_other_queries(request: Request, allowed: frozenset[str] = frozenset()) -> None:
    """A bulk operation takes no query parameter but those ``allowed``, each at most once.

    Without ``topic`` a purge deletes every dead letter, and a topic replay sends every
    dead letter of the topic again: a misspelt filter (``?Topic=orders``), a second topic,
    or an ``?id=`` meant to pick one timer must be a 422 that changes nothing, not a purge
    of everything (or of only the last topic given) or a replay of the whole topic.
    """
    counts = Counter(name for name, _ in request.query_params.multi_items())
    unknown = sorted(name for name in counts if name not in allowed)
    if unknown:
        takes = f"only {', '.join(sorted(allowed))}" if allowed else "no query parameter"
        raise InvalidInputError(
            f"{unknown[0]}: unknown query parameter; this operation takes {takes}",
            field=unknown[0],
        )
    repeated = sorted(name for name, count in counts.items() if count > 1)
    if repeated:
        raise InvalidInputError(f"{repeated[0]}: give it at most once", field=repeated[0])
