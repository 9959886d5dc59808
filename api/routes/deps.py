"""Small helpers shared by the routers."""

from __future__ import annotations

from fastapi import Request

from app.config import Settings
from app.service import TimerService
from storage.errors import InvalidInputError


def service_of(request: Request) -> TimerService:
    service: TimerService = request.app.state.service
    return service


def settings_of(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def page_limit(request: Request, limit: int) -> int:
    top = settings_of(request).limits.max_page_limit
    if not 1 <= limit <= top:
        raise InvalidInputError(f"limit must be between 1 and {top}", field="limit")
    return limit
