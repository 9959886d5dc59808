"""Asking a running server to ingest a staged import (``POST /v1/admin/ingest``)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

TIMEOUT_S = 3600.0


class IngestFailed(RuntimeError):
    pass


def post_ingest(
    server: str, stage_dir: str, *, replace: bool, admin_key: str, timeout_s: float = TIMEOUT_S
) -> dict[str, Any]:
    body = json.dumps({"stage_dir": stage_dir, "replace": replace}).encode()
    request = urllib.request.Request(
        server.rstrip("/") + "/v1/admin/ingest",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {admin_key}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return dict(json.loads(response.read()))
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")
        raise IngestFailed(f"the server refused the ingest ({exc.code}): {detail}") from None
