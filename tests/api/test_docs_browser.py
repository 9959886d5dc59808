"""/docs in headless Chromium with no network: the operations and the timer schema render.

Swagger UI's assets come from the swagger_ui_bundle package through our server. The
browser runs with every host name but 127.0.0.1 unresolvable, so any request elsewhere
fails; the test also checks that the page names only same-origin URLs and that every
request the page made (read from Chromium's net log) went to the server itself.
Chromium is Debian's package, installed by ``make test`` before pytest when missing
(``tools/ensure-packages.sh``); with CI set a missing browser fails the test instead of
skipping it. The screenshot in docs/swagger.png comes from
this test (copy it from the path the test prints).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
# for /docs only (the dashboard test shares FLAGS): a name lookup for any host but the
# loopback server fails, so a page that needed the network could not render
OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
OPERATIONS = [
    "/v1/timers",
    "/v1/timers/batch",
    "/v1/timers/{topic}/{id}",
    "/v1/topics",
    "/v1/topics/{topic}/messages",
    "/v1/stats",
    "/v1/deadletters",
    "/v1/deadletters/{topic}/{id}/replay",
    "/healthz",
    "/readyz",
]


def _chromium() -> str:
    """Debian's Chromium, which ``make test`` installs before pytest when missing
    (``tools/ensure-packages.sh``): the tests install nothing themselves."""
    if not os.path.exists(CHROMIUM):
        message = "chromium is missing: `make test` installs it (tools/ensure-packages.sh)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM


def _run(browser: str, profile: Path, *args: str) -> str:
    cmd = [browser, *FLAGS, OFFLINE, f"--user-data-dir={profile}"]
    cmd += ["--virtual-time-budget=15000", *args]
    done = subprocess.run(cmd, capture_output=True, timeout=120, check=False, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _assert_page_names_only_its_own_origin(live: httpx.Client) -> None:
    """Every src/href in the /docs HTML, and the spec URL, is a path on this server that
    answers; the stylesheet pulls in nothing remote (its url()s are data: URIs)."""
    html = live.get("/docs").text
    assets = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert assets, html
    assets += re.findall(r"url: '([^']*)'", html)  # the OpenAPI document Swagger UI loads
    for asset in assets:
        assert asset.startswith("/") and not asset.startswith("//"), f"not same-origin: {asset}"
        reply = live.get(asset)
        assert reply.status_code == 200 and reply.content, asset
        if asset.endswith(".css"):
            remote = re.findall(r"""url\(\s*(?!["']?data:)([^)]*)""", reply.text)
            assert remote == [], f"{asset} loads {remote[:5]}"


def _requests_of_the_page(net_log: Path, origin: str) -> list[str]:
    """The URLs of every request the page started (its initiator is the page's origin),
    from a Chromium net log; the browser's own background requests are left out."""
    log = json.loads(net_log.read_text())
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return [
        event["params"]["url"]
        for event in log["events"]
        if event["type"] == start_job
        and event.get("params", {}).get("initiator") == origin
        and "url" in event["params"]
    ]


@pytest.mark.browser
@pytest.mark.slow
def test_docs_render_offline_in_chromium(live: httpx.Client, tmp_path: Path) -> None:
    browser = _chromium()
    _assert_page_names_only_its_own_origin(live)
    origin = str(live.base_url).rstrip("/")
    page = f"{origin}/docs#/timers/schedule_timer"
    net_log = tmp_path / "net-log.json"
    dom = _run(browser, tmp_path / "profile", f"--log-net-log={net_log}", "--dump-dom", page)
    requested = _requests_of_the_page(net_log, origin)
    assert f"{origin}/docs/assets/swagger-ui-bundle.js" in requested, requested
    assert f"{origin}/docs/openapi-3.0.json" in requested, requested
    elsewhere = [url for url in requested if not url.startswith(origin + "/")]
    assert elsewhere == [], f"/docs requested other origins: {elsewhere}"
    assert "Unable to render" not in dom
    for path in OPERATIONS:
        assert f'data-path="{path}"' in dom, path
    for text in ("TimerCreate", "TimerBatchCreate", "deliver_at_ms", "payload_b64"):
        assert text in dom, text
    assert "order-1234-timeout" in dom  # the expanded operation shows the request example
    schemas = live.get("/openapi.json").json()["components"]["schemas"]
    for name in schemas:  # every schema is listed in the Schemas section
        assert f'id="model-{name}"' in dom, name

    shot = tmp_path / "swagger.png"
    overview = f"{live.base_url}/docs"
    _run(browser, tmp_path / "p2", f"--screenshot={shot}", "--window-size=1280,1500", overview)
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")
    keep = Path(__file__).resolve().parents[2] / "docs" / "swagger.png"
    if not keep.exists() and keep.parent.is_dir():
        shutil.copyfile(shot, keep)
