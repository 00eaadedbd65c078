"""The chain of custody in a real browser: Debian's chromium, headless,
against the live server.

(a) log in → search → the match is inside <mark> → "Open evidence" says verified · current →
    edit the note through its form → the old evidence link says verified · superseded and
    links to the current version;
(b) hostile note text (<script>, </mark>, &lt;b&gt;, an onerror <img>, lode's own private-use
    highlight markers) is displayed literally, as text, on the search and evidence pages:
    no dialog, no injected element, the displayed text equal to the stored passage text;
(c) the copy-link URL opened in a new browser session of the same user shows the same
    results in the same order (and works without JavaScript).

With LODE_SCREENSHOTS=1, (a) writes docs/screenshots/{search,evidence,superseded}.png.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.conf import settings
from playwright.sync_api import expect

from notes import services
from notes.models import Document
from retrieval.index.sync import sync_vectors
from retrieval.models import Passage
from tests.conftest import PASSWORD
from tests.factories import CACHE_NOTES

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CURRENT = re.compile(r"verified\s*·\s*current", re.IGNORECASE)
SUPERSEDED = re.compile(r"verified\s*·\s*superseded", re.IGNORECASE)


def search(page, query: str) -> None:
    """Search from the search page's form (htmx swaps the results and pushes the URL)."""
    if urlsplit(page.url).path != "/search":
        page.goto("/search")
    box = page.locator("form.search input[name=q]")
    box.fill(query)
    box.press("Enter")
    page.wait_for_url(lambda url: parse_qs(urlsplit(url).query).get("q") == [query])
    # The address bar and the copy-link field agree: htmx pushed the shareable URL.
    expect(page.locator("#results [data-share-url]")).to_have_value(page.url)


def hit_keys(page) -> list[str]:
    """Each hit in display order, identified by its links (note version, evidence) and text."""
    return page.locator("li.hit").evaluate_all(
        """items => items.map(li => {
            const links = Array.from(li.querySelectorAll("a[href]"), a => a.getAttribute("href"));
            const text = li.querySelector(".hit-text");
            return links.join(" ") + " | " + (text ? text.innerText : li.innerText);
        })"""
    )


def hit_for(page, title: str):
    return page.locator("li.hit").filter(has=page.locator(".hit-title", has_text=title))


def assert_inert(session) -> None:
    """Nothing from note text ran or became an element: no dialog, no page error, only
    lode's own static scripts, no images, no inline event handlers."""
    page = session.page
    assert session.dialogs == []
    assert session.errors == []
    sources = page.locator("script").evaluate_all("els => els.map(e => e.getAttribute('src'))")
    assert all(src and src.startswith("/static/") for src in sources), sources
    assert page.locator("img, iframe, object, embed, svg").count() == 0
    with_handlers = page.locator("*").evaluate_all(
        "els => els.filter(e => Array.from(e.attributes).some(a => a.name.startsWith('on')))"
        ".map(e => e.outerHTML.slice(0, 80))"
    )
    assert with_handlers == []


# --------------------------------------------------------------------------
# (a) search → highlight → evidence → edit → superseded
# --------------------------------------------------------------------------

RUNBOOK = (
    "# Deploy runbook\n\n"
    "Rotate the staging certs with certbot before Friday, then reload nginx.\n\n"
    "## Redis\n\n"
    "Set maxmemory-policy allkeys-lru on the cache. #ops\n"
)
EDITED_LINE = "Rotate the staging certs with acme.sh before Monday, then reload nginx."


def test_search_highlight_open_evidence_then_superseded(
    open_session, screenshot, alice, private_vectors
):
    note = services.note_create(owner=alice, title="Deploy runbook", body=RUNBOOK, tags="infra")
    services.note_create(
        owner=alice,
        title="Certificate inventory",
        body="Which hosts use certbot: web-1 and web-2 renew weekly; the mail relay renews "
        "by hand.\n\nExpiry alerts go to #ops two weeks ahead.\n",
        tags="infra",
    )
    services.note_create(
        owner=alice,
        title="Reading list",
        body="Finish the chapter on TLS certificates and ACME challenges.\n",
    )
    sync_vectors()  # what the worker does: both legs of hybrid search are live
    session = open_session()  # logs in through the login form, like a person
    page = session.page
    page.goto("/search")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.locator("input[name=username]").fill("alice")
    page.locator("input[name=password]").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/search$"))

    search(page, "certbot")
    expect(page.locator("#results .degraded")).to_have_count(0)
    # The runbook's first passage (the semantic leg may add its Redis section too).
    hit = hit_for(page, "Deploy runbook").filter(has_text="certbot before Friday")
    expect(hit).to_have_count(1)
    expect(hit.locator("mark").first).to_have_text(re.compile(r"^certbot$", re.IGNORECASE))
    screenshot(page, "search")

    hit.get_by_role("link", name="Open evidence").click()
    page.wait_for_url(re.compile(r"/evidence/"))
    evidence_url = page.url
    expect(page.locator("main")).to_contain_text(CURRENT)
    expect(page.locator("main")).to_contain_text("certbot before Friday")
    assert_inert(session)
    screenshot(page, "evidence")

    # Edit the note through its form; the version the link pins is now superseded.
    page.goto(f"/notes/{note.pk}")
    page.get_by_role("link", name="Edit").click()
    body = page.locator("textarea[name=body]")
    body.fill(body.input_value().replace(RUNBOOK.splitlines()[2], EDITED_LINE))
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".messages")).to_contain_text("Note saved.")
    note = Document.objects.get(pk=note.pk)
    old_version = int(urlsplit(evidence_url).path.strip("/").split("/")[2])
    assert note.head_id != old_version

    page.goto(evidence_url)
    main = page.locator("main")
    expect(main).to_contain_text(SUPERSEDED)
    expect(main).not_to_contain_text(CURRENT)
    # The old version's text, exactly as cited — never the new text in its place.
    expect(page.locator(".evidence-passage")).to_contain_text("certbot before Friday")
    current = main.get_by_role("link", name=re.compile(r"current version", re.IGNORECASE))
    expect(current).to_have_count(1)
    assert_inert(session)
    screenshot(page, "superseded")

    current.click()
    expect(page.locator("main")).to_contain_text("acme.sh before Monday")
    expect(page.locator("main")).not_to_contain_text("certbot before Friday")


# --------------------------------------------------------------------------
# (b) hostile note text renders as text
# --------------------------------------------------------------------------

PAYLOADS = [
    "<script>alert(1)</script>",
    "</mark>",
    "&lt;b&gt;",
    "<img src=x onerror=alert(1)>",
    "\ue000LODE-0-START\ue001",
    "\ue000LODE-0-END\ue001",
]

HOSTILE_QUERY = "zebra <img src=x onerror=alert(1)>"
QUERY_WORDS = {"zebra", "img", "src", "x", "onerror", "alert", "1"}


def test_hostile_note_text_is_displayed_literally(open_session, alice):
    notes = {
        f"Payload {i}": services.note_create(
            owner=alice, title=f"Payload {i}", body=f"zebra crossing {payload} zebra crossing"
        )
        for i, payload in enumerate(PAYLOADS)
    }
    notes["All payloads"] = services.note_create(
        owner=alice, title="All payloads", body="zebra " + " zebra ".join(PAYLOADS) + " end"
    )
    passages = {
        title: Passage.objects.get(document=note, is_head=True) for title, note in notes.items()
    }
    session = open_session(alice)
    page = session.page
    # The query itself is hostile too: it is echoed in the field, the title and the link.
    query = HOSTILE_QUERY
    search(page, query)
    expect(page.locator("form.search input[name=q]")).to_have_value(query)
    expect(page.locator("li.hit")).to_have_count(len(notes))

    evidence_urls = {}
    for title, passage in passages.items():
        hit = hit_for(page, title)
        expect(hit).to_have_count(1)
        # What the reader sees is exactly the stored passage text, markers and all.
        assert hit.locator(".hit-text").first.inner_text() == passage.text, title
        # Only query words are marked: a literal </mark> or marker string in the text
        # neither ends a highlight early nor starts one.
        marks = hit.locator(".hit-text").first.locator("mark").all_inner_texts()
        assert "zebra" in [m.lower() for m in marks], (title, marks)
        assert {m.lower() for m in marks} <= QUERY_WORDS, (title, marks)
        evidence_urls[title] = hit.get_by_role("link", name="Open evidence").get_attribute("href")
    assert_inert(session)

    for title, url in evidence_urls.items():
        page.goto(url)
        expect(page.locator("main")).to_contain_text(CURRENT)
        assert page.locator(".evidence-passage").inner_text() == passages[title].text, title
        assert passages[title].text in page.locator("main").inner_text()
        assert_inert(session)


# --------------------------------------------------------------------------
# (c) the copy-link URL reproduces the results in another browser session
# --------------------------------------------------------------------------


def test_copy_link_reproduces_results_in_a_new_session(
    open_session, alice, live_server, private_vectors
):
    for title, body in CACHE_NOTES:
        services.note_create(owner=alice, title=title, body=body, tags="ops")
    sync_vectors()  # hybrid with both legs and the default reranker: the full pipeline
    first = open_session(alice)
    first.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page = first.page
    query = "cache eviction -stampede"
    search(page, query)
    expect(page.locator("#results .degraded")).to_have_count(0)
    hybrid_order = hit_keys(page)
    assert len(hybrid_order) >= 3

    button = page.get_by_role("button", name="Copy link")
    expect(button).to_be_visible()
    button.click()
    expect(page.locator("[data-copy-status]")).to_have_text("Link copied.")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == page.locator("[data-share-url]").input_value() == page.url
    assert parse_qs(urlsplit(copied).query) == {
        "q": [query],
        "mode": ["hybrid"],
        "rerank": [settings.LODE_RERANK],
        "space": ["all"],
    }

    second = open_session(alice)  # a fresh context: another browser session, same user
    second.page.goto(copied)
    expect(second.page.locator("li.hit").first).to_be_visible()
    assert hit_keys(second.page) == hybrid_order
    expect(second.page.locator("form.search input[name=q]")).to_have_value(query)

    # The mode lives under Advanced (the calm view; adv=1 is kept in the link). Changing
    # it re-runs the search (htmx) and reaches the address bar and the link.
    page.locator("a.advanced-toggle").click()
    page.wait_for_url(lambda url: parse_qs(urlsplit(url).query).get("adv") == ["1"])
    page.locator("select[name=mode]").select_option("lexical")
    page.wait_for_url(lambda url: parse_qs(urlsplit(url).query).get("mode") == ["lexical"])
    expect(page.locator("#results [data-share-url]")).to_have_value(page.url)
    expect(page.locator("#results .search-stats")).to_contain_text("lexical search")
    lexical_link = page.url
    lexical_order = hit_keys(page)
    assert lexical_order

    # Without JavaScript the link still reproduces the search, and the read-only field is
    # the control (the copy button stays hidden).
    plain = open_session(alice, java_script_enabled=False)
    plain.page.goto(lexical_link)
    assert hit_keys(plain.page) == lexical_order
    expect(plain.page.locator("select[name=mode]")).to_have_value("lexical")
    expect(plain.page.locator("[data-share-url]")).to_have_value(lexical_link)
    expect(plain.page.get_by_role("button", name="Copy link")).to_be_hidden()
    assert first.dialogs == second.dialogs == [] and first.errors == second.errors == []


def test_copy_link_falls_back_to_selecting_the_field(open_session, alice):
    for title, body in CACHE_NOTES:
        services.note_create(owner=alice, title=title, body=body)
    session = open_session(alice)
    # A browser without the async clipboard API (or an insecure context).
    session.context.add_init_script(
        "Object.defineProperty(navigator, 'clipboard', {value: undefined});"
    )
    page = session.page
    page.goto("/search?q=cache&mode=lexical&rerank=off&space=all")
    page.get_by_role("button", name="Copy link").click()
    expect(page.locator("[data-copy-status]")).to_have_text(
        re.compile(r"^(Link copied\.|Link selected: press Ctrl\+C)")
    )
    field = page.locator("[data-share-url]")
    selected = field.evaluate(
        "f => document.activeElement === f && f.selectionStart === 0"
        " && f.selectionEnd === f.value.length"
    )
    assert selected
    assert field.input_value() == page.url
    assert session.errors == []
