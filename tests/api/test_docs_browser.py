"""/docs in headless Chromium with no network: the operations and the timer schema render.

Swagger UI's assets come from the swagger_ui_bundle package through our server; any
request elsewhere would fail on this machine, so a rendered page proves it is offline.
Chromium is Debian's package: installed here when missing; with CI set a missing browser
fails the test instead of skipping it. The screenshot in docs/swagger.png comes from
this test (copy it from the path the test prints).
"""

from __future__ import annotations

import os
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
    if not os.path.exists(CHROMIUM):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "chromium"]):
            subprocess.run(cmd, env=env, capture_output=True, timeout=900, check=False)
    if not os.path.exists(CHROMIUM):
        message = "chromium is missing and `apt-get install -y chromium` did not install it"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM


def _run(browser: str, profile: Path, *args: str) -> str:
    cmd = [browser, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=15000", *args]
    done = subprocess.run(cmd, capture_output=True, timeout=120, check=False, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.browser
@pytest.mark.slow
def test_docs_render_offline_in_chromium(live: httpx.Client, tmp_path: Path) -> None:
    browser = _chromium()
    page = f"{live.base_url}/docs#/timers/schedule_timer"
    dom = _run(browser, tmp_path / "profile", "--dump-dom", page)
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
