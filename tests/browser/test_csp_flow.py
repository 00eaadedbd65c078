"""The Content-Security-Policy and Permissions-Policy in a real browser:
Debian's chromium, headless, against the live server. Every kind of page is used the way a
person would — htmx searches and asks, the annotation script, the admin's scripts, the
API docs — and the browser must report no CSP violation (`securitypolicyviolation` events
and console errors) and no Permissions-Policy error, while each page still works."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from notes import services
from tests.factories import assert_no_violations, make_external, watch

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_lode_pages_work_under_the_policy(open_session, alice):
    note = services.note_create(
        owner=alice,
        title="Deploy runbook",
        body="# Deploy runbook\n\nRotate the staging certs with certbot before Friday.\n",
        tags="infra",
    )
    external = make_external(alice)
    session = open_session(alice)
    problems = watch(session)
    page = session.page

    response = page.goto(f"/notes/{note.pk}")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert "camera=()" in response.headers["permissions-policy"]
    assert "no-store" in response.headers["cache-control"]
    expect(page.locator("main")).to_contain_text("certbot")

    # htmx search: submit swaps in results, then changing the mode re-searches (the mode is
    # chosen in the Advanced view).
    page.goto("/search?adv=1")
    page.locator("form.search input[name=q]").fill("certbot")
    page.locator("form.search select[name=mode]").select_option("lexical")
    page.wait_for_url(re.compile(r"q=certbot"))
    expect(page.locator("#results")).to_contain_text("certbot")
    # The copy-link control (share.js) is revealed by script.
    expect(page.locator("[data-copy-link]").first).to_be_visible()

    # The ask page: its indicator is hidden by lode.css while idle (htmx's own injected
    # style is off), then an htmx POST answers.
    page.goto("/ask")
    indicator = page.locator("#asking")
    assert indicator.evaluate("el => getComputedStyle(el).visibility") == "hidden"
    box = page.locator("form.ask input[name=question]")
    box.fill("When do I rotate the staging certs?")
    box.press("Enter")
    page.wait_for_url(re.compile(r"/ask/\d+"))
    expect(page.locator("#answer section.answer")).to_have_count(1)

    # The annotation script runs on a snapshot page.
    page.goto(f"/externals/{external.pk}/")
    assert page.evaluate("typeof window.lodeAnnotate") == "object"
    assert_no_violations(session, problems)


def test_admin_and_api_docs_work_under_the_policy(open_session, alice):
    alice.is_staff = True
    alice.is_superuser = True
    alice.save()
    services.note_create(owner=alice, title="Deploy runbook", body="Rotate the certs.\n")
    session = open_session(alice)
    problems = watch(session)
    page = session.page

    page.goto("/admin/")
    expect(page.locator("#content")).to_contain_text("Index health")
    # The changelist's action script: ticking "select all" updates the counter.
    page.goto("/admin/auth/user/")
    page.locator("#action-toggle").check()
    expect(page.locator(".action-counter")).to_contain_text("1 of 1 selected")
    page.goto(f"/admin/auth/user/{alice.pk}/change/")
    expect(page.locator("#id_username")).to_have_value("alice")
    page.goto("/admin/retrieval/asktrace/")

    # Swagger UI (django-ninja's, from lode's own static files) runs and renders.
    page.goto("/api/docs")
    expect(page.locator("#swagger-ui .swagger-ui").first).to_be_visible()
    assert_no_violations(session, problems)


def test_login_page_works_under_the_policy(open_session, alice):
    session = open_session()
    problems = watch(session)
    page = session.page
    page.goto("/accounts/login/")
    page.locator("input[name=username]").fill("alice")
    page.locator("input[name=password]").fill("correct horse battery staple")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/notes/"))
    assert_no_violations(session, problems)
