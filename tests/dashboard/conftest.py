"""Fixtures for dashboard tests: a seeded live server and headless Chromium (Playwright)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.dashboard.seed import seed, wait_for_fits
from tests.support.databases import migrated_sqlite
from tests.support.live_server import LiveServer

CHROMIUM = "/usr/bin/chromium"
CHROME_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-quic", "--no-first-run",
]  # fmt: skip
# Screenshots go to docs/ (the README's pictures) only when asked for with
# SCALEWATCH_SCREENSHOTS=docs; otherwise to a scratch folder, so a test run never edits the tree.
DOCS = (
    Path(__file__).resolve().parents[2] / "docs"
    if os.environ.get("SCALEWATCH_SCREENSHOTS") == "docs"
    else Path(tempfile.gettempdir()) / "scalewatch-screenshots"
)
DOCS.mkdir(parents=True, exist_ok=True)


def _require_chromium() -> None:
    if Path(CHROMIUM).exists():
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{CHROMIUM} is missing and CI=true: browser tests must run in CI")
    pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium); browser tests skipped")


@pytest.fixture(scope="session")
def browser() -> Iterator:
    _require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROME_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser) -> Iterator:  # noqa: ANN001
    context = browser.new_context(viewport={"width": 1360, "height": 900}, accept_downloads=True)
    pg = context.new_page()
    # Every wait is on a condition (a selector, a URL, a graph's data); the cap only bounds how
    # long a busy machine (two cores shared with another suite) may take to get there.
    pg.set_default_timeout(90_000)
    pg.set_default_navigation_timeout(90_000)
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    # The dashboard's Content-Security-Policy: what it blocks (an eval, a script or style from
    # elsewhere) is reported on the console, and often does not raise, so count those too.
    pg.on("console", lambda msg: errors.append(msg.text)
          if msg.type == "error" and "Content Security Policy" in msg.text else None)
    pg.js_errors = errors  # type: ignore[attr-defined]
    yield pg
    context.close()


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, dict]]:
    """A real server (uvicorn subprocess, SQLite, auth off) with five runs, fitted."""
    _require_chromium()
    tmp = tmp_path_factory.mktemp("dash")
    server = LiveServer(
        migrated_sqlite(tmp),
        home=tmp / "home",
        extra_env={"SCALEWATCH_WEBHOOK_ALLOW_PRIVATE": "1"},  # the seed's hook is on loopback
    )
    server.start()
    try:
        with server.client() as client:
            ids = seed(client)
            wait_for_fits(client, [i for n, i in ids.items() if n != "just-started"])
        yield server, ids
    finally:
        server.stop()
