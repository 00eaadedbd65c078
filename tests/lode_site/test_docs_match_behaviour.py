"""What lode tells people matches what it does: the webhook reply names its source, the
configuration table (docs/operations.md) is one table, `/api/docs` says what the API offers
and links back to the app, and the `#channel-name` rule is the documented one."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse
from markdown_it import MarkdownIt

from externals.models import Source
from externals.webhooks import sign
from notes.services import hashtags

DOCS = Path(__file__).resolve().parents[2] / "docs"
SECRET = "small-fixes-secret-0123456789"


def docs_section(page: str, heading: str) -> str:
    """The text of docs/`page` from the `## heading` line to the next `## ` heading."""
    text = (DOCS / page).read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


# --- the webhook reply -------------------------------------------------------------------------


@pytest.fixture
def source(alice, tmp_path) -> Source:
    return Source.objects.create(
        owner=alice,
        name="Docs",
        kind=Source.Kind.FOLDER,
        location=str(tmp_path),
        webhook_secret=SECRET,
    )


@pytest.fixture
def queued(monkeypatch) -> list[int]:
    """Every refresh the webhook queues (the source's id), instead of queuing a task."""
    from externals import tasks

    calls: list[int] = []
    monkeypatch.setattr(tasks, "enqueue_refresh", lambda source, trigger: calls.append(source.pk))
    return calls


def push(source_id: int, delivery: str = "d-1"):
    body = b'{"ref": "refs/heads/main"}'
    timestamp = int(time.time())
    return Client(enforce_csrf_checks=True).post(
        f"/api/sources/{source_id}/webhook",
        body,
        content_type="application/json",
        headers={
            "X-Lode-Timestamp": str(timestamp),
            "X-Lode-Signature": sign(SECRET, body, timestamp),
            "X-Lode-Delivery": delivery,
        },
    )


@pytest.mark.django_db
def test_the_webhook_reply_names_its_source(source, queued):
    """It said `"source_id": null`; a signed delivery's reply names the source it queued a
    refresh of, as `POST /api/sources/{id}/refresh` does."""
    first = push(source.pk)
    assert (first.status_code, first.json()) == (
        202,
        {"status": "queued", "source_id": source.pk, "delivery": "d-1"},
    )
    again = push(source.pk)  # the same delivery id: nothing more is queued
    assert (again.status_code, again.json()) == (
        200,
        {"status": "duplicate", "source_id": source.pk, "delivery": "d-1"},
    )
    assert queued == [source.pk]


# --- the configuration table (docs/operations.md) ---------------------------------------------


def test_the_configuration_table_is_one_table():
    """A blank line before the `LODE_LLM_*` rows ended the table there: the rows after it
    rendered as a paragraph of pipes. Every `|` line of the section is a row of one table."""
    section = docs_section("operations.md", "Configuration (environment variables)")
    tokens = MarkdownIt("commonmark").enable("table").parse(section)
    tables = [t for t in tokens if t.type == "table_open"]
    rows = [t for t in tokens if t.type == "tr_open"]
    pipe_lines = [line for line in section.splitlines() if line.startswith("|")]
    assert len(tables) == 1
    assert len(rows) == len(pipe_lines) - 1  # all but the delimiter row
    cells = " ".join(t.content for t in tokens if t.type == "inline")
    for name in ("LODE_LLM_BASE_URL", "LODE_ENTAILMENT", "LODE_WEBHOOK_MAX_FAILURES"):
        assert name in cells, name


# --- /api/docs -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_api_docs_describe_the_api_as_it_is_and_link_back(alice_client):
    description = alice_client.get("/api/openapi.json").json()["info"]["description"]
    assert "(later)" not in description
    for offered in ("cited answers", "`/api/ask`", "sources", "evidence", "Bearer"):
        assert offered in description, offered
    # Markdown links, rendered by the docs page (Swagger UI renders the description).
    links = dict(re.findall(r"\[([^\]]+)\]\(([^)]+)\)", description))
    assert links["← Back to lode"] == reverse("home")
    assert links["Search syntax"] == reverse("search-help")
    page = alice_client.get("/api/docs")
    assert page.status_code == 200 and b"openapi.json" in page.content


# --- `#channel-name` ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "tags"),
    [
        ("Post it in #channel-name.", ("channel-name",)),
        ("Ask #ops-alerts, then #on_call.", ("ops-alerts", "on_call")),
        ("Dangling #channel- hyphen", ("channel",)),
        ("Mention `#channel-name` without tagging", ()),
        ("```\nslack #channel-name\n```\n", ()),
        ("Ticket #123, # Heading, word#x, ##x", ()),
        ("See https://example.com/a#channel-name or [this](#channel-name)", ()),
    ],
)
def test_hyphenated_hashtags_follow_the_documented_rule(body, tags):
    """Obsidian's rule, kept: a hyphenated `#channel-name` is a tag; code is how to mention one
    without tagging the note."""
    assert hashtags(body) == tags


def test_the_docs_state_the_hashtag_rule():
    """The rule was not written down, so `#channel-name` became a tag without the user
    being told; docs/features.md states it, and every example it gives holds."""
    notes = docs_section("features.md", "What works now").split("\n- ")[1]
    assert notes.startswith("**Notes**")
    documented = {
        "`#ops` is the tag `ops`": ("#ops", ("ops",)),
        "`#channel-name` the tag `channel-name`": ("#channel-name", ("channel-name",)),
        "a trailing `-` is dropped": ("#channel-", ("channel",)),
        "Not tags: `#123`, `# Heading`, `word#x`, `##x`": ("#123 # Heading word#x ##x", ()),
        "`[a link](#anchor)`": ("[a link](#anchor)", ()),
        "`` `#channel-name` ``": ("`#channel-name`", ()),
    }
    flat = " ".join(notes.split())
    for phrase, (body, tags) in documented.items():
        assert phrase in flat, phrase
        assert hashtags(body) == tags, body
