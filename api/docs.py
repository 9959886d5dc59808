"""The OpenAPI document and the Swagger UI page, both offline.

Schemas come from the msgspec Structs in ``api.schemas`` through
``msgspec.json.schema_components`` (every one under ``components/schemas``); routes point
at them with plain ``$ref``s in ``openapi_extra`` (request bodies) and ``responses``, and
carry OpenAPI links so a client (or a stateful tester) can follow a scheduled timer to
its get, cancel, listing, topic log and dead-letter replay. Parameters come with their
rules from ``api.params``. What depends on the settings is filled in here from this
server's settings: the maxima of ``limit``/``wait_ms`` and of bodies, and the bearer
security scheme when API keys are configured. Nothing is written twice.

Swagger UI's assets are served from the ``swagger_ui_bundle`` package, not a CDN; that
Swagger UI (4.15) reads OpenAPI 3.0 only, so ``/docs`` loads a 3.0 rendering of the same
document (``api.openapi30``) while ``/openapi.json`` stays 3.1.
"""

from __future__ import annotations

from typing import Any

import msgspec
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

from api.openapi30 import to_openapi30
from api.params import SETTING_MAXIMA
from api.responses import MsgspecJSONResponse
from api.schemas import DOC_TYPES, TIMER_CREATE_RULES
from app.config import Settings
from app.timer_requests import RequestLimits

REF = "#/components/schemas/{name}"
ASSETS = "/docs/assets"
OPENAPI30_URL = "/docs/openapi-3.0.json"
BEARER = "bearer"
OPEN_PATHS = ("/healthz", "/readyz")  # no API key needed


def ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(name=name)}


def request_body(name: str, example: Any, *, msgpack: bool = False) -> dict[str, Any]:
    """``openapi_extra`` for a route that decodes its own body with msgspec."""
    content: dict[str, Any] = {"application/json": {"schema": ref(name), "example": example}}
    if msgpack:
        content["application/msgpack"] = {"schema": ref(name)}
    return {"requestBody": {"required": True, "content": content}}


ERRORS = {
    401: "a valid API key is required",
    403: "the staged directory lies outside <data_dir>/staging",
    404: "no such timer, topic or dead letter (or no such path)",
    409: "too late for the timer's state (the state is in the body)",
    413: "the request body is too large",
    415: "unsupported Content-Type",
    422: "invalid input: the field and the rule are named",
    503: "shutting down",
}


def _link(operation: str, **parameters: str) -> dict[str, Any]:
    return {"operationId": operation, "parameters": parameters}


def timer_links(pointer: str = "") -> dict[str, Any]:
    """Links from a response holding a timer (at JSON pointer ``pointer``) to its routes."""
    topic, timer_id = f"$response.body#{pointer}/topic", f"$response.body#{pointer}/id"
    return {
        "GetTimer": _link("get_timer", topic=topic, id=timer_id),
        "CancelTimer": _link("cancel_timer", topic=topic, id=timer_id),
        "ListTopicTimers": _link("list_timers", topic=topic),
        "ReadTopicMessages": _link("read_messages", topic=topic),
        "ReplayDeadLetter": _link("replay_dead_letter", topic=topic, id=timer_id),
    }


def responses(
    ok: dict[int, tuple[str, str | None]],
    *errors: int,
    links: dict[str, Any] | None = None,
) -> dict[int | str, Any]:
    """``responses=`` of a route: success bodies by schema name (with ``links``), then
    error statuses, each with the error schema."""
    out: dict[int | str, Any] = {}
    for status, (description, name) in ok.items():
        body = {"content": {"application/json": {"schema": ref(name)}}} if name else {}
        out[status] = {"description": description, **body, **({"links": links} if links else {})}
    for status in (*errors, 401, 422, 503):
        out[status] = {
            "description": ERRORS[status],
            "content": {"application/json": {"schema": ref("ErrorBody")}},
        }
    return out


def _apply_settings(doc: dict[str, Any], settings: Settings) -> None:
    """The limits that are settings, and the API-key security scheme when keys are set."""
    limits = settings.limits
    maxima = {name: getattr(limits, field) for name, field in SETTING_MAXIMA}
    keyed = bool(settings.api_keys or settings.admin_keys)
    open_paths = (*OPEN_PATHS, *(("/metrics",) if settings.metrics_public else ()))
    for path, methods in doc["paths"].items():
        for op in methods.values():
            for param in op.get("parameters", ()):
                _not_null(param)
                if param["name"] in maxima:
                    param["schema"]["maximum"] = maxima[param["name"]]
            if keyed and path not in open_paths:
                op["security"] = [{BEARER: []}]
    components = doc.setdefault("components", {})
    if keyed:
        scheme = {"type": "http", "scheme": "bearer", "description": "an API key"}
        components["securitySchemes"] = {BEARER: scheme}
    schemas = components["schemas"]
    create = schemas["TimerCreate"]
    # under allOf, not beside the properties: the same rules, but generators (such as
    # openapi-python-client) still see one object type instead of a union of fragments
    create["allOf"] = [TIMER_CREATE_RULES]
    _timer_limits(create["properties"], limits)
    for name in ("TimerBatchCreate", "CancelBatch"):
        items = schemas[name]["properties"]["timers"]
        items.update(minItems=1, maxItems=limits.max_batch_timers)


def _timer_limits(props: dict[str, Any], limits: RequestLimits) -> None:
    """The payload and header limits of ``TimerCreate``. The server counts UTF-8 bytes;
    JSON Schema's ``maxLength`` counts characters, so it is only an upper bound (a text of
    multi-byte characters reaches the byte limit sooner) and the descriptions say so, as
    ``maxProperties`` cannot state the headers' total size."""
    payload_bytes = limits.max_payload_bytes
    _max_of(props["payload"], "maxLength", payload_bytes)
    _describe(
        props["payload"],
        f"UTF-8 text of at most {payload_bytes} bytes (the limit counts UTF-8 bytes; maxLength "
        "counts characters, so a text of multi-byte characters reaches the limit sooner)",
    )
    _max_of(props["payload_b64"], "maxLength", 4 * ((payload_bytes + 2) // 3))  # padded base64
    _describe(props["payload_b64"], f"; at most {payload_bytes} bytes once decoded", add=True)
    _max_of(props["headers"], "maxProperties", limits.max_headers)
    _describe(
        props["headers"],
        f"string names to string values: at most {limits.max_headers} entries and at most "
        f"{limits.max_headers_bytes} bytes in all (the UTF-8 bytes of every name and value)",
    )


def _describe(prop: dict[str, Any], text: str, *, add: bool = False) -> None:
    """Set (or with ``add`` extend) the description of an optional property's value."""
    for branch in prop.get("anyOf", [prop]):
        if branch.get("type") != "null":
            branch["description"] = branch.get("description", "") + text if add else text


def _not_null(param: dict[str, Any]) -> None:
    """An optional parameter is left out, never null: drop FastAPI's ``null`` branch."""
    options = param["schema"].get("anyOf")
    if options and {"type": "null"} in options:
        rest = [o for o in options if o != {"type": "null"}]
        if len(rest) == 1:
            del param["schema"]["anyOf"]
            param["schema"].update(rest[0])


def _max_of(prop: dict[str, Any], key: str, value: int) -> None:
    """Set ``key`` on the non-null branch of an optional property."""
    for branch in prop.get("anyOf", [prop]):
        if branch.get("type") != "null":
            branch[key] = value


def build_openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema is not None:
        return app.openapi_schema
    doc = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
    )
    _, components = msgspec.json.schema_components(DOC_TYPES, ref_template=REF)
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(components)
    _apply_settings(doc, app.state.settings)
    app.openapi_schema = doc
    return doc


def install_docs(app: FastAPI) -> None:
    """``/openapi.json`` with the msgspec schemas and ``/docs`` with local assets."""
    app.openapi = lambda: build_openapi(app)  # type: ignore[method-assign]
    app.mount(ASSETS, StaticFiles(directory=str(swagger_ui_path)), name="swagger-assets")

    async def swagger_page() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=OPENAPI30_URL,
            title=f"{app.title} - API docs",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
        )

    async def openapi30() -> MsgspecJSONResponse:
        return MsgspecJSONResponse(to_openapi30(app.openapi()))

    app.add_api_route("/docs", swagger_page, include_in_schema=False, methods=["GET"])
    app.add_api_route(OPENAPI30_URL, openapi30, include_in_schema=False, methods=["GET"])
