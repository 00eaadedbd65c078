"""Notes people expect, in a real browser: the edit form's Preview (htmx,
rendered by the server through the one sanitiser), the keyboard shortcuts of static/notes.js
(`/` search, Ctrl/Cmd+Enter submit, Esc leave a field or close a <details>), and dark mode
following the system setting (Playwright's `color_scheme="dark"`), whose colours are checked
for contrast and which must still fit a phone.

`LODE_NOTES13_SHOTS=/some/folder` writes full-page screenshots of the dark pages at 1280 and
360 px there, for a person to look at (off by default).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from notes.models import Document
from tests.factories import assert_no_violations, note, watch

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 860}

RICH_BODY = """# Failover plan

Before the switch, read [[Replica checklist]] and [[Capacity plan|the capacity notes]].

- [x] take a base backup
- [ ] promote the replica[^lag]
- [ ] point DNS at it

| Host | Role | Lag |
| --- | --- | --- |
| db-primary-01 | primary | 0 s |
| db-replica-01 | replica | 0.4 s |

Check the lag with `SELECT now() - pg_last_xact_replay_timestamp();` first:

```sh
psql -h db-replica-01 -c "SELECT pg_is_in_recovery();"
```

> Keep the old primary fenced until the new one answers.

[^lag]: Only when the replication lag is under one second.
"""


def shoot(page, name: str) -> None:
    folder = os.environ.get("LODE_NOTES13_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def test_preview_shows_the_text_as_it_will_render(open_session, alice):
    checklist = note(alice, "Replica checklist", "Lag, slots, fencing.")
    session = open_session(alice)
    problems = watch(session)  # the Preview works under the Content-Security-Policy
    page = session.page
    page.goto(reverse("notes:create"))
    page.locator("input[name=title]").fill("Failover plan")
    page.locator("textarea[name=body]").fill(RICH_BODY)
    preview = page.locator("#note-preview-body")
    expect(preview.locator(".rendered")).to_have_count(0)

    page.get_by_role("button", name="Preview").click()

    rendered = preview.locator(".rendered")
    expect(rendered.locator("h1")).to_have_text("Failover plan")
    boxes = rendered.locator("input[type=checkbox]")
    expect(boxes).to_have_count(3)
    assert [boxes.nth(i).is_checked() for i in range(3)] == [True, False, False]
    assert all(boxes.nth(i).is_disabled() for i in range(3))
    expect(rendered.locator("table td")).to_have_count(6)
    expect(rendered.locator("section.footnotes li")).to_contain_text("under one second")
    resolved = rendered.locator("a.wikilink:not(.unresolved)")
    expect(resolved).to_have_text("Replica checklist")
    assert resolved.get_attribute("href") == reverse("notes:detail", args=[checklist.pk])
    expect(rendered.locator("a.wikilink.unresolved")).to_have_text("the capacity notes")

    # The preview follows the text: edit, preview again.
    page.locator("textarea[name=body]").fill("Only **this** now.")
    page.get_by_role("button", name="Preview").click()
    expect(preview.locator(".rendered strong")).to_have_text("this")
    expect(preview.locator("h1")).to_have_count(0)
    # Previewing saved nothing.
    assert not Document.objects.filter(owner=alice, title="Failover plan").exists()
    assert_no_violations(session, problems)


def test_keyboard_shortcuts(open_session, alice):
    existing = note(alice, "Runbook", "Promote the replica.")
    session = open_session(alice)
    problems = watch(session)  # static/notes.js loads under the Content-Security-Policy
    page = session.page

    # `/` on a page without a search box opens the search page, its box focused.
    page.goto(reverse("notes:list"))
    page.keyboard.press("/")
    page.wait_for_url(re.compile(r"/search"))
    box = page.locator("input[type=search][name=q]")
    expect(box).to_be_focused()
    # `/` typed in a field is a character, not a shortcut.
    box.fill("a")
    page.keyboard.press("/")
    expect(box).to_have_value("a/")
    # Esc leaves the field; `/` then comes back to it.
    page.keyboard.press("Escape")
    expect(box).not_to_be_focused()
    page.keyboard.press("/")
    expect(box).to_be_focused()

    # Ctrl+Enter in the note form saves it (Cmd+Enter on a Mac: Meta).
    page.goto(reverse("notes:edit", args=[existing.pk]))
    body = page.locator("textarea[name=body]")
    body.fill("Promote the replica, then fence the primary.")
    body.press("Control+Enter")
    expect(page.locator(".messages")).to_contain_text("Note saved.")
    existing.refresh_from_db()
    assert existing.head.body == "Promote the replica, then fence the primary."
    assert existing.head.number == 2

    page.goto(reverse("notes:create"))
    page.locator("input[name=title]").fill("Saved with Meta")
    page.locator("input[name=title]").press("Meta+Enter")
    expect(page.locator(".messages")).to_contain_text("Note saved.")
    assert Document.objects.filter(owner=alice, title="Saved with Meta").exists()

    # Ctrl+Enter in the ask form asks.
    page.goto(reverse("ask"))
    question = page.locator("form.ask input[name=question]")
    question.fill("how do I promote the replica")
    with page.expect_request(lambda r: r.method == "POST" and r.url.endswith("/ask")):
        question.press("Control+Enter")

    # Esc closes the open <details> holding the focus, or else the one opened last.
    page.goto(reverse("externals:sources"))
    details = page.locator("details").last
    summary = details.locator("summary")
    if details.get_attribute("open") is not None:
        summary.click()  # start closed
    expect(details).not_to_have_attribute("open", "")
    summary.click()
    expect(details).to_have_attribute("open", "")
    page.keyboard.press("Escape")
    expect(details).not_to_have_attribute("open", "")
    expect(summary).to_be_focused()
    summary.click()
    page.locator("main h1").first.click()  # focus leaves the <details>
    page.keyboard.press("Escape")
    expect(details).not_to_have_attribute("open", "")
    assert_no_violations(session, problems)


# The contrast ratio (WCAG 2) of an element's text colour against the first background
# colour that is not fully transparent on it or its ancestors (or `backgroundSelector`'s).
CONTRAST_JS = """
([selector, backgroundSelector]) => {
  const parse = (c) => {
    const m = c.match(/[\\d.]+/g).map(Number);
    return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1];
  };
  const channel = (v) => {
    v /= 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
  };
  const lum = ([r, g, b]) => 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
  const backgroundOf = (el) => {
    for (; el; el = el.parentElement) {
      const c = parse(getComputedStyle(el).backgroundColor);
      if (c[3] > 0) return c;
    }
    return parse(getComputedStyle(document.body).backgroundColor);
  };
  const el = document.querySelector(selector);
  const fg = parse(getComputedStyle(el).color);
  const bg = backgroundOf(backgroundSelector ? document.querySelector(backgroundSelector) : el);
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}
"""


def test_dark_mode_follows_the_system_setting(open_session, alice, live_server):
    note(alice, "Replica checklist", "Lag, slots, fencing.")
    plan = note(alice, "Failover plan", RICH_BODY)
    session = open_session(alice, color_scheme="dark")
    page = session.page
    detail = reverse("notes:detail", args=[plan.pk])

    for size, label in ((DESKTOP, "1280"), (PHONE, "360")):
        page.set_viewport_size(size)
        page.goto(detail)
        page.wait_for_load_state("load")
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(21, 24, 27)", background  # the dark page, not the light one
        # WCAG AA (4.5:1) for text, muted text, links (resolved and unresolved wiki links),
        # code, table headers, footnotes, the top bar and a button.
        for selector, behind in (
            ("main h1", None),
            (".rendered p", None),
            ("main .meta", None),
            (".rendered a.wikilink:not(.unresolved)", None),
            (".rendered a.wikilink.unresolved", None),
            (".rendered pre code", ".rendered pre"),
            (".rendered p code", None),
            (".rendered blockquote p", None),
            (".rendered th", None),
            (".rendered section.footnotes li", None),
            (".topbar nav a", ".topbar"),
            ("a.button", None),
        ):
            ratio = page.evaluate(CONTRAST_JS, [selector, behind])
            assert ratio >= 4.5, (label, selector, ratio)
        if size is PHONE:
            assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        shoot(page, f"dark-note-{label}")

        page.goto(reverse("notes:edit", args=[plan.pk]))
        page.get_by_role("button", name="Preview").click()
        expect(page.locator("#note-preview-body .rendered h1")).to_have_text("Failover plan")
        for selector, behind in (("textarea", None), ("#note-preview-body .rendered p", None)):
            ratio = page.evaluate(CONTRAST_JS, [selector, behind])
            assert ratio >= 4.5, (label, selector, ratio)
        if size is PHONE:
            assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        shoot(page, f"dark-edit-{label}")

        page.goto(f"{reverse('retrieval:search')}?q=replica+lag&mode=lexical")
        expect(page.locator("li.hit").first).to_be_visible()
        ratio = page.evaluate(CONTRAST_JS, ["li.hit mark", None])
        assert ratio >= 4.5, (label, "mark", ratio)
        shoot(page, f"dark-search-{label}")
    assert session.errors == []
