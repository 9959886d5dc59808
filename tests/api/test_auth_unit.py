"""The key check itself, and the admin guard a future /v1/admin route gets."""

from __future__ import annotations

from types import SimpleNamespace

from fastapi import APIRouter, Depends, FastAPI
from fastapi.testclient import TestClient

from api.auth import admin_guard, key_matches
from api.errors import install_error_handlers
from tests.api.helpers import make_settings


def test_key_matches() -> None:
    assert key_matches(b"a", ("x", "a"))
    assert not key_matches(b"ab", ("a", "b"))
    assert not key_matches(None, ("a",))
    assert not key_matches(b"", ("a",))


def _admin_app(tmp_path, **overrides) -> TestClient:
    app = FastAPI()
    app.state.settings = make_settings(tmp_path, **overrides)
    app.state.service = SimpleNamespace(accepting=True)
    install_error_handlers(app)
    router = APIRouter(prefix="/v1/admin")

    @router.post("/ping")
    async def ping() -> dict[str, str]:
        return {"ok": "yes"}

    app.include_router(router, dependencies=[Depends(admin_guard)])
    return TestClient(app)


def test_admin_guard_wants_an_admin_key(tmp_path) -> None:
    client = _admin_app(tmp_path, api_keys=["user"], admin_keys=["root"])
    assert client.post("/v1/admin/ping").status_code == 401
    assert (
        client.post("/v1/admin/ping", headers={"Authorization": "Bearer user"}).status_code == 401
    )
    assert (
        client.post("/v1/admin/ping", headers={"Authorization": "Bearer root"}).status_code == 200
    )


def test_admin_guard_falls_back_to_api_keys(tmp_path) -> None:
    client = _admin_app(tmp_path, api_keys=["user"])
    assert client.post("/v1/admin/ping").status_code == 401
    assert (
        client.post("/v1/admin/ping", headers={"Authorization": "Bearer user"}).status_code == 200
    )
