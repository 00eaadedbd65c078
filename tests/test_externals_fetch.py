"""URL fetching (issue 6, item 1): bounded, content-type checked, and refusing private,
loopback, link-local and reserved addresses on every redirect hop unless allowed. All pages
come from a local server on 127.0.0.1 (no network)."""

from __future__ import annotations

import pytest

from externals import fetch
from externals.fetch import FetchError, fetch_url, is_public_address
from tests.local_http import local_server, slow

HTML = {"Content-Type": "text/html; charset=utf-8"}


@pytest.fixture
def allow_private(settings):
    settings.LODE_FETCH_ALLOW_PRIVATE = True
    settings.LODE_FETCH_MAX_BYTES = 2048
    settings.LODE_FETCH_TIMEOUT_SECONDS = 1


def test_fetches_an_allowed_page(allow_private):
    with local_server() as server:
        server.routes["/a"] = (200, HTML, b"<p>hello</p>")
        fetched = fetch_url(server.url("/a"))
    assert fetched.data == b"<p>hello</p>"
    assert fetched.content_type.startswith("text/html")
    assert fetched.final_url.endswith("/a")


def test_refuses_loopback_unless_allowed(settings):
    settings.LODE_FETCH_ALLOW_PRIVATE = False
    with local_server() as server:
        server.routes["/a"] = (200, HTML, b"secret admin page")
        with pytest.raises(FetchError, match="loopback"):
            fetch_url(server.url("/a"))
    assert server.hits == []  # refused before connecting


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True),
        ("2606:4700:4700::1111", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("192.168.0.1", False),
        ("169.254.169.254", False),  # cloud metadata
        ("::1", False),
        ("fe80::1", False),
        ("::ffff:127.0.0.1", False),
        ("0.0.0.0", False),
        ("240.0.0.1", False),
    ],
)
def test_address_classes(address, public):
    assert is_public_address(address) is public


def test_every_redirect_hop_is_checked(allow_private, monkeypatch):
    checked: list[str] = []

    def check_host(host: str, port: int) -> None:
        checked.append(host)
        if host == "localhost":
            raise FetchError("localhost refused")

    monkeypatch.setattr(fetch, "check_host", check_host)
    with local_server() as server:
        port = server.server.server_address[1]
        server.routes["/start"] = (302, {"Location": "/next"}, b"")
        server.routes["/next"] = (302, {"Location": f"http://localhost:{port}/end"}, b"")
        with pytest.raises(FetchError, match="localhost refused"):
            fetch_url(server.url("/start"))
    assert checked == ["127.0.0.1", "127.0.0.1", "localhost"]
    assert server.hits == ["/start", "/next"]


def test_too_many_redirects(allow_private):
    with local_server() as server:
        server.routes["/loop"] = (302, {"Location": "/loop"}, b"")
        with pytest.raises(FetchError, match="redirects"):
            fetch_url(server.url("/loop"))


def test_content_type_and_status_are_checked(allow_private):
    with local_server() as server:
        server.routes["/img"] = (200, {"Content-Type": "image/png"}, b"\x89PNG")
        server.routes["/none"] = (200, {}, b"abc")
        with pytest.raises(FetchError, match="image/png"):
            fetch_url(server.url("/img"))
        with pytest.raises(FetchError, match="content type"):
            fetch_url(server.url("/none"))
        with pytest.raises(FetchError, match="HTTP 404"):
            fetch_url(server.url("/missing"))


def test_size_cap_is_enforced_while_streaming(allow_private):
    big = b"x" * 5000
    with local_server() as server:
        server.routes["/declared"] = (200, {"Content-Type": "text/plain"}, big)
        # A lying Content-Length: the cap still holds on what is actually read.
        server.routes["/lying"] = (200, {"Content-Type": "text/plain", "Content-Length": "10"}, big)
        with pytest.raises(FetchError, match="over the 2,048-byte cap"):
            fetch_url(server.url("/declared"))
        assert len(fetch_url(server.url("/lying")).data) == 10  # httpx reads what was declared


def test_timeouts_are_reported(allow_private):
    with local_server() as server:
        server.routes["/slow"] = slow(2.0, (200, {"Content-Type": "text/plain"}, b"late"))
        with pytest.raises(FetchError, match="timed out"):
            fetch_url(server.url("/slow"))


def test_only_http_and_https(allow_private):
    with pytest.raises(FetchError, match="only http and https"):
        fetch_url("file:///etc/passwd")
    with pytest.raises(FetchError, match="no host"):
        fetch_url("http:///nohost")
