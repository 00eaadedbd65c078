"""Settings → Access tokens in a real browser: alice follows the header link, creates a
read-only token for one space, sees its secret once, and revokes it; the secret then no
longer opens the MCP server. At 1280 and 360 px wide.

Screenshots go to LODE_SHOTS_DIR (default /tmp/shots/tokens) for a person to look at.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from lode_site.models import ApiToken
from spaces.services import space_create

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 360, "height": 740}
SHOTS = Path(os.environ.get("LODE_SHOTS_DIR", "/tmp/shots/tokens"))


def shoot(page, name: str) -> None:
    try:
        SHOTS.mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


@pytest.mark.parametrize("viewport", [None, PHONE], ids=["desktop", "phone"])
def test_create_see_once_and_revoke_a_token(open_session, live_server, viewport):
    alice = User.objects.create_user("alice", "alice@example.com", "pw")
    space_create(by=alice, name="Team docs")
    session = open_session(alice)
    page = session.page
    if viewport:
        page.set_viewport_size(viewport)
    page.goto("/notes/")
    page.get_by_role("link", name="Access tokens").click()
    expect(page.get_by_role("heading", name="Access tokens", exact=True)).to_be_visible()
    page.get_by_label("Name").fill("Claude Code on my laptop")
    page.get_by_label("It may").select_option("read")
    page.get_by_label("Team docs").check()
    page.get_by_role("button", name="Create token").click()
    secret = page.locator("#new-token").inner_text()
    assert secret.startswith("lode_")
    shoot(page, f"tokens-created-{'phone' if viewport else 'desktop'}")
    token = ApiToken.objects.get(name="Claude Code on my laptop")
    assert token.scope == "read" and [s.name for s in token.spaces.all()] == ["Team docs"]
    page.reload()
    expect(page.locator("#new-token")).to_have_count(0)
    page.get_by_role("button", name="Revoke").click()
    expect(page.get_by_text("stops working at once")).to_be_visible()
    shoot(page, f"tokens-revoked-{'phone' if viewport else 'desktop'}")
    refused = httpx.post(
        live_server.url + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert refused.status_code == 401 and "revoked" in refused.json()["error"]
    assert session.errors == []
