"""The operator dashboard at ``/ui``: static files shipped in the package, offline.

The page and its scripts are served without a key (they hold no data); every number on
the page comes from ``/metrics``, ``/v1/topics`` and ``/v1/deadletters`` with the key the
operator types into its login field. The Content-Security-Policy keeps every load and
request on this origin.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.staticfiles import StaticFiles

UI_DIR = Path(__file__).resolve().parent / "static" / "ui"
CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'"


def install_ui(app: FastAPI) -> None:
    app.mount("/ui/assets", StaticFiles(directory=UI_DIR), name="ui-assets")

    @app.get("/ui", include_in_schema=False)
    async def dashboard() -> Response:
        return FileResponse(
            UI_DIR / "index.html",
            headers={"Content-Security-Policy": CSP, "Cache-Control": "no-cache"},
        )

    @app.get("/ui/", include_in_schema=False)
    async def dashboard_slash() -> Response:
        return RedirectResponse("/ui")
