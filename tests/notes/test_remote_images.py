"""Images from other origins are not loaded (notes/rendering.py): a note's image from
another site becomes a link to it, saying it was not loaded, unless the operator listed its
host in `LODE_REMOTE_IMAGE_HOSTS`; the Content-Security-Policy's `img-src` says the same.
So no note can put a tracking pixel in front of the people it is shared with."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django.urls import reverse

from lode_site import env
from notes import rendering
from notes.rendering import image_source_allowed, render_markdown, rendered_part
from tests import factories
from tests.factories import make_source, make_source_external

ROOT = Path(__file__).resolve().parents[2]
NOT_LOADED = "<small>(remote image, not loaded)</small>"
REL = "noopener noreferrer nofollow"


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {name: value or "" for name, value in attrs}))


def tags_of(html: str, name: str) -> list[dict[str, str]]:
    """The attributes of each `<name>` element of `html`."""
    parser = _Tags()
    parser.feed(html)
    parser.close()
    return [attrs for tag, attrs in parser.tags if tag == name]


# --- the renderer ---------------------------------------------------------------------------


def test_a_remote_image_becomes_a_link_saying_it_was_not_loaded():
    html = render_markdown('![Team photo](https://tracker.example/p.png?u=1 "Offsite")')
    assert tags_of(html, "img") == []
    assert tags_of(html, "a") == [
        {"href": "https://tracker.example/p.png?u=1", "title": "Offsite", "rel": REL}
    ]
    assert ">Team photo</a> " + NOT_LOADED in html


def test_a_remote_image_without_alt_text_links_by_its_url():
    html = render_markdown("![](http://tracker.example/p.gif)")
    assert tags_of(html, "img") == []
    assert ">http://tracker.example/p.gif</a> " + NOT_LOADED in html


def test_a_remote_image_inside_a_link_becomes_text_of_that_link():
    html = render_markdown("[![Logo](https://cdn.example/logo.png)](https://example.org/home)")
    assert tags_of(html, "img") == []
    assert tags_of(html, "a") == [{"href": "https://example.org/home", "rel": REL}]
    assert f">Logo {NOT_LOADED}</a>" in html


@pytest.mark.parametrize(
    "src",
    ["//tracker.example/p.png", "<///tracker.example/p.png>", "HTTPS://tracker.example/p.png"],
)
def test_urls_a_browser_reads_as_another_site_are_not_loaded(src):
    html = render_markdown(f"![pixel]({src})")
    assert tags_of(html, "img") == [] and NOT_LOADED in html


@pytest.mark.parametrize("src", ["diagram.png", "/static/lode.css", "../notes/1/x.png"])
def test_images_from_lode_itself_are_shown(src):
    html = render_markdown(f"![diagram]({src})")
    assert tags_of(html, "img") == [{"src": src, "alt": "diagram"}]
    assert NOT_LOADED not in html


def test_a_data_image_is_shown_and_data_links_are_not():
    png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    html = render_markdown(f"![dot]({png}) [open]({png})")
    assert tags_of(html, "img") == [{"src": png, "alt": "dot"}]
    assert tags_of(html, "a") == [{"rel": REL}]  # a data: link keeps its text, not the URL
    svg = render_markdown("![x](data:image/svg+xml;base64,PHN2Zz4=)")
    assert tags_of(svg, "img") == []  # not an image markdown-it accepts: it stays text


@override_settings(LODE_REMOTE_IMAGE_HOSTS=["img.example.org"])
def test_an_image_on_a_listed_host_is_shown():
    html = render_markdown("![chart](https://img.example.org/chart.png)")
    assert tags_of(html, "img") == [{"src": "https://img.example.org/chart.png", "alt": "chart"}]


@override_settings(LODE_REMOTE_IMAGE_HOSTS=["img.example.org"])
@pytest.mark.parametrize(
    "src",
    [
        "http://img.example.org/chart.png",  # not https
        "https://img.example.org:8443/chart.png",  # another port
        "https://evil.img.example.org/chart.png",  # a subdomain is another host
        "https://img.example.org.evil.example/chart.png",
        "https://user@img.example.org/chart.png",
    ],
)
def test_only_https_on_the_listed_host_itself_is_shown(src):
    html = render_markdown(f"![chart]({src})")
    assert tags_of(html, "img") == [] and NOT_LOADED in html


def test_the_source_check_refuses_what_a_browser_could_read_as_another_site():
    hosts = frozenset({"img.example.org"})
    assert image_source_allowed("https://img.example.org/a.png", hosts)
    assert image_source_allowed("a.png", hosts) and image_source_allowed("/a.png", hosts)
    for src in (
        "",
        "/\\tracker.example/p.png",
        "\\\\tracker.example/p.png",
        "/\t/tracker.example/p.png",
        " //tracker.example/p.png",
        "https://img.example.org:99999/a.png",  # not a port: urlsplit raises
        "https://[::1/a.png",
        "javascript:alert(1)",
    ):
        assert not image_source_allowed(src, hosts), src


def test_the_sanitiser_drops_a_remote_image_source_whatever_reaches_it():
    cleaned = rendering._cleaner.clean(
        '<img src="https://tracker.example/p.png" alt="p"><img src="/own.png" alt="o">'
        '<a href="data:text/html,hi">x</a>'
    )
    assert tags_of(cleaned, "img") == [{"alt": "p"}, {"src": "/own.png", "alt": "o"}]
    assert "data:" not in cleaned
    for href in (" data:text/html,x", "da&#9;ta:text/html,x", "DATA:text/html,x", "&#1;data:x"):
        assert tags_of(rendering._cleaner.clean(f'<a href="{href}">x</a>'), "a") == [{"rel": REL}]
    titled = rendering._cleaner.clean('<a href="/n" title="data: the numbers">x</a>')
    assert tags_of(titled, "a") == [{"href": "/n", "title": "data: the numbers", "rel": REL}]
    with override_settings(LODE_REMOTE_IMAGE_HOSTS=["tracker.example"]):
        allowed = rendering._cleaner.clean('<img src="https://tracker.example/p.png">')
    assert tags_of(allowed, "img") == [{"src": "https://tracker.example/p.png"}]


def test_a_changed_host_list_renders_the_version_again():
    body = "![chart](https://img.example.org/chart.png)\n"
    digest = hashlib.sha256(body.encode()).hexdigest()
    assert tags_of(rendered_part(sha256=digest, body=body).html, "img") == []
    with override_settings(LODE_REMOTE_IMAGE_HOSTS=["img.example.org"]):
        assert len(tags_of(rendered_part(sha256=digest, body=body).html, "img")) == 1
    assert tags_of(rendered_part(sha256=digest, body=body).html, "img") == []


# --- pages ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_note_page_loads_no_remote_image(alice, alice_client):
    note = factories.note(alice, "Trip", "Look: ![Beach](https://tracker.example/beach.jpg)\n")
    page = alice_client.get(reverse("notes:detail", args=[note.pk])).content.decode()
    assert not [a for a in tags_of(page, "img") if "tracker.example" in a.get("src", "")]
    assert 'href="https://tracker.example/beach.jpg"' in page and NOT_LOADED in page


@pytest.mark.django_db
def test_a_rendered_snapshot_loads_no_remote_image(alice, alice_client):
    external = make_source_external(
        make_source(alice),
        path="page.html",
        bodies=("# Page\n\n![Banner](https://tracker.example/banner.png)\n",),
    )
    url = reverse("externals:external", args=[external.pk])
    page = alice_client.get(url, {"view": "rendered"}).content.decode()
    assert "<h1>Page</h1>" in page
    assert not [a for a in tags_of(page, "img") if "tracker.example" in a.get("src", "")]
    assert NOT_LOADED in page


# --- the Content-Security-Policy and the setting --------------------------------------------


def img_sources(response) -> list[str]:
    for directive in response["Content-Security-Policy"].split(";"):
        name, *values = directive.split()
        if name == "img-src":
            return values
    raise AssertionError("no img-src")


@pytest.mark.django_db
def test_the_policy_allows_images_from_lode_and_data_urls_only(alice_client):
    assert img_sources(alice_client.get("/notes/")) == ["'self'", "data:"]


def settings_with(environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Load lode's settings in a fresh process with `environment` added; print the hosts
    and the policy's img-src as JSON."""
    script = (
        "import json, django; from django.conf import settings; django.setup(); "
        "print(json.dumps([settings.LODE_REMOTE_IMAGE_HOSTS, settings.SECURE_CSP['img-src']]))"
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "lode_site.settings", **environment},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_the_policy_lists_the_hosts_the_operator_allows(tmp_path):
    done = settings_with(
        {
            "LODE_DATA_DIR": str(tmp_path),
            "LODE_REMOTE_IMAGE_HOSTS": " img.example.org , Bücher.Example ",
        }
    )
    assert done.returncode == 0, done.stderr
    hosts, sources = json.loads(done.stdout.strip().splitlines()[-1])
    assert hosts == ["img.example.org", "xn--bcher-kva.example"]
    assert sources == [
        "'self'",
        "data:",
        "https://img.example.org",
        "https://xn--bcher-kva.example",
    ]


def test_an_international_host_matches_the_url_markdown_writes():
    with override_settings(LODE_REMOTE_IMAGE_HOSTS=["xn--bcher-kva.example"]):
        html = render_markdown("![b](https://bücher.example/b.png)")
    assert tags_of(html, "img") == [{"src": "https://xn--bcher-kva.example/b.png", "alt": "b"}]


@pytest.mark.parametrize(
    "raw", ["https://img.example.org", "img.example.org/x", "*.example.org", "img.example.org:8443",
            "a..b", "-a.example"],
)  # fmt: skip
def test_a_host_list_with_anything_but_host_names_is_refused(monkeypatch, raw):
    monkeypatch.setenv("LODE_REMOTE_IMAGE_HOSTS", f"ok.example, {raw}")
    with pytest.raises(ImproperlyConfigured) as info:
        env.env_hosts("LODE_REMOTE_IMAGE_HOSTS")
    assert "LODE_REMOTE_IMAGE_HOSTS" in str(info.value) and repr(raw) in str(info.value)


def test_no_host_list_means_no_hosts(monkeypatch):
    monkeypatch.delenv("LODE_REMOTE_IMAGE_HOSTS", raising=False)
    assert env.env_hosts("LODE_REMOTE_IMAGE_HOSTS") == []
    monkeypatch.setenv("LODE_REMOTE_IMAGE_HOSTS", " , ")
    assert env.env_hosts("LODE_REMOTE_IMAGE_HOSTS") == []
