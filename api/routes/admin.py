"""/v1/admin: operator endpoints, behind ``admin_guard`` (admin keys when configured).

Add routes to ``router`` here; ``api.app`` mounts it with the admin guard already in place.

``POST /v1/admin/ingest`` takes a bulk import staged by ``timerstore import --server``
(SST files and a manifest) and links it into the running store
(``RocksTimerStore.ingest_staged``): no write storm, counters and the scan cursor kept
exact. The staged directory must lie under ``<data_dir>/staging`` (a relative path is
taken from there), so an admin key cannot make the server read arbitrary paths: a path
outside it is a 403, a missing directory a 404 (both name ``stage_dir``).
"""

from __future__ import annotations

import os

from fastapi import APIRouter, Request
from starlette.responses import Response

from api.bodies import BodyDecoder, media_kind, read_body
from api.docs import request_body, responses
from api.responses import MsgspecJSONResponse
from api.routes.deps import service_of, settings_of
from api.schemas import IngestRequest
from storage.errors import ForbiddenError, NotFoundError

router = APIRouter(prefix="/v1/admin", tags=["admin"])
ingest_decoder = BodyDecoder(IngestRequest)
_EXAMPLE = {"stage_dir": "import-1700000000000", "replace": False}


def staged_path(staging_dir: str, stage_dir: str) -> str:
    """``stage_dir`` resolved under ``<data_dir>/staging``: 403 outside it, 404 if missing."""
    root = os.path.realpath(staging_dir)
    path = os.path.realpath(os.path.join(root, stage_dir))
    if os.path.commonpath([root, path]) != root or path == root:
        raise ForbiddenError(f"stage_dir must be a directory under {root}", field="stage_dir")
    if not os.path.isdir(path):
        raise NotFoundError(f"stage_dir {path} does not exist", field="stage_dir")
    return path


@router.post(
    "/ingest",
    summary="Ingest a staged bulk import (SST files) into the running store",
    response_class=MsgspecJSONResponse,
    responses=responses(
        {200: ("what was added, replaced and skipped", "IngestReport")}, 403, 404, 409, 413, 415
    ),
    openapi_extra=request_body("IngestRequest", _EXAMPLE),
)
async def ingest(request: Request) -> Response:
    settings = settings_of(request)
    body = await read_body(request, settings.limits.max_body_bytes)
    req = ingest_decoder.decode(media_kind(request, ["json"]), body)
    path = staged_path(settings.staging_dir(), req.stage_dir)
    report = await service_of(request).ingest(path, replace=req.replace)
    return MsgspecJSONResponse(report)
