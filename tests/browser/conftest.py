"""Browser fixtures: Playwright for Python driving Debian's chromium against pytest-django's
`live_server`.

No browser is ever downloaded (`playwright install` is never run): Playwright launches the
binary of Debian's `chromium` package, which `.ci/run` installs with apt. The tests are
skipped, saying why, only when that binary is missing.

Playwright's sync API keeps an asyncio loop running in this thread while it is started, so
Django would refuse ORM calls made by the test itself (SynchronousOnlyOperation). The
`browser` fixture sets DJANGO_ALLOW_ASYNC_UNSAFE only while Playwright runs and restores it
afterwards; no coroutine touches the ORM here, the loop merely exists.

`LODE_SCREENSHOTS=1` makes the tests write full-page screenshots to docs/screenshots/ (off by
default, so test runs never dirty the tree).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

CHROMIUM = Path(os.environ.get("LODE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 860}
TIMEOUT_MS = 30_000  # the first hybrid search in a process loads the embedding model
SCREENSHOT_DIR = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
ASYNC_UNSAFE = "DJANGO_ALLOW_ASYNC_UNSAFE"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless Debian chromium, one per test module."""
    if not CHROMIUM.exists():
        pytest.skip(
            f"Debian's chromium is not installed at {CHROMIUM} (apt-get install -y chromium); "
            "the browser tests drive that binary and never download one"
        )
    from playwright.sync_api import sync_playwright

    previous = os.environ.get(ASYNC_UNSAFE)
    os.environ[ASYNC_UNSAFE] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
            try:
                yield chromium
            finally:
                chromium.close()
    finally:
        if previous is None:
            os.environ.pop(ASYNC_UNSAFE, None)
        else:
            os.environ[ASYNC_UNSAFE] = previous


# The live server shares the test's one SQLite connection (an in-memory database) with every
# request thread. Two requests at once on it can deadlock: a request installing its time
# budget's progress handler (`lode_site/budget.py`) waits for SQLite's connection mutex while
# holding the GIL, and the other thread's running statement needs the GIL to call its own
# handler. A page that posts an ask and is left for the next one made two requests overlap
# and hung the suite. Production threads each have their own connection; here the server
# handles one request at a time (connections are still accepted concurrently).
_ONE_REQUEST = threading.RLock()


@pytest.fixture(scope="session", autouse=True)
def _live_server_serves_one_request_at_a_time() -> Iterator[None]:
    from django.test.testcases import FSFilesHandler

    original = FSFilesHandler.__call__

    def serialised(self, environ, start_response):
        with _ONE_REQUEST:
            return original(self, environ, start_response)

    FSFilesHandler.__call__ = serialised
    try:
        yield
    finally:
        FSFilesHandler.__call__ = original


@dataclass
class BrowserSession:
    """One browser context (a fresh cookie jar: one "browser session" of a user) and its
    page, recording every dialog (alert/confirm/prompt) and uncaught page error."""

    context: object
    page: object
    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@pytest.fixture
def open_session(browser, live_server) -> Iterator[Callable[..., BrowserSession]]:
    """`open_session(user=None, **context_options)` → a new, isolated browser session; with
    `user` it is logged in by the session cookie of `Client.force_login`."""
    opened: list[BrowserSession] = []

    def _open(user: User | None = None, **options) -> BrowserSession:
        context = browser.new_context(base_url=live_server.url, viewport=VIEWPORT, **options)
        context.set_default_timeout(TIMEOUT_MS)
        if user is not None:
            client = Client()
            client.force_login(user)
            context.add_cookies(
                [
                    {
                        "name": settings.SESSION_COOKIE_NAME,
                        "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                        "url": live_server.url,
                        "httpOnly": True,
                        "sameSite": "Lax",
                    }
                ]
            )
        page = context.new_page()
        session = BrowserSession(context=context, page=page)

        def on_dialog(dialog) -> None:
            session.dialogs.append(f"{dialog.type}: {dialog.message}")
            dialog.dismiss()

        page.on("dialog", on_dialog)
        page.on("pageerror", lambda error: session.errors.append(str(error)))
        opened.append(session)
        return session

    yield _open
    for session in opened:
        session.context.close()


@pytest.fixture
def screenshot() -> Callable[[object, str], None]:
    """`screenshot(page, name)`: a full-page PNG to docs/screenshots/<name>.png, written only
    when LODE_SCREENSHOTS=1."""

    def _save(page, name: str) -> None:
        if os.environ.get("LODE_SCREENSHOTS") != "1":
            return
        SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOT_DIR / f"{name}.png"), full_page=True)

    return _save
