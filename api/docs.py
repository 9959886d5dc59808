"""The OpenAPI document and the Swagger UI page, both offline.

Schemas come from the msgspec Structs in ``api.schemas`` through
``msgspec.json.schema_components``; routes point at them with ``$ref``s in
``openapi_extra`` (request bodies) and ``responses``. Nothing is written twice.
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
from api.responses import MsgspecJSONResponse
from api.schemas import DOC_TYPES

REF = "#/components/schemas/{name}"
ASSETS = "/docs/assets"
OPENAPI30_URL = "/docs/openapi-3.0.json"


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
    404: "no such timer, topic or dead letter",
    409: "too late for the timer's state (the state is in the body)",
    413: "the request body is too large",
    415: "unsupported Content-Type",
    422: "invalid input: the field and the rule are named",
    503: "shutting down",
}


def responses(ok: dict[int, tuple[str, str | None]], *errors: int) -> dict[int | str, Any]:
    """``responses=`` of a route: success bodies by schema name, then error statuses."""
    out: dict[int | str, Any] = {}
    for status, (description, name) in ok.items():
        body = {"content": {"application/json": {"schema": ref(name)}}} if name else {}
        out[status] = {"description": description, **body}
    for status in (*errors, 401, 422, 503):
        out[status] = {
            "description": ERRORS[status],
            "content": {"application/json": {"schema": ref("ErrorBody")}},
        }
    return out


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
