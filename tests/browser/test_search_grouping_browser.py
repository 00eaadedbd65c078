"""The search page in a real browser, at 1280 and 360 px: a long note is one result whose
other passages open from "N more in this note" (no JavaScript needed: a <details>); a query of
filters alone lists the notes it keeps, newest first; a search that matches nothing is its
message and what to try; the first login lands on the welcome guide; the help's examples are
a team's. Screenshots go to $LODE_SEARCH_SHOTS when it is set."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from notes import services
from notes.models import Version

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

VIEWPORTS = {"1280": {"width": 1280, "height": 860}, "360": {"width": 360, "height": 740}}
RUNBOOK = "\n\n".join(
    f"## Step {n}\n\nCheck the nightly backup of the {place} and write down its size."
    for n, place in enumerate(("database", "wiki", "mail", "chat"), start=1)
)


def shoot(page, name: str) -> None:
    folder = os.environ.get("LODE_SEARCH_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def fits(page, width: int) -> None:
    page.wait_for_load_state("load")
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def team_library(alice: User) -> None:
    services.note_create(owner=alice, title="Backup runbook", body=RUNBOOK, tags="ops")
    rota = services.note_create(
        owner=alice,
        title="On-call rota",
        body="Whoever is on call checks the backup report each Monday.",
        tags="ops",
    )
    Version.objects.filter(pk=rota.head_id).update(created_at=timezone.now() - timedelta(days=3))
    services.note_create(
        owner=alice,
        title="Offsite copies",
        body="The backup tapes go offsite on Fridays; see [[Backup runbook]].",
        tags=["ops", "infra"],
    )


@pytest.mark.parametrize("width", list(VIEWPORTS))
def test_grouped_results_filter_list_and_nothing_matches(open_session, alice, width) -> None:
    team_library(alice)
    session = open_session(alice)
    page = session.page
    page.set_viewport_size(VIEWPORTS[width])

    page.goto("/search?q=backup&mode=lexical&rerank=off")
    hits = page.locator("li.hit")
    expect(hits).to_have_count(3)
    runbook = hits.filter(has=page.locator(".hit-title", has_text="Backup runbook"))
    more = runbook.locator("details.more-in-note")
    expect(more.locator("summary")).to_have_text("3 more in this note")
    expect(more.locator("li.more-hit").first).to_be_hidden()
    more.locator("summary").click()
    expect(more.locator("li.more-hit")).to_have_count(3)
    expect(more.locator("li.more-hit").first).to_be_visible()
    expect(page.locator("#results")).not_to_contain_text("[[")
    fits(page, VIEWPORTS[width]["width"])
    shoot(page, f"grouped-{width}")

    page.goto("/search?q=tag%3Aops")
    expect(page.locator("#results .error")).to_have_count(0)
    expect(page.locator("li.listed .hit-title")).to_have_text(
        ["Offsite copies", "Backup runbook", "On-call rota"]
    )
    fits(page, VIEWPORTS[width]["width"])
    shoot(page, f"filter-list-{width}")

    page.goto("/search?q=kubernetes+autoscaling&mode=lexical")
    results = page.locator("#results")
    expect(results).to_contain_text("Nothing in your notes matches “kubernetes autoscaling”.")
    expect(results).to_contain_text("What to try")
    expect(results.locator("[data-share-url]")).to_have_count(0)
    fits(page, VIEWPORTS[width]["width"])
    shoot(page, f"nothing-matches-{width}")
    assert session.errors == [] and session.dialogs == []


@pytest.mark.parametrize("width", list(VIEWPORTS))
def test_first_login_lands_on_the_welcome_guide_and_help_reads_as_a_team(
    open_session, width
) -> None:
    User.objects.create_user("erin", password="a long pass phrase")
    session = open_session()
    page = session.page
    page.set_viewport_size(VIEWPORTS[width])
    page.goto(reverse("login"))
    page.locator("input[name=username]").fill("erin")
    page.locator("input[name=password]").fill("a long pass phrase")
    page.locator("form button[type=submit], form input[type=submit]").first.click()
    page.wait_for_url(lambda url: url.endswith(reverse("notes:list")))
    guide = page.locator("section.first-screen")
    expect(guide.locator("h2")).to_have_text("Your library is empty")
    expect(guide.locator("a.button")).to_have_count(3)
    fits(page, VIEWPORTS[width]["width"])
    shoot(page, f"first-login-{width}")

    page.goto(reverse("search-help"))
    expect(page.locator("main")).to_contain_text("backup tag:ops")
    expect(page.locator("main")).not_to_contain_text("scifact")
    fits(page, VIEWPORTS[width]["width"])
    shoot(page, f"help-{width}")
    assert session.errors == [] and session.dialogs == []
