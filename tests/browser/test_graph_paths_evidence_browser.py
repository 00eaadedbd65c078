"""Graph query results, the graph of a search, evidence opened from a search and from an
answer, and a snapshot page with an annotation, in a real browser at 1280 and 360 px.

A path between two documents that only a third one links (each step says which way it
goes), labels that fit beside their circles with the whole title on hover and focus, no
sideways scroll on a phone; evidence marks the quoted words and leads back where the reader
came from; an annotation is listed once on its snapshot page.

Screenshots go to /tmp/shots/graph-paths/ (or LODE_SHOTS_DIR) for a person to look at;
nothing is asserted on them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from externals.annotations import annotation_create
from notes import services
from spaces import services as space_services
from tests.factories import make_source, make_source_external

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 860}
SHOTS = Path(os.environ.get("LODE_SHOTS_DIR", "/tmp/shots/graph-paths"))
PERMALINK = re.compile(r"/ask/(\d+)(\?previous=\d+)?$")


def shoot(page, name: str) -> None:
    try:
        SHOTS.mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def fits(page) -> None:
    overflow = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert overflow[0] <= overflow[1], overflow


def label_boxes_apart(page, selector: str) -> None:
    """No two node labels of the visible picture overlap."""
    boxes = page.locator(f"{selector} .gp-label").evaluate_all(
        "els => els.map(e => { const r = e.getBoundingClientRect();"
        " return [r.left, r.top, r.right, r.bottom, e.textContent]; })"
    )
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            apart = a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
            assert apart, (a, b)


@pytest.fixture
def library(db, settings) -> dict[str, object]:
    # The first lookup loads the embedding model; on a busy machine that alone can take
    # longer than a request's usual budget.
    settings.LODE_REQUEST_BUDGET_SECONDS = 60
    alice = User.objects.create_user("alice", "alice@example.com", "pw")
    ops = space_services.space_create(by=alice, name="Operations")

    def note(title: str, body: str):
        return services.note_create(owner=alice, title=title, body=body, space=ops)

    deploy = note("Deploy runbook", "Roll out with the blue-green switch, then watch errors.")
    incident = note("Incident response", "Page the on-call engineer and open a channel.")
    note(
        "Backup runbook",
        "Before a deploy read [[Deploy runbook]]. When a restore fails, follow "
        "[[Incident response]].\n\nSnapshots are kept for 35 days on the cold tier.",
    )
    for title in (
        "Ops meeting notes for the quarterly planning of the platform team",
        "Database failover drill with the storage and networking teams",
        "Onboarding checklist",
        "Postmortem: the certificate expiry of March",
        "Capacity review",
    ):
        note(title, "We went through the [[Backup runbook]] and the [[Deploy runbook]] again.")
    source = make_source(alice, name="Vendor docs", location="/srv/vendor/documentation")
    external = make_source_external(
        source, path="guides/tape-rotation.md", title="Tape Rotation Guide"
    )
    version = external.head
    quote = version.body[:20]
    annotation_create(
        owner=alice,
        version=version,
        start=0,
        end=len(quote),
        quote=quote,
        text="Check this against the Tape Rotation Guide before Friday.",
    )
    return {"alice": alice, "deploy": deploy, "incident": incident, "external": external}


def test_graph_query_path_both_ways_and_labels(open_session, library) -> None:
    session = open_session(library["alice"])
    page = session.page
    page.goto("/graph/query?lookup=Deploy+runbook&lookup=Incident+response&op=path")
    steps = page.locator("ol.gq-steps li.gq-step")
    expect(steps).to_have_count(2)
    expect(steps.nth(0)).to_contain_text("is linked from")
    expect(steps.nth(0)).to_have_attribute("data-direction", "backward")
    expect(steps.nth(1)).to_have_attribute("data-direction", "forward")
    expect(steps.nth(1)).to_contain_text("links to")
    # Everyday words; details only behind Advanced.
    expect(page.locator("details.gq-advanced")).not_to_have_attribute("open", "")
    expect(page.locator(".gq-result .gq-summary")).not_to_contain_text("generation")
    fits(page)
    shoot(page, "query-path-1280")
    page.set_viewport_size(PHONE)
    page.reload()
    fits(page)
    shoot(page, "query-path-360")

    page.set_viewport_size(DESKTOP)
    page.goto("/graph/query?lookup=Deploy+runbook&op=neighbours&direction=in&kind=links_to")
    expect(page.locator("ol.gq-steps li.gq-step")).to_have_count(6)
    label_boxes_apart(page, ".graph-wide")
    # A label cut to fit: the whole title on hover and keyboard focus.
    node = page.locator(".graph-wide a.gp-node", has_text="Ops meeting").first
    full = node.locator(".gp-full")
    expect(full).to_be_hidden()
    node.focus()
    expect(full).to_be_visible()
    expect(full).to_have_text("Ops meeting notes for the quarterly planning of the platform team")
    fits(page)
    shoot(page, "query-neighbours-1280")
    page.set_viewport_size(PHONE)
    page.reload()
    label_boxes_apart(page, ".graph-narrow")
    fits(page)
    shoot(page, "query-neighbours-360")

    page.set_viewport_size(DESKTOP)
    page.goto("/graph/results?q=runbook&mode=lexical")
    expect(page.locator(".graph-wide svg.graph-picture")).to_be_visible()
    label_boxes_apart(page, ".graph-wide")
    shoot(page, "results-1280")
    page.set_viewport_size(PHONE)
    page.reload()
    label_boxes_apart(page, ".graph-narrow")
    fits(page)
    shoot(page, "results-360")
    assert session.errors == []


def test_evidence_from_search_and_answer_and_snapshot(open_session, library) -> None:
    session = open_session(library["alice"])
    page = session.page
    page.goto("/search?q=blue-green&mode=lexical")
    page.locator("a.evidence-link").first.click()
    back = page.locator("article.evidence > p").first.locator("a")
    expect(back).to_have_text("← back to results")
    fits(page)
    shoot(page, "evidence-search-1280")
    back.click()
    expect(page).to_have_url(re.compile(r"/search\?q=blue-green"))

    page.goto("/ask")
    box = page.locator("form.ask input[name=question]")
    box.fill("How long are snapshots kept on the cold tier?")
    box.press("Enter")
    page.wait_for_url(PERMALINK)
    answer_url = page.url
    claim = page.locator("#answer li.claim").first
    expect(claim.locator("blockquote.support-text mark").first).to_contain_text("35 days")
    claim.locator("a.evidence-link").first.click()
    expect(page.locator("article.evidence > p").first.locator("a")).to_have_text(
        "← back to the answer"
    )
    # The quoted sentence is marked, not the whole passage.
    marked = page.locator("blockquote.evidence-passage mark")
    expect(marked).to_have_count(1)
    expect(marked).to_contain_text("35 days")
    expect(marked).not_to_contain_text("Before a deploy")
    fits(page)
    shoot(page, "evidence-answer-1280")
    page.set_viewport_size(PHONE)
    page.reload()
    fits(page)
    shoot(page, "evidence-answer-360")
    page.locator("article.evidence > p").first.locator("a").click()
    expect(page).to_have_url(answer_url)

    page.set_viewport_size(DESKTOP)
    page.goto(f"/externals/{library['external'].pk}/")
    expect(page.locator("ol.annotation-list li.annotation")).to_have_count(1)
    expect(page.locator("#linked-from")).not_to_contain_text("Annotation on")
    expect(page.locator("#mentions")).not_to_contain_text("Annotation on")
    fits(page)
    shoot(page, "snapshot-1280")
    page.set_viewport_size(PHONE)
    page.reload()
    fits(page)
    shoot(page, "snapshot-360")
    assert session.errors == []
