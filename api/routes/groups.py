"""/v1/topics/{topic}/groups: consumer groups with server-side committed offsets.

Read with ``GET /v1/topics/{topic}/messages?group=<name>`` (from the committed offset),
then commit the next offset to read here. A commit never moves back unless ``force`` is
true, and never past the log end (409); ``GET .../groups`` lists offsets and exact lag.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from api.bodies import BodyDecoder, media_kind, read_body
from api.docs import request_body, responses
from api.params import GroupPath, TopicPath
from api.responses import MsgspecJSONResponse
from api.routes.deps import settings_of, topics_of
from api.schemas import GroupCommit, GroupList

router = APIRouter(prefix="/v1/topics", tags=["consumer groups"])
commit_decoder = BodyDecoder(GroupCommit)


@router.post(
    "/{topic}/groups/{group}/commit",
    summary="Commit a consumer group's offset (the next offset it will read)",
    description="Never backwards unless force is true (409); an offset past the log end is "
    "a 409. Durable on return, like every acknowledged write.",
    response_class=MsgspecJSONResponse,
    openapi_extra=request_body("GroupCommit", {"offset": 42}),
    responses=responses({200: ("the committed offset and lag", "GroupOffset")}, 409, 413, 415),
)
async def commit(request: Request, topic: TopicPath, group: GroupPath) -> Response:
    body = await read_body(request, settings_of(request).limits.max_body_bytes)
    req = commit_decoder.decode(media_kind(request, ["json"]), body)
    done = await topics_of(request).commit_group(topic, group, req.offset, req.force)
    return MsgspecJSONResponse(done)


@router.get(
    "/{topic}/groups",
    summary="Consumer groups of a topic with committed offset and lag",
    response_class=MsgspecJSONResponse,
    responses=responses({200: ("groups", "GroupList")}),
)
async def list_groups(request: Request, topic: TopicPath) -> Response:
    log_end, groups = await topics_of(request).list_groups(topic)
    return MsgspecJSONResponse(GroupList(topic, log_end, groups))
