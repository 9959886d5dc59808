"""/v1/admin: operator endpoints, behind ``admin_guard`` (admin keys when configured).

Add routes to ``router`` here (for example ``POST /v1/admin/ingest`` from the pipeline);
``api.app`` mounts it with the admin guard already in place.
"""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/v1/admin", tags=["admin"])
