"""Headers every page gets and the HTTPS switch.

* a Content-Security-Policy (Django's ContentSecurityPolicyMiddleware) that allows scripts
  and styles from lode's own origin only — and pages that need nothing more: no inline
  <script>, no on*="" handler, no style="" attribute or <style> element anywhere in lode's
  pages, the admin or the API docs;
* `Permissions-Policy` on every page; `Cache-Control: private, no-store` on every response
  to a signed-in user (session or bearer token), not on static files;
* `LODE_HTTPS=1` turns on secure cookies, HSTS, the SSL redirect and the proxy header, so
  `manage.py check --deploy` is clean (with DEBUG off and a long secret).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.checks import WARNING, run_checks
from django.test import Client, override_settings
from django.urls import reverse

from externals.annotations import annotation_create
from lode_site.models import ApiToken, token_digest
from retrieval.answer.ask import ask
from retrieval.models import AskTrace
from tests import factories
from tests.conftest import PASSWORD
from tests.factories import EXTERNAL_QUOTE, make_external

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
LONG_SECRET = "s" * 10 + "ecret-" + "0123456789abcdefghijklmnopqrstuvwxyz" * 2


# --------------------------------------------------------------------------
# Content-Security-Policy
# --------------------------------------------------------------------------


def csp_directives(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    directives = {}
    for part in header.split(";"):
        name, *values = part.split()
        directives[name] = values
    return directives


def test_csp_header_allows_only_our_own_scripts_and_styles(alice_client):
    response = alice_client.get("/notes/")
    directives = csp_directives(response)
    assert directives["default-src"] == ["'self'"]
    assert directives["script-src"] == ["'self'"]
    assert directives["style-src"] == ["'self'"]
    assert directives["object-src"] == ["'none'"]
    assert directives["base-uri"] == ["'none'"]
    assert directives["frame-ancestors"] == ["'none'"]
    assert directives["form-action"] == ["'self'"]
    header = response["Content-Security-Policy"]
    assert "unsafe-inline" not in header
    assert "unsafe-eval" not in header
    assert "nonce-" not in header


def test_csp_on_login_page_and_api(client, alice):
    assert "script-src 'self'" in client.get("/accounts/login/")["Content-Security-Policy"]
    ApiToken.objects.create(user=alice, name="t", digest=token_digest("tok-csp"))
    api = client.get("/api/notes/", HTTP_AUTHORIZATION="Bearer tok-csp")
    assert api.status_code == 200
    assert "default-src 'self'" in api["Content-Security-Policy"]


class InlineCodeFinder(HTMLParser):
    """Collects everything a CSP without 'unsafe-inline' would block: <script> without src
    (other than JSON data blocks), on*="" handler attributes, style="" attributes, <style>
    elements and javascript: URLs."""

    def __init__(self) -> None:
        super().__init__()
        self.problems: list[str] = []
        self.scripts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "script":
            if attributes.get("src"):
                self.scripts.append(attributes["src"])
            elif attributes.get("type") not in ("application/json", "application/ld+json"):
                self.problems.append(f"inline <script> {attrs}")
        if tag == "style":
            self.problems.append("<style> element")
        for name, value in attrs:
            if name.startswith("on"):
                self.problems.append(f"<{tag} {name}=...> handler")
            if name == "style":
                self.problems.append(f'<{tag} style="{value}">')
            if name in ("href", "src", "action") and (value or "").strip().lower().startswith(
                "javascript:"
            ):
                self.problems.append(f"<{tag} {name}={value!r}>")


def inline_code(html: str) -> tuple[list[str], list[str]]:
    finder = InlineCodeFinder()
    finder.feed(html)
    return finder.problems, finder.scripts


@pytest.fixture
def staff_client(alice) -> Client:
    """Alice as a superuser: the admin pages and her own pages, filled with her data."""
    return factories.staff_client(alice)


def test_no_page_needs_inline_code(staff_client, alice, alice_note):
    """Every kind of page lode serves, filled with data, passes the CSP as it stands."""
    external = make_external(alice)
    start = external.head.body.index(EXTERNAL_QUOTE)
    annotation_create(
        owner=alice,
        document=external,
        version=external.head,
        start=start,
        end=start + len(EXTERNAL_QUOTE),
        quote=EXTERNAL_QUOTE,
        text="why this matters",
    )
    outcome = ask(user=alice, question="When do I rotate the staging certs?", mode="lexical")
    trace = AskTrace.objects.get(pk=outcome.trace_id)
    pages = [
        "/notes/",
        f"/notes/{alice_note.pk}",
        f"/notes/{alice_note.pk}/edit",
        f"/notes/{alice_note.pk}/history",
        f"/notes/{alice_note.pk}/versions/{alice_note.head_id}",
        "/notes/new",
        "/search?q=certbot&mode=lexical",
        "/search/help",
        "/ask",
        f"/ask/{trace.pk}",
        "/sources/",
        f"/externals/{external.pk}/",
        "/api/docs",
        "/admin/",
        "/admin/retrieval/asktrace/",
        f"/admin/retrieval/asktrace/{trace.pk}/change/",
        "/admin/auth/user/",
        f"/admin/auth/user/{alice.pk}/change/",
        reverse("admin:retrieval_index_health"),
    ]
    for path in pages:
        response = staff_client.get(path)
        assert response.status_code == 200, path
        problems, scripts = inline_code(response.content.decode())
        assert problems == [], f"{path}: {problems}"
        # Same origin only (the admin's /admin/jsi18n/ is a view, not a static file).
        assert all(src.startswith("/") and not src.startswith("//") for src in scripts), path
    anonymous = Client().get("/accounts/login/").content.decode()
    assert inline_code(anonymous)[0] == []


def test_htmx_is_configured_for_the_csp(alice_client):
    page = alice_client.get("/notes/").content.decode()
    assert '"includeIndicatorStyles": false' in page  # no injected <style>
    assert '"allowEval": false' in page
    css = (ROOT / "static" / "lode.css").read_text()
    assert ".htmx-request .htmx-indicator" in css  # the rule htmx no longer injects


def test_admin_json_fields_use_a_stylesheet_not_a_style_attribute(staff_client, alice):
    outcome = ask(user=alice, question="When do I rotate the staging certs?", mode="lexical")
    page = staff_client.get(f"/admin/retrieval/asktrace/{outcome.trace_id}/change/")
    html = page.content.decode()
    assert '<pre class="lode-json">' in html
    assert "/static/lode-admin.css" in html
    assert "pre.lode-json" in (ROOT / "static" / "lode-admin.css").read_text()


# --------------------------------------------------------------------------
# Permissions-Policy and Cache-Control
# --------------------------------------------------------------------------


def test_permissions_policy_on_every_page(client, alice_client):
    for response in (client.get("/accounts/login/"), alice_client.get("/notes/")):
        policy = response["Permissions-Policy"]
        for feature in ("camera=()", "microphone=()", "geolocation=()", "payment=()"):
            assert feature in policy


def test_signed_in_pages_are_private_and_not_stored(alice_client, alice_note):
    for path in ("/notes/", f"/notes/{alice_note.pk}", "/search?q=certbot&mode=lexical"):
        cache_control = alice_client.get(path)["Cache-Control"]
        assert "private" in cache_control, path
        assert "no-store" in cache_control, path


def test_api_with_a_bearer_token_is_not_stored(client, alice):
    ApiToken.objects.create(user=alice, name="t", digest=token_digest("tok-cc"))
    response = client.get("/api/notes/", HTTP_AUTHORIZATION="Bearer tok-cc")
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]


def test_static_files_are_left_alone(alice_client):
    response = alice_client.get("/static/lode.css")
    assert "no-store" not in response.get("Cache-Control", "")
    assert "Permissions-Policy" not in response


# --------------------------------------------------------------------------
# LODE_HTTPS
# --------------------------------------------------------------------------

# The settings the deployment checks read.
SECURITY_NAMES = (
    "DEBUG",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "MIDDLEWARE",
    "X_FRAME_OPTIONS",
    "SILENCED_SYSTEM_CHECKS",
)
SECURITY_PREFIXES = ("SECURE_", "SESSION_COOKIE_", "CSRF_COOKIE_")


def settings_from_env(monkeypatch, tmp_path: Path, **environ: str) -> dict[str, Any]:
    """Execute lode_site/settings.py afresh under `environ` and return what it defines."""
    for name in ("LODE_HTTPS", "DEBUG", "SECRET_KEY", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LODE_DATA_DIR", str(tmp_path))
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location(
        "lode_settings_under_test", ROOT / "lode_site" / "settings.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {name: getattr(module, name) for name in dir(module) if name.isupper()}


def deploy_problems(values: dict[str, Any]) -> list[str]:
    """Ids of the warnings and errors `check --deploy` reports under these settings."""
    chosen = {
        name: value
        for name, value in values.items()
        if name in SECURITY_NAMES or name.startswith(SECURITY_PREFIXES)
    }
    with override_settings(**chosen):
        messages = run_checks(include_deployment_checks=True)
        return sorted(m.id for m in messages if m.level >= WARNING and not m.is_silenced())


def test_lode_https_makes_the_deploy_checks_clean(monkeypatch, tmp_path):
    values = settings_from_env(
        monkeypatch, tmp_path, LODE_HTTPS="1", DEBUG="0", SECRET_KEY=LONG_SECRET
    )
    assert values["SESSION_COOKIE_SECURE"] is True
    assert values["CSRF_COOKIE_SECURE"] is True
    assert values["SECURE_SSL_REDIRECT"] is True
    assert values["SECURE_PROXY_SSL_HEADER"] == ("HTTP_X_FORWARDED_PROTO", "https")
    assert values["SECURE_HSTS_SECONDS"] >= 365 * 24 * 3600
    assert values["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is True
    assert deploy_problems(values) == []


def test_without_lode_https_the_deploy_checks_complain(monkeypatch, tmp_path):
    values = settings_from_env(monkeypatch, tmp_path, DEBUG="0", SECRET_KEY=LONG_SECRET)
    assert values["SECURE_PROXY_SSL_HEADER"] is None  # no proxy: the header is not trusted
    problems = deploy_problems(values)
    for check in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert check in problems


def test_lode_https_rejects_a_bad_value(monkeypatch, tmp_path):
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="LODE_HTTPS"):
        settings_from_env(monkeypatch, tmp_path, LODE_HTTPS="sometimes")


@pytest.mark.slow
def test_manage_check_deploy_is_clean_with_lode_https(tmp_path):
    """The operator's own command, in a fresh process with the production settings."""
    child_env = dict(os.environ)
    for name in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL"):
        child_env.pop(name, None)
    child_env.update(LODE_DATA_DIR=str(tmp_path), LODE_HTTPS="1", DEBUG="0", SECRET_KEY=LONG_SECRET)
    result = subprocess.run(
        # The interpreter running pytest, wherever its environment lives.
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


HTTPS_ON = {
    "LODE_HTTPS": True,
    "SESSION_COOKIE_SECURE": True,
    "CSRF_COOKIE_SECURE": True,
    "SECURE_SSL_REDIRECT": True,
    "SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https"),
    "SECURE_HSTS_SECONDS": 365 * 24 * 3600,
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
}


@override_settings(**HTTPS_ON)
def test_behind_the_proxy_plain_http_is_redirected_and_https_gets_hsts(alice):
    client = Client()
    plain = client.get("/accounts/login/")
    assert plain.status_code == 301
    assert plain["Location"] == "https://testserver/accounts/login/"

    secure = Client(HTTP_X_FORWARDED_PROTO="https")
    page = secure.get("/accounts/login/")
    assert page.status_code == 200
    assert page["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
    assert page.cookies["csrftoken"]["secure"]

    login = secure.post("/accounts/login/", {"username": "alice", "password": PASSWORD})
    assert login.status_code == 302
    assert login.cookies["sessionid"]["secure"]


def test_without_lode_https_a_forwarded_proto_is_not_trusted(alice):
    response = Client(HTTP_X_FORWARDED_PROTO="https").get("/accounts/login/")
    assert response.status_code == 200
    assert "Strict-Transport-Security" not in response
    assert not response.cookies["csrftoken"]["secure"]


def test_user_model_is_unchanged():
    assert User.USERNAME_FIELD == "username"
