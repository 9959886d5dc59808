"""/v1/topics: topics and their embedded logs of delivered messages."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from api.docs import responses
from api.params import (
    Cursor,
    GroupFilter,
    OptionalOffset,
    PageLimit,
    TopicOrderParam,
    TopicPath,
    WaitMs,
)
from api.responses import MsgspecJSONResponse
from api.routes.deps import page_limit, settings_of, topics_of
from api.schemas import MessageList, Topic, TopicList, message_from_log
from app.timer_requests import DEFAULT_PAGE_LIMIT
from storage.errors import InvalidInputError

router = APIRouter(prefix="/v1/topics", tags=["topics"])
_TOPIC = "$response.body#/topics/0/topic"
_TOPIC_LINKS = {
    "ReadTopicMessages": {"operationId": "read_messages", "parameters": {"topic": _TOPIC}},
    "ListTopicTimers": {"operationId": "list_timers", "parameters": {"topic": _TOPIC}},
}
_LOG_LINKS = {
    "ReadOn": {
        "operationId": "read_messages",
        "parameters": {"topic": "$request.path.topic", "offset": "$response.body#/next_offset"},
    },
    "GetDeliveredTimer": {
        "operationId": "get_timer",
        "parameters": {"topic": "$request.path.topic", "id": "$response.body#/messages/0/id"},
    },
}


@router.get(
    "",
    summary="Topics with pending counts, log end offsets, routes and consumer-group lag",
    description="A page of topics; follow next_cursor until it is null. A cursor is a "
    "position in the order asked for: pass it with the same order.",
    response_class=MsgspecJSONResponse,
    responses=responses({200: ("topics", "TopicList")}, links=_TOPIC_LINKS),
)
async def list_topics(
    request: Request,
    order: TopicOrderParam = "topic",
    limit: PageLimit = DEFAULT_PAGE_LIMIT,
    cursor: Cursor = None,
) -> Response:
    page = await topics_of(request).topics(order, cursor, page_limit(request, limit))
    topics = [Topic(i.topic, i.pending, i.log_end_offset, i.sink, i.groups) for i in page.rows]
    return MsgspecJSONResponse(TopicList(topics, page.next_cursor, page.total))


@router.get(
    "/{topic}/messages",
    summary="Read delivered messages from the topic log (long-poll with wait_ms)",
    response_class=MsgspecJSONResponse,
    responses=responses({200: ("messages from offset", "MessageList")}, 404, links=_LOG_LINKS),
)
async def read_messages(
    request: Request,
    topic: TopicPath,
    offset: OptionalOffset = None,
    group: GroupFilter = None,
    limit: PageLimit = DEFAULT_PAGE_LIMIT,
    wait_ms: WaitMs = 0,
) -> Response:
    top = settings_of(request).limits.max_wait_ms
    if wait_ms > top:
        raise InvalidInputError(f"wait_ms must be at most {top}", field="wait_ms")
    service, size = topics_of(request), page_limit(request, limit)
    if group is not None and offset is None:
        got = await service.read_group(topic, group, size, wait_ms)
    else:
        got = await service.read_messages(topic, offset or 0, size, wait_ms)
    messages = [message_from_log(m) for m in got.messages]
    return MsgspecJSONResponse(MessageList(messages, got.next_offset))
