"""A huge note in a real browser: Debian's chromium, headless. The page
shows the first part of the note with a "Show more" control; clicking it swaps the next
part in place (htmx), and without JavaScript the same control is a link to the next part's
page. At desktop and phone widths, with no script error or policy violation."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from notes import services
from notes.rendering import split_parts

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def huge_body() -> str:
    rows = ["| name | link | notes |", "|---|---|---|"]
    rows += [f"| row {i} | https://example.com/{i} | some *text* |" for i in range(12_000)]
    return "# Inventory\n\nEvery host we own.\n\n" + "\n".join(rows) + "\n\n" + "|x" * 300_000


@pytest.mark.parametrize("width", [1280, 360])
def test_huge_note_shows_parts_on_request(open_session, alice, screenshot, width):
    body = huge_body()
    note = services.note_create(owner=alice, title="Inventory", body=body, tags="")
    count = len(split_parts(body))
    session = open_session(alice)
    page = session.page
    page.set_viewport_size({"width": width, "height": 800})

    page.goto(f"/notes/{note.pk}")
    expect(page.locator("main h1").first).to_have_text("Inventory")
    expect(page.locator(".rendered table").first).to_be_visible()
    more = page.locator(".more-parts a")
    expect(more).to_have_text("Show more")
    expect(page.locator(".more-parts")).to_contain_text(f"Part 1 of {count}")

    more.click()
    expect(page.locator(".rendered")).to_have_count(2)
    expect(page.locator(".more-parts")).to_contain_text(f"Part 2 of {count}")
    # The continuation is still a table with its header, not rows spilled as text.
    expect(page.locator(".rendered").nth(1).locator("thead th").first).to_have_text("name")
    assert page.url.endswith(f"/notes/{note.pk}")  # swapped in place, no navigation
    page.locator(".rendered").nth(1).scroll_into_view_if_needed()
    screenshot(page, f"note-parts-{width}")
    assert_fits(page, width)

    # A part of the 600,000-character "word" wraps inside the note instead of widening it.
    page.goto(f"/notes/{note.pk}?part={count - 1}")
    expect(page.locator(".rendered")).to_contain_text("x|x|x")
    assert_fits(page, width)
    assert session.errors == [] and session.dialogs == []


def assert_fits(page, width: int) -> None:
    """Every rendered part lies within the viewport and does not scroll sideways itself
    (a wide table scrolls inside its own box)."""
    for box in page.locator(".rendered").all():
        right, scroll, client = box.evaluate(
            "el => [el.getBoundingClientRect().right, el.scrollWidth, el.clientWidth]"
        )
        assert right <= width and scroll <= client, (right, scroll, client)


def test_show_more_works_without_javascript(open_session, alice):
    body = huge_body()
    note = services.note_create(owner=alice, title="Inventory", body=body, tags="")
    session = open_session(alice, java_script_enabled=False)
    page = session.page
    page.goto(f"/notes/{note.pk}")
    page.locator(".more-parts a").click()
    page.wait_for_url(f"**/notes/{note.pk}?part=2")
    expect(page.locator(".part-position")).to_contain_text("Part 2 of")
    expect(page.locator(".rendered")).to_have_count(1)
    expect(page.locator(".rendered thead th").first).to_have_text("name")
    page.locator(".part-position a", has_text="Start from the beginning").click()
    expect(page.locator(".rendered h1")).to_have_text("Inventory")


@pytest.mark.parametrize("width", [1280, 360])
def test_search_hits_from_a_table_line_wrap_inside_the_page(open_session, alice, width):
    """A passage that is one run without spaces (a 2,000-character cut of a table line) wraps
    in the results instead of widening the page, and the capped marks are said."""
    services.note_create(owner=alice, title="Wide", body="|x" * 50_000, tags="")
    page = open_session(alice).page
    page.set_viewport_size({"width": width, "height": 800})
    page.goto("/search?q=x&mode=lexical")
    expect(page.locator(".hit").first).to_be_visible()
    expect(page.locator(".marks-capped").first).to_be_visible()
    for text in page.locator(".hit-text").all()[:3]:
        right, scroll, client = text.evaluate(
            "el => [el.getBoundingClientRect().right, el.scrollWidth, el.clientWidth]"
        )
        assert right <= width and scroll <= client, (right, scroll, client)


def test_code_reads_exactly_as_written(open_session, alice):
    """Quotes, ampersands and angle brackets in code are shown as written, never escaped
    twice (`&quot;` on screen, as a linkify pass would): the browser shows the source text."""
    command = 'psql -c "SELECT 1 & 2 < 3" > out.txt'
    note = services.note_create(
        owner=alice,
        title="Runbook",
        body=f"Run `{command}` first.\n\n```sh\n{command}\n```\n",
        tags="",
    )
    page = open_session(alice).page
    page.goto(f"/notes/{note.pk}")
    expect(page.locator(".rendered p code")).to_have_text(command)
    expect(page.locator(".rendered pre code")).to_have_text(command + "\n")
