"""Small helpers shared by the routers."""

from __future__ import annotations

from fastapi import Request

from app.config import Settings
from app.dead_letter_service import DeadLetterService
from app.service import TimerService
from app.topic_service import TopicService
from storage.errors import InvalidInputError


def service_of(request: Request) -> TimerService:
    service: TimerService = request.app.state.service
    return service


def topics_of(request: Request) -> TopicService:
    """Topic logs, consumer groups and routes (503 while the store is not open)."""
    return service_of(request).topic_service


def dead_letters_of(request: Request) -> DeadLetterService:
    """Dead letters: list, replay, purge (503 while the store is not open)."""
    return service_of(request).dead_letter_service


def settings_of(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def page_limit(request: Request, limit: int) -> int:
    top = settings_of(request).limits.max_page_limit
    if not 1 <= limit <= top:
        raise InvalidInputError(f"limit must be between 1 and {top}", field="limit")
    return limit
