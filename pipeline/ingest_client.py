"""Asking a running server to ingest a staged import (``POST /v1/admin/ingest``)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from storage.errors import InvalidInputError

TIMEOUT_S = 3600.0


def post_ingest(
    server: str, stage_dir: str, *, replace: bool, admin_key: str, timeout_s: float = TIMEOUT_S
) -> dict[str, Any]:
    """The server's ingest report; InvalidInputError (one line for the CLI, naming the
    argument at fault) when the server cannot be reached or refuses. The staged files stay
    in ``stage_dir``, so the ingest can be asked for again."""
    body = json.dumps({"stage_dir": stage_dir, "replace": replace}).encode()
    url = server.rstrip("/") + "/v1/admin/ingest"
    kept = f"the staged import is kept in {stage_dir}"
    try:
        request = urllib.request.Request(
            url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {admin_key}"},
        )
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            answer = response.read()
    except urllib.error.HTTPError as exc:
        detail = " ".join(exc.read().decode("utf-8", "replace").split())
        field = "--admin-key" if exc.code in (401, 403) else "--server"
        raise InvalidInputError(
            f"the server at {server} refused the ingest ({exc.code}): {detail}; {kept}",
            field=field,
        ) from None
    except (OSError, ValueError) as exc:  # URLError, refused, timeout; ValueError: a bad URL
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise InvalidInputError(
            f"cannot reach the server at {server} (--server): {reason}; {kept}", field="--server"
        ) from None
    return dict(json.loads(answer))
