"""URL fetching: bounded, content-type checked, only
globally routable addresses on every redirect hop unless allowed, the connection pinned to
the address that was checked, one deadline for the whole fetch and a minimum transfer rate.
All pages come from a local server on 127.0.0.1 (no network)."""

from __future__ import annotations

import socket

import pytest

from externals import fetch
from externals.fetch import FetchError, fetch_url, is_public_address
from tests.local_http import local_server, slow, trickle

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
        # Special ranges a deny-list would miss; only globally routable ones pass.
        ("100.64.0.1", False),  # shared address space (carrier-grade NAT)
        ("100.100.100.200", False),  # a cloud metadata address inside 100.64.0.0/10
        ("100.127.255.254", False),
        ("192.0.0.1", False),  # IETF protocol assignments
        ("192.0.2.1", False),  # TEST-NET-1
        ("198.18.0.1", False),  # benchmarking
        ("198.19.255.255", False),
        ("0.1.2.3", False),  # "this network"
        ("169.254.0.1", False),
        ("255.255.255.255", False),
        ("224.0.0.1", False),  # multicast (is_global says True for some)
        ("239.255.255.250", False),
        ("ff0e::1", False),
        ("fc00::1", False),  # unique local
        ("fd12:3456::1", False),
        ("fe80::1%eth0", False),
        ("fec0::1", False),  # site-local (deprecated, is_global says True)
        ("::", False),
        ("::7f00:1", False),  # IPv4-compatible 127.0.0.1 (is_global says True)
        ("::ffff:10.0.0.1", False),
        ("::ffff:100.100.100.200", False),
        ("::ffff:8.8.8.8", True),
        ("64:ff9b::7f00:1", False),  # NAT64 of 127.0.0.1 (is_global says True)
        ("64:ff9b::a9fe:a9fe", False),  # NAT64 of 169.254.169.254
        ("64:ff9b::808:808", True),  # NAT64 of 8.8.8.8
        ("::ffff:0:7f00:1", False),  # IPv4-translated 127.0.0.1 (RFC 2765; is_global: True)
        ("::ffff:0:a9fe:a9fe", False),  # IPv4-translated 169.254.169.254
        ("::ffff:0:6464:64c8", False),  # IPv4-translated 100.100.100.200
        ("::ffff:0:808:808", True),  # IPv4-translated 8.8.8.8
        ("2002:7f00:1::1", False),  # 6to4 of 127.0.0.1
        ("2002:a9fe:a9fe::1", False),  # 6to4 of 169.254.169.254
        ("2001::1", False),  # Teredo
        ("2001:db8::1", False),  # documentation
        ("not an address", False),
    ],
)
def test_address_classes(address, public):
    assert is_public_address(address) is public


def fake_dns(monkeypatch, answers: dict[str, list[str]]) -> list[str]:
    """Resolve the names in `answers` to those addresses, one answer per look-up in turn
    (the last one repeats); other names resolve as usual. Returns the names looked up."""
    real = socket.getaddrinfo
    looked_up: list[str] = []

    def getaddrinfo(host, port, *args, **kwargs):
        if host not in answers:
            return real(host, port, *args, **kwargs)
        looked_up.append(host)
        queue = answers[host]
        address = queue.pop(0) if len(queue) > 1 else queue[0]
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return looked_up


def test_refuses_a_name_resolving_to_shared_address_space(settings, monkeypatch):
    settings.LODE_FETCH_ALLOW_PRIVATE = False
    fake_dns(monkeypatch, {"metadata.test": ["100.100.100.200"]})
    with pytest.raises(FetchError, match=r"100\.100\.100\.200, a private"):
        fetch_url("http://metadata.test/latest/meta-data/")


def test_connection_is_pinned_to_the_checked_address(settings, monkeypatch):
    """DNS rebinding: the first answer is checked; a second look-up would get another
    address. The fetch must connect to the checked one without asking again, and still send
    the name as the Host header. (127.0.0.1 stands for a public address here and 127.0.0.2,
    where nothing listens, for the internal one a rebinding answer would point to.)"""
    settings.LODE_FETCH_ALLOW_PRIVATE = False
    monkeypatch.setattr(fetch, "is_public_address", lambda address: address == "127.0.0.1")
    with local_server() as server:
        port = server.server.server_address[1]
        server.routes["/a"] = (200, HTML, b"<p>pinned</p>")
        looked_up = fake_dns(monkeypatch, {"rebind.test": ["127.0.0.1", "127.0.0.2"]})
        fetched = fetch_url(f"http://rebind.test:{port}/a")
    assert fetched.data == b"<p>pinned</p>"
    assert looked_up == ["rebind.test"]  # resolved once: no second look-up to connect
    assert server.headers[0]["Host"] == f"rebind.test:{port}"
    assert fetched.final_url == f"http://rebind.test:{port}/a"


def test_a_rebinding_answer_is_refused_when_it_is_the_one_checked(settings, monkeypatch):
    settings.LODE_FETCH_ALLOW_PRIVATE = False
    monkeypatch.setattr(fetch, "is_public_address", lambda address: address == "127.0.0.1")
    with local_server() as server:
        port = server.server.server_address[1]
        server.routes["/a"] = (200, HTML, b"<p>internal</p>")
        fake_dns(monkeypatch, {"rebind.test": ["127.0.0.2", "127.0.0.1"]})
        with pytest.raises(FetchError, match=r"127\.0\.0\.2"):
            fetch_url(f"http://rebind.test:{port}/a")
    assert server.hits == []


def test_pinned_backend_refuses_other_hosts():
    budget = fetch._Budget(5, 0, 0)
    backend = fetch._PinnedBackend("a.test", ["127.0.0.1"], budget)
    with pytest.raises(fetch.httpcore.ConnectError, match="not checked"):
        backend.connect_tcp("b.test", 80)


def test_every_redirect_hop_is_checked(allow_private, monkeypatch):
    checked: list[str] = []
    real_resolve = fetch.resolve_host

    def resolve_host(host: str, port: int) -> list[str]:
        checked.append(host)
        if host == "localhost":
            raise FetchError("localhost refused")
        return real_resolve(host, port)

    monkeypatch.setattr(fetch, "resolve_host", resolve_host)
    with local_server() as server:
        port = server.server.server_address[1]
        server.routes["/start"] = (302, {"Location": "/next"}, b"")
        server.routes["/next"] = (302, {"Location": f"http://localhost:{port}/end"}, b"")
        with pytest.raises(FetchError, match="localhost refused"):
            fetch_url(server.url("/start"))
    assert checked == ["127.0.0.1", "127.0.0.1", "localhost"]
    assert server.hits == ["/start", "/next"]


def test_too_many_redirects(allow_private, settings):
    settings.LODE_FETCH_TIMEOUT_SECONDS = 10  # six hops on a busy machine
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


def test_a_trickling_server_is_cut_off_by_the_deadline(allow_private, settings):
    """One byte every 0.1 s always arrives before any per-read timeout; only a deadline for
    the whole fetch stops it (before: it ran until the size cap — here 200+ s)."""
    settings.LODE_FETCH_MIN_BYTES_PER_SECOND = 0  # the deadline alone
    settings.LODE_FETCH_MAX_BYTES = 1_000_000
    with local_server() as server:
        server.routes["/drip"] = trickle(interval=0.1)
        with pytest.raises(FetchError, match="over the 1-second deadline"):
            fetch_url(server.url("/drip"))


def test_a_redirect_chain_shares_one_deadline(allow_private, settings):
    """Each hop answering just inside a per-request timeout still runs out of the total."""
    settings.LODE_FETCH_MIN_BYTES_PER_SECOND = 0
    with local_server() as server:
        for hop in range(4):
            server.routes[f"/r{hop}"] = slow(0.4, (302, {"Location": f"/r{hop + 1}"}, b""))
        server.routes["/r4"] = (200, {"Content-Type": "text/plain"}, b"end")
        with pytest.raises(FetchError, match="deadline"):
            fetch_url(server.url("/r0"))
    assert len(server.hits) < 5


def test_a_transfer_below_the_minimum_rate_is_cut_off(allow_private, settings, monkeypatch):
    settings.LODE_FETCH_TIMEOUT_SECONDS = 30
    settings.LODE_FETCH_MIN_BYTES_PER_SECOND = 1000
    settings.LODE_FETCH_MAX_BYTES = 1_000_000
    monkeypatch.setattr(fetch, "MIN_RATE_GRACE_SECONDS", 0.3)
    with local_server() as server:
        server.routes["/drip"] = trickle(interval=0.05)  # ~20 bytes/s
        with pytest.raises(FetchError, match="slower than the minimum of 1,000 bytes/s"):
            fetch_url(server.url("/drip"))


def test_a_slow_transfer_above_the_minimum_rate_completes(allow_private, settings, monkeypatch):
    """The rate is judged over the whole transfer: ~4,000 bytes/s for 0.6 s passes."""
    settings.LODE_FETCH_TIMEOUT_SECONDS = 30
    settings.LODE_FETCH_MIN_BYTES_PER_SECOND = 1000
    settings.LODE_FETCH_MAX_BYTES = 1_000_000
    monkeypatch.setattr(fetch, "MIN_RATE_GRACE_SECONDS", 0.3)
    with local_server() as server:
        server.routes["/steady"] = trickle(interval=0.05, chunk=b"y" * 200, count=12)
        assert fetch_url(server.url("/steady")).data == b"y" * 2400


def test_a_server_slow_to_start_answering_has_only_the_deadline(
    allow_private, settings, monkeypatch
):
    """The rate is measured from the first body byte: a server that takes longer than the
    grace period to answer, then sends its page at once, is within the deadline (before: cut
    off as "slower than the minimum" when the grace ran out with nothing received)."""
    settings.LODE_FETCH_TIMEOUT_SECONDS = 30
    settings.LODE_FETCH_MIN_BYTES_PER_SECOND = 1000
    monkeypatch.setattr(fetch, "MIN_RATE_GRACE_SECONDS", 0.3)
    with local_server() as server:
        server.routes["/late"] = slow(1.0, (200, {"Content-Type": "text/plain"}, b"z" * 1500))
        assert fetch_url(server.url("/late")).data == b"z" * 1500


def test_redirect_hops_do_not_use_up_the_final_pages_grace(allow_private, settings, monkeypatch):
    """Slow redirect hops, then a page sent at a steady rate above the minimum: it completes
    (before: the grace counted from the first hop, so the final body was cut off)."""
    settings.LODE_FETCH_TIMEOUT_SECONDS = 30
    settings.LODE_FETCH_MIN_BYTES_PER_SECOND = 1000
    settings.LODE_FETCH_MAX_BYTES = 1_000_000
    monkeypatch.setattr(fetch, "MIN_RATE_GRACE_SECONDS", 0.3)
    with local_server() as server:
        server.routes["/h0"] = slow(0.5, (302, {"Location": "/h1"}, b""))
        server.routes["/h1"] = slow(0.5, (302, {"Location": "/page"}, b""))
        server.routes["/page"] = trickle(interval=0.05, chunk=b"y" * 200, count=12)
        assert fetch_url(server.url("/h0")).data == b"y" * 2400
    assert server.hits == ["/h0", "/h1", "/page"]


def test_the_rate_is_still_enforced_after_a_slow_start(allow_private, settings, monkeypatch):
    settings.LODE_FETCH_TIMEOUT_SECONDS = 30
    settings.LODE_FETCH_MIN_BYTES_PER_SECOND = 1000
    settings.LODE_FETCH_MAX_BYTES = 1_000_000
    monkeypatch.setattr(fetch, "MIN_RATE_GRACE_SECONDS", 0.3)
    with local_server() as server:
        server.routes["/h0"] = slow(0.5, (302, {"Location": "/drip"}, b""))
        server.routes["/drip"] = trickle(interval=0.05)  # ~20 bytes/s
        with pytest.raises(FetchError, match="slower than the minimum of 1,000 bytes/s"):
            fetch_url(server.url("/h0"))


def test_a_hanging_name_look_up_is_bounded_by_the_deadline(allow_private, monkeypatch):
    """getaddrinfo has no timeout; the look-up is abandoned when the fetch's time is up
    (before: the fetch waited for the resolver, here until it was released, and succeeded
    past its deadline)."""
    import threading

    released = threading.Event()
    calls: list[str] = []

    def hanging_getaddrinfo(host, port, *args, **kwargs):
        calls.append(host)
        released.wait(5)  # a resolver that does not answer (bounded so the test ends)
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", port))]

    with local_server() as server:
        server.routes["/a"] = (200, {"Content-Type": "text/plain"}, b"hello")
        port = server.server.server_address[1]
        monkeypatch.setattr(socket, "getaddrinfo", hanging_getaddrinfo)
        try:
            with pytest.raises(FetchError, match=r"deadline .*\(resolving slow-dns\.test\)"):
                fetch_url(f"http://slow-dns.test:{port}/a")
        finally:
            released.set()
    assert calls == ["slow-dns.test"]
    assert server.hits == []


def test_no_look_up_once_the_deadline_has_passed(monkeypatch):
    looked_up: list[str] = []
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: looked_up.append(a[0]) or [])
    with pytest.raises(FetchError, match="deadline"):
        fetch._within(0, lambda: fetch.resolve_host("a.test", 80), "over the deadline")
    assert looked_up == []


@pytest.mark.django_db
def test_a_trickling_url_source_is_a_recorded_failure_keeping_the_snapshot(
    allow_private, settings, alice, monkeypatch
):
    from externals import pipeline, services
    from externals.models import ScanRecord
    from externals.pipeline import scan_source

    monkeypatch.setattr(pipeline, "embedding_problem", lambda: "")  # not under test

    settings.LODE_FETCH_MIN_BYTES_PER_SECOND = 0
    settings.LODE_FETCH_MAX_BYTES = 1_000_000
    with local_server() as server:
        server.routes["/page"] = (200, HTML, b"<html><body><p>Stable words here.</p></body></html>")
        source = services.source_create(
            owner=alice, name="drip", kind="url", location=server.url("/page")
        )
        first = scan_source(source)
        assert first.status == ScanRecord.Status.OK
        item = source.items.get()
        head = item.document.head_id
        server.routes["/page"] = trickle("text/html", interval=0.1)
        second = scan_source(source)
    assert second.status == ScanRecord.Status.FAILED
    assert "deadline" in second.error
    assert second.failures[0]["reason"] == second.error
    item.refresh_from_db()
    assert item.document.head_id == head  # the previous snapshot stays
    assert "deadline" in item.last_error


def test_only_http_and_https(allow_private):
    with pytest.raises(FetchError, match="only http and https"):
        fetch_url("file:///etc/passwd")
    with pytest.raises(FetchError, match="no host"):
        fetch_url("http:///nohost")
