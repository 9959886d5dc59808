"""/ui is served by the service itself, offline: every asset from this origin, no key in it."""

from __future__ import annotations

import re

from tests.api.helpers import FakeApi


def test_ui_page_and_assets_are_local_and_need_no_key(fake_api_factory) -> None:
    api: FakeApi = fake_api_factory(api_keys=["k"])
    page = api.client.get("/ui")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert sorted(assets) == ["/ui/assets/charts.js", "/ui/assets/ui.css", "/ui/assets/ui.js"]
    for asset in assets:
        r = api.client.get(asset)
        assert r.status_code == 200 and r.content, asset
        assert "http://" not in r.text and "https://" not in r.text, asset  # nothing remote
    assert api.client.get("/ui/assets/../../app.py").status_code == 404
    assert api.client.get("/metrics").status_code == 401  # the data still needs the key
    assert "/ui" not in api.client.get("/openapi.json").json()["paths"]
