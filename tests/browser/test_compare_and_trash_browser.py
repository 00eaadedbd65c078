"""Compare and trash in a real browser: pick two versions on the history
page and read the word diff (hostile text shown as text, never run), then delete a note and
restore it from the trash, after which search finds it again. Both pages fit a 360 px phone.

`LODE_VERSIONS13_SHOTS=/some/folder` writes full-page screenshots at 1280 and 360 px there,
for a person to look at (off by default).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from notes import services
from notes.models import Document
from tests.factories import assert_no_violations, note, watch

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 360, "height": 740}
HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script>'

FIRST = """# Failover plan

Promote the replica when the primary stops answering. Check the replication lag first; it
must be under one second before the switch.

Point DNS at the new primary and keep the old one fenced.
"""
THIRD = (
    """# Failover plan

Promote the standby when the primary stops answering for two minutes. Check the replication
lag first; it must be under one second before the switch.

Point DNS at the new primary and keep the old one fenced until it is rebuilt.
"""
    + f"\nA pasted snippet: {HOSTILE}\n"
)


def shoot(page, name: str) -> None:
    folder = os.environ.get("LODE_VERSIONS13_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def edit(document: Document, user, body: str) -> None:
    document.refresh_from_db()
    services.note_update(
        document=document,
        user=user,
        base_version_id=document.head_id,
        title=document.title,
        body=body,
    )


def fits(page, width: int) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_compare_two_versions_from_the_history(open_session, alice):
    plan = note(alice, "Failover plan", FIRST)
    edit(plan, alice, FIRST.replace("one second", "two seconds"))
    edit(plan, alice, THIRD)
    session = open_session(alice)
    problems = watch(session)
    page = session.page

    page.goto(reverse("notes:history", args=[plan.pk]))
    page.get_by_label("Compare from version 1").check()
    page.get_by_label("Compare to version 3").check()
    page.get_by_role("button", name="Compare selected versions").click()
    expect(page).to_have_url(re.compile(r"/compare\?"))
    assert parse_qs(urlsplit(page.url).query) == {"a": ["1"], "b": ["3"]}

    expect(page.locator("h1")).to_have_text("Version 1 → version 3")
    diff = page.locator("pre.diff")
    expect(diff.locator("del").first).to_be_visible()
    inserted = diff.locator("ins").all_inner_texts()
    deleted = diff.locator("del").all_inner_texts()
    assert any("standby" in text for text in inserted)
    assert any("replica" in text for text in deleted)
    # The hostile snippet is text inside an <ins>, not an element.
    assert any("<script>alert(2)</script>" in text for text in inserted)
    expect(diff.locator("img, script")).to_have_count(0)
    assert session.dialogs == []
    fits(page, 1280)
    shoot(page, "compare-1280")

    # The pickers on the page switch the pair.
    page.locator("select[name=a]").select_option("2")
    page.get_by_role("button", name="Compare", exact=True).click()
    expect(page.locator("h1")).to_have_text("Version 2 → version 3")

    page.set_viewport_size(PHONE)
    page.goto(reverse("notes:compare", args=[plan.pk]) + "?a=1&b=3")
    fits(page, PHONE["width"])
    shoot(page, "compare-360")
    page.goto(reverse("notes:history", args=[plan.pk]))
    fits(page, PHONE["width"])
    shoot(page, "history-360")

    # The edit-conflict page: the note changes while the form is open.
    page.set_viewport_size({"width": 1280, "height": 860})
    page.goto(reverse("notes:edit", args=[plan.pk]))
    edit(plan, alice, THIRD.replace("two minutes", "five minutes"))
    page.locator("textarea[name=body]").fill(THIRD.replace("standby", "warm standby"))
    page.get_by_role("button", name="Save").click()
    conflict = page.locator("section.conflict")
    expect(conflict).to_contain_text("Not saved")
    expect(conflict.locator("pre.diff").first.locator("ins")).to_have_text(["five"])
    expect(conflict.locator("pre.diff").nth(1).locator("ins")).to_have_text(["warm ", "two"])
    fits(page, 1280)
    shoot(page, "conflict-1280")
    page.set_viewport_size(PHONE)
    fits(page, PHONE["width"])
    shoot(page, "conflict-360")
    assert session.dialogs == []
    assert_no_violations(session, problems)


def test_delete_and_restore_from_the_trash(open_session, alice):
    plan = note(alice, "Failover plan", FIRST)
    edit(plan, alice, THIRD)
    note(alice, "Old scratch", "Nothing to keep here.")
    session = open_session(alice)
    problems = watch(session)
    page = session.page

    page.goto(reverse("notes:delete", args=[plan.pk]))
    page.get_by_role("button", name="Delete").click()
    expect(page.locator(".messages")).to_contain_text("Moved “Failover plan” to the trash")
    page.goto(reverse("retrieval:search") + "?q=standby&mode=lexical")
    expect(page.locator("main")).not_to_contain_text("Failover plan")

    page.goto(reverse("notes:list"))
    page.get_by_role("link", name="Trash").click()
    expect(page.locator("h1")).to_have_text("Trash")
    expect(page.locator("main")).to_contain_text("versions are kept")
    fits(page, 1280)
    shoot(page, "trash-1280")
    page.set_viewport_size(PHONE)
    fits(page, PHONE["width"])
    shoot(page, "trash-360")
    page.set_viewport_size({"width": 1280, "height": 860})

    page.get_by_role("button", name="Restore “Failover plan”").click()
    page.wait_for_url(re.compile(rf"/notes/{plan.pk}$"))
    expect(page.locator(".messages")).to_contain_text(
        "Restored “Failover plan” with its 2 versions"
    )
    plan.refresh_from_db()
    assert not plan.is_deleted and plan.versions.count() == 2

    page.goto(reverse("retrieval:search") + "?q=standby&mode=lexical")
    expect(page.locator("main")).to_contain_text("Failover plan")
    page.goto(reverse("notes:trash"))
    expect(page.locator("main")).to_contain_text("The trash is empty.")
    assert_no_violations(session, problems)
