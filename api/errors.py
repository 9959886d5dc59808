"""The one mapping from errors to HTTP responses, and the error shape.

Every error body is ``{"error": {"code", "message", "field"?}}`` (plus ``state`` for a
409 and ``problems`` when a batch has several bad items). Every error we raise comes from
the one hierarchy in ``storage.errors`` and gets its status from ``DOMAIN_STATUS``, the one
table. Bad input never becomes a 500: msgspec and FastAPI validation errors are 422s.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterator
from typing import Any

import msgspec
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.routing import Match

from api.schemas import NAME_DESCRIPTION, ErrorBody, ErrorDetail, ProblemItem, given
from storage.errors import (
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    StoreClosedError,
    StoreFullError,
    TimerStoreError,
    TooLargeError,
    UnauthorizedError,
    UnsupportedError,
    UnsupportedMediaTypeError,
)
from storage.names import name_problem

log = logging.getLogger(__name__)

DOMAIN_STATUS: tuple[tuple[type[TimerStoreError], int, dict[str, str] | None], ...] = (
    (InvalidInputError, 422, None),
    (UnauthorizedError, 401, {"WWW-Authenticate": "Bearer"}),
    (ForbiddenError, 403, None),
    (NotFoundError, 404, None),
    (ConflictError, 409, None),
    (UnsupportedError, 409, None),
    (TooLargeError, 413, None),
    (UnsupportedMediaTypeError, 415, None),
    (StoreClosedError, 503, {"Retry-After": "1"}),
    (StoreFullError, 507, None),  # 507 Insufficient Storage: the disk under the store
)
_AT_PATH = re.compile(r" - at `\$\.?(.*)`$")
# msgspec's wording for a bad map key (a msgpack header name that is not a string)
_AT_KEY = re.compile(r" - at `key` in `\$\.?(.*)`$")
_UNKNOWN = re.compile(r"Object contains unknown field `(.*)`")
_MISSING = re.compile(r"Object missing required field `(.*)`")
# a \uD800-\uDBFF escape (after an even run of backslashes) not followed by \uDC00-\uDFFF
_LONE_HIGH_SURROGATE = re.compile(
    rb"(?<!\\)(?:\\\\)*(\\u[dD][89abAB][0-9a-fA-F]{2})(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
).search
_PATH_PARAM = re.compile(r"{(\w+)(?::\w+)?}")  # {name} or {name:convertor} in a route's path


def error_response(
    status: int, detail: ErrorDetail, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        msgspec.json.encode(ErrorBody(detail)),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def domain_status(exc: TimerStoreError) -> tuple[int, dict[str, str] | None]:
    """(status, extra headers) of a domain error; a new error class without a row is a 500."""
    for kind, status, headers in DOMAIN_STATUS:
        if isinstance(exc, kind):
            return status, headers
    return 500, None


def domain_response(exc: TimerStoreError) -> Response:
    detail = ErrorDetail(exc.code, exc.message, given(exc.field))
    if isinstance(exc, ConflictError):
        detail.state = exc.state
    if isinstance(exc, InvalidInputError) and exc.problems:
        detail.problems = [ProblemItem(p.field, p.message, given(p.index)) for p in exc.problems]
    status, headers = domain_status(exc)
    if status == 500:
        log.error("no HTTP status for %s: %s", type(exc).__name__, exc.message)
    return error_response(status, detail, headers)


def invalid_from_msgspec(exc: msgspec.ValidationError, prefix: str = "") -> InvalidInputError:
    """A msgspec validation error as InvalidInputError naming the field (``$.a.b`` -> a.b)."""
    text = str(exc)
    key = _AT_KEY.search(text)
    match = key or _AT_PATH.search(text)
    path = match.group(1) if match else ""
    rule = text[: match.start()] if match else text
    if key:  # "... - at `key` in `$.headers`": the field is the map whose key broke the rule
        rule = f"{rule} (a key)"
    unknown = _UNKNOWN.fullmatch(rule) or _MISSING.fullmatch(rule)
    if unknown:  # name the unknown (or missing) field itself, not the object holding it
        path = ".".join(part for part in (path, unknown.group(1)) if part)
    field = ".".join(part for part in (prefix, path) if part) or "body"
    return InvalidInputError(f"{field}: {rule}", field=field)


def malformed(exc: Exception, kind: str, prefix: str = "", body: bytes = b"") -> InvalidInputError:
    """A body (or the batch item ``prefix``) that is not well-formed ``kind``, naming why.

    ``exc`` is what msgspec raised: a DecodeError, or UnicodeDecodeError for invalid UTF-8
    in a string, or RecursionError for nesting deeper than it can follow. msgspec calls a
    lone high surrogate escape (``"\ud800"``) "Input data was truncated", which sends a
    client looking for a cut-off body: ``body`` is searched for one to name it instead.
    """
    if isinstance(exc, UnicodeDecodeError):
        reason = "a string is not valid UTF-8"
    elif isinstance(exc, RecursionError):
        reason = "arrays or objects are nested too deeply"
    elif kind == "json" and (lone := _LONE_HIGH_SURROGATE(body)) is not None:
        escape = lone.group(1).decode()
        reason = (
            f"a string holds the lone surrogate escape {escape} (at byte {lone.start(1)}): "
            "\\ud800-\\udbff must be followed by a low surrogate \\udc00-\\udfff"
        )
    else:
        reason = str(exc)
    what = f"{prefix} is" if prefix else "the body is"
    return InvalidInputError(f"{what} not valid {kind}: {reason}", field=prefix or "body")


async def _domain_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, TimerStoreError)
    return domain_response(exc)


# path and query parameters that are names (topic, id, group): their pattern and length
# errors are worded as the body's (storage.names.name_problem), not as pydantic's
_NAME_PARAMS = frozenset({"topic", "id", "group"})
_NAME_RULE_ERRORS = frozenset({"string_pattern_mismatch", "string_too_short", "string_too_long"})


def _parameter_problem(error: dict[str, Any]) -> tuple[ProblemItem, str]:
    """The problem item (field, rule) and the error's message ("field: rule")."""
    field = ".".join(str(p) for p in error.get("loc", ())[1:]) or "request"
    if field in _NAME_PARAMS and error.get("type") in _NAME_RULE_ERRORS:
        message = name_problem(field, error.get("input"))  # names its field itself
        return ProblemItem(field, message), message
    rule = error.get("msg", "")
    return ProblemItem(field, rule), f"{field}: {rule}"


async def _request_validation_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors: list[dict[str, Any]] = list(exc.errors())
    found = [_parameter_problem(e) for e in errors]
    problems = [problem for problem, _ in found]
    first, message = found[0] if found else (ProblemItem("request", ""), "request: invalid request")
    detail = ErrorDetail("invalid", message, first.field)
    if len(problems) > 1:
        detail.problems = problems
    return error_response(422, detail)


async def _http_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    status, detail = exc.status_code, str(exc.detail)
    if status == 404:
        empty = empty_path_names(request)
        if empty is not None:
            return error_response(422, empty)
        if _empty_name_routes(request):  # a route's path, a method it does not take
            status, detail = 405, "Method Not Allowed"
    code = {404: "not_found", 405: "method_not_allowed"}.get(status, "http_error")
    headers = dict(exc.headers) if exc.headers else None
    if status == 405:
        headers = {**(headers or {}), "Allow": ", ".join(allowed_methods(request))}
    return error_response(status, ErrorDetail(code, detail), headers)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves on this path (Starlette's 405 names only the first
    matching route's, so ``Allow`` would disagree with the document); for a path that
    leaves a name empty, those of the routes it names."""
    methods: set[str] = set()
    for route in _routes(request):
        if route.matches(request.scope)[0] is not Match.NONE:
            methods.update(getattr(route, "methods", None) or ())
    for route, _, _ in _empty_name_routes(request):
        methods.update(route.methods)
    return sorted(methods)


def _routes(request: Request) -> Iterator[Any]:
    """Every route of the app, those of included routers too."""
    routes = list(request.app.router.routes)
    while routes:
        route = routes.pop()
        nested = getattr(route, "effective_candidates", None)  # FastAPI's included routers
        if nested is not None:
            routes.extend(nested())
        else:
            yield route


def empty_path_names(request: Request) -> ErrorDetail | None:
    """The 422 for a path that names a route but leaves a name in it empty, or None.

    A route's parameter never matches an empty segment, so ``GET /v1/timers/orders/`` or
    ``POST /v1/deadletters//x/replay`` found no route and was a bare "Not Found". Matched
    again with empty segments allowed, such a path names the route and what it left out
    (with a method the route does not take it is the 405 the full path gets).
    """
    for route, template, empty in _empty_name_routes(request):
        if request.method not in route.methods:
            continue
        problems = [
            ProblemItem(name, f"{name}: must not be empty in {template} ({NAME_DESCRIPTION})")
            for name in empty
        ]
        detail = ErrorDetail("invalid", problems[0].message, empty[0])
        if len(problems) > 1:
            detail.problems = problems
        return detail
    return None


def _empty_name_routes(request: Request) -> list[tuple[Any, str, list[str]]]:
    """(route, its path template, the names left empty) of each route whose path this
    request's path is, with one or more of its names empty."""
    found = []
    for route in _routes(request):
        template: str | None = getattr(route, "path", None)
        if not template or not getattr(route, "methods", None):
            continue
        match = _empty_segments_regex(template).fullmatch(request.scope["path"])
        empty = [name for name, value in (match.groupdict() if match else {}).items() if not value]
        if empty:
            found.append((route, template, empty))
    return found


@functools.lru_cache(maxsize=256)
def _empty_segments_regex(template: str) -> re.Pattern[str]:
    """``template``'s path with every ``{name}`` matching one segment, empty or not."""
    parts = _PATH_PARAM.split(template)  # literal, name, literal, name, ..., literal
    pattern = "".join(
        re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^/]*)" for i, part in enumerate(parts)
    )
    return re.compile(pattern)


async def _unexpected_handler(request: Request, exc: Exception) -> Response:
    params = request.path_params
    path = request.url.path
    return unexpected_response(request.method, path, params.get("topic"), params.get("timer_id"))


def unexpected_response(
    method: str, path: str, topic: str | None = None, timer_id: str | None = None
) -> Response:
    """The JSON 500 for the exception being handled, which is logged with its trace."""
    log.exception(
        "unexpected error on %s %s",
        method,
        path,
        extra={
            "event": "error",
            "method": method,
            "path": path,
            "topic": topic,
            "timer_id": timer_id,
        },
    )
    return error_response(500, ErrorDetail("internal", "internal error; see the server log"))


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(TimerStoreError, _domain_handler)
    app.add_exception_handler(RequestValidationError, _request_validation_handler)
    app.add_exception_handler(HTTPException, _http_handler)
    app.add_exception_handler(Exception, _unexpected_handler)
