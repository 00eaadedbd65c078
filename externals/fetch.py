"""Fetch one web page for a URL source: a
bounded, SSRF-aware HTTP GET.

Address policy: every hop's host is resolved once, and refused unless every address is
globally routable (`ipaddress` `is_global`, not multicast or site-local; an IPv4 address
embedded in an IPv6 one — IPv4-mapped, IPv4-translated, IPv4-compatible, NAT64, 6to4,
Teredo — must be global too) and outside `SPECIAL_PURPOSE_DENY`, the IANA special-purpose
ranges that are not globally reachable, kept as data beside `is_global` because Python's
table lags the registries (it still calls 192.88.99.0/24, 3fff::/20 and 5f00::/16 global).
The connection then goes to one of exactly those checked addresses: the network backend
below is handed the checked list and never resolves the name again, so a DNS answer that
changes between check and connect (rebinding) cannot redirect it. The URL keeps its host
name, so the Host header, TLS SNI and certificate check use the name as usual.
`LODE_FETCH_ALLOW_PRIVATE` (tests serve pages from 127.0.0.1) skips the refusal but not the
pinning.

Bounds: one deadline for the whole fetch (`LODE_FETCH_TIMEOUT_SECONDS`, every name look-up,
redirect hop, connect, TLS and every read together — not per read), a minimum transfer rate
for the final page's body (`LODE_FETCH_MIN_BYTES_PER_SECOND`, measured from its first body
byte after a grace period, so a server trickling bytes is cut off early while one slow to
start answering only has the deadline to meet), a size cap enforced while streaming (a
lying or missing Content-Length cannot make lode read more), an allow-list of content types
and at most `MAX_REDIRECTS` redirects. Both time bounds are enforced inside the socket reads
(each read's timeout is shortened to what is left), so a server that sends nothing at all
is cut off just the same.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
import ssl
import threading
import time
import typing
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx
from django.conf import settings

from externals.extract import (
    HTML_TYPES,
    OFFICE_AND_DATA_TYPES,
    PDF_TYPES,
    TEXT_TYPES,
    media_type,
)

ALLOWED_CONTENT_TYPES = HTML_TYPES | PDF_TYPES | TEXT_TYPES | frozenset(OFFICE_AND_DATA_TYPES)
MAX_REDIRECTS = 5
USER_AGENT = "lode-mirror/1 (+self-hosted; one page per request)"
# The minimum transfer rate is measured from the first byte of the final page's body and
# applies only after this long (TCP slow start, a short pause); before the first body byte
# (look-ups, redirects, connecting, TLS, a slow server) only the deadline applies.
MIN_RATE_GRACE_SECONDS = 5.0
# The NAT64 well-known prefix (RFC 6052): the last 32 bits are the IPv4 address reached.
NAT64_NETWORK = ipaddress.ip_network("64:ff9b::/96")
# IPv4-translated addresses (RFC 2765, SIIT): ::ffff:0:a.b.c.d reaches a.b.c.d too. Python
# does not count them as IPv4-mapped (::ffff:a.b.c.d) nor as non-global.
IPV4_TRANSLATED_NETWORK = ipaddress.ip_network("::ffff:0:0:0/96")


@dataclass(frozen=True)
class SpecialRange:
    """One row of an IANA Special-Purpose Address Registry that lode refuses to fetch from."""

    network: str
    name: str
    rfc: str  # the registry's RFC column


# The "Last Updated" dates of the registry versions `SPECIAL_PURPOSE_DENY` was transcribed
# from (https://www.iana.org/assignments/iana-ipv4-special-registry and
# …/iana-ipv6-special-registry). A newer registry may add ranges: compare, then move these.
IPV4_SPECIAL_REGISTRY_DATE = "2020-09-04"
IPV6_SPECIAL_REGISTRY_DATE = "2024-10-22"

# Every entry of both registries whose "Globally Reachable" is False or N/A. A block with a
# globally reachable entry inside it (192.0.0.0/24 holds the PCP and TURN anycast addresses,
# 2001::/23 holds AMT, AS112 and ORCHIDv2) is refused whole: no web page is served there.
# Multicast has its own registries and is refused by `is_multicast`. The IPv6 registry's
# IPv4-mapped row (::ffff:0:0/96, RFC4291) is left out on purpose: such an address is its
# IPv4 address on the wire, and `is_public_address` judges it as that.
SPECIAL_PURPOSE_DENY: tuple[SpecialRange, ...] = (
    SpecialRange("0.0.0.0/8", '"This network"', "RFC791, Section 3.2"),
    SpecialRange("0.0.0.0/32", '"This host on this network"', "RFC1122, Section 3.2.1.3"),
    SpecialRange("10.0.0.0/8", "Private-Use", "RFC1918"),
    SpecialRange("100.64.0.0/10", "Shared Address Space", "RFC6598"),
    SpecialRange("127.0.0.0/8", "Loopback", "RFC1122, Section 3.2.1.3"),
    SpecialRange("169.254.0.0/16", "Link Local", "RFC3927"),
    SpecialRange("172.16.0.0/12", "Private-Use", "RFC1918"),
    SpecialRange("192.0.0.0/24", "IETF Protocol Assignments", "RFC6890, Section 2.1"),
    SpecialRange("192.0.0.0/29", "IPv4 Service Continuity Prefix", "RFC7335"),
    SpecialRange("192.0.0.8/32", "IPv4 dummy address", "RFC7600"),
    SpecialRange("192.0.0.170/32", "NAT64/DNS64 Discovery", "RFC8880, RFC7050 Section 2.2"),
    SpecialRange("192.0.0.171/32", "NAT64/DNS64 Discovery", "RFC8880, RFC7050 Section 2.2"),
    SpecialRange("192.0.2.0/24", "Documentation (TEST-NET-1)", "RFC5737"),
    SpecialRange("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", "RFC7526"),
    SpecialRange("192.168.0.0/16", "Private-Use", "RFC1918"),
    SpecialRange("198.18.0.0/15", "Benchmarking", "RFC2544"),
    SpecialRange("198.51.100.0/24", "Documentation (TEST-NET-2)", "RFC5737"),
    SpecialRange("203.0.113.0/24", "Documentation (TEST-NET-3)", "RFC5737"),
    SpecialRange("240.0.0.0/4", "Reserved", "RFC1112, Section 4"),
    SpecialRange("255.255.255.255/32", "Limited Broadcast", "RFC8190, RFC919 Section 7"),
    SpecialRange("::1/128", "Loopback Address", "RFC4291"),
    SpecialRange("::/128", "Unspecified Address", "RFC4291"),
    SpecialRange("64:ff9b:1::/48", "IPv4-IPv6 Translat.", "RFC8215"),
    SpecialRange("100::/64", "Discard-Only Address Block", "RFC6666"),
    SpecialRange("2001::/23", "IETF Protocol Assignments", "RFC2928"),
    SpecialRange("2001::/32", "TEREDO", "RFC4380, RFC8190"),
    SpecialRange("2001:2::/48", "Benchmarking", "RFC5180, RFC Errata 1752"),
    SpecialRange("2001:10::/28", "Deprecated (previously ORCHID)", "RFC4843"),
    SpecialRange("2001:db8::/32", "Documentation", "RFC3849"),
    SpecialRange("2002::/16", "6to4", "RFC3056"),
    SpecialRange("3fff::/20", "Documentation", "RFC9637"),
    SpecialRange("5f00::/16", "Segment Routing (SRv6) SIDs", "RFC9602"),
    SpecialRange("fc00::/7", "Unique-Local", "RFC4193, RFC8190"),
    SpecialRange("fe80::/10", "Link-Local Unicast", "RFC4291"),
)
_DENIED_NETWORKS = tuple(ipaddress.ip_network(row.network) for row in SPECIAL_PURPOSE_DENY)


def in_special_purpose_range(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether `ip` lies in a `SPECIAL_PURPOSE_DENY` range."""
    return any(ip in network for network in _DENIED_NETWORKS if network.version == ip.version)


class FetchError(Exception):
    """The page could not be fetched; the message is the reason recorded on the scan."""


@dataclass
class Fetched:
    data: bytes
    content_type: str
    final_url: str


def check_url(url: str) -> tuple[str, int]:
    """Refuse anything but http(s) with a host; returns (host, port) as the connection will
    use them (the host IDNA-encoded, an IPv6 literal without brackets)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise FetchError(f"only http and https URLs are fetched, not {parts.scheme or 'none'!r}")
    if not parts.hostname:
        raise FetchError("the URL has no host")
    try:
        parsed = httpx.URL(url)
        host = parsed.raw_host.decode("ascii")
        port = parsed.port or (443 if parts.scheme == "https" else 80)
    except (httpx.InvalidURL, ValueError, UnicodeError):
        raise FetchError("the URL has an invalid host or port") from None
    if not host:
        raise FetchError("the URL has no host")
    return host, port


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses carried inside an IPv6 one (each would be reached through it)."""
    found: list[ipaddress.IPv4Address] = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    if ip in NAT64_NETWORK or ip in IPV4_TRANSLATED_NETWORK:
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return found


def is_public_address(address: str) -> bool:
    """Whether lode may connect to `address`: globally routable, and so is any IPv4
    address embedded in it. What is allowed is listed (`is_global`), not what is refused,
    so a special range nobody thought of (shared address space 100.64.0.0/10, benchmarking
    198.18.0.0/15, …) is refused by default; `SPECIAL_PURPOSE_DENY` refuses what
    `is_global` does not know yet. Either one refusing is enough."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            # ::ffff:a.b.c.d is a.b.c.d on the wire: judge it as that.
            return is_public_address(str(ip.ipv4_mapped))
        if int(ip) >> 32 == 0:
            return False  # IPv4-compatible (::a.b.c.d, deprecated), ::1 and ::
        if ip.is_site_local:
            return False  # fec0::/10, deprecated, still routed privately
        if not all(is_public_address(str(inner)) for inner in _embedded_ipv4(ip)):
            return False
    return ip.is_global and not ip.is_multicast and not in_special_purpose_range(ip)


def resolve_host(host: str, port: int) -> list[str]:
    """Resolve `host` once and return its addresses; refuse the host if any address is not
    public (unless `LODE_FETCH_ALLOW_PRIVATE`). The fetch connects only to these."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise FetchError(f"cannot resolve {host}: {exc}") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise FetchError(f"cannot resolve {host}: no addresses")
    if not settings.LODE_FETCH_ALLOW_PRIVATE:
        for address in addresses:
            if not is_public_address(address):
                raise FetchError(
                    f"{host} resolves to {address}, a private, loopback or reserved address; "
                    "refused (LODE_FETCH_ALLOW_PRIVATE allows it)"
                )
    return addresses


class _Budget:
    """The time bounds of one whole fetch: a deadline, and a minimum rate for the final
    page's body measured from its first byte after a grace period. Every socket operation
    asks it for its timeout; it raises a timeout when nothing is left, and `explain` says
    which bound was hit."""

    def __init__(self, seconds: float, min_rate: int, grace: float) -> None:
        self.seconds = seconds
        self.min_rate = min_rate
        self.grace = grace
        self.started = time.monotonic()
        self.deadline = self.started + seconds
        # Set by `expect_body` once the final page's headers are in; until then (look-ups,
        # redirect hops, a server slow to answer) only the deadline applies.
        self.body_expected = False
        self.body_started: float | None = None  # when its first body byte arrived
        self.received = 0  # body bytes since then

    def left(self) -> float:
        """Seconds left before the deadline (≤ 0: none)."""
        return self.deadline - time.monotonic()

    def expect_body(self) -> None:
        """The final page's body comes next: measure the rate from its first byte."""
        self.body_expected = True
        self.body_started = None
        self.received = 0

    def count(self, size: int) -> None:
        """`size` bytes were just read from the socket."""
        if not self.body_expected or size == 0:
            return
        if self.body_started is None:
            self.body_started = time.monotonic()
        self.received += size

    def _rate_limit_at(self) -> float:
        """When the body bytes received so far stop meeting the minimum rate."""
        if self.min_rate <= 0 or self.body_started is None:
            return float("inf")
        return self.body_started + max(self.grace, self.received / self.min_rate)

    def timeout(self, requested: float | None, *, reading: bool) -> float:
        """The timeout for one socket operation: what was asked, shortened to what is left
        (reads also to when the rate would drop below the minimum)."""
        now = time.monotonic()
        until = min(self.deadline, self._rate_limit_at()) if reading else self.deadline
        left = until - now
        if left <= 0:
            raise httpcore.ReadTimeout("fetch budget exhausted")
        return left if requested is None else min(requested, left)

    def deadline_passed(self, url: str) -> str:
        return f"timed out fetching {url}: over the {self.seconds:g}-second deadline for the fetch"

    def explain(self, url: str) -> str:
        now = time.monotonic()
        if (
            self.body_started is not None
            and now < self.deadline - 0.05
            and self._rate_limit_at() <= now + 0.05
        ):
            return (
                f"{url} sent {self.received:,} bytes in {now - self.body_started:.1f} s, "
                f"slower than the minimum of {self.min_rate:,} bytes/s; gave up"
            )
        return self.deadline_passed(url)


def _within(seconds: float, function: typing.Callable[[], list[str]], what: str) -> list[str]:
    """`function()` if it returns within `seconds`, else `FetchError`.

    For the name look-up: `getaddrinfo` has no timeout of its own and cannot be
    interrupted, so it runs in a daemon thread that is abandoned (it ends when the
    resolver gives up, and never keeps the process from exiting) when the fetch's time is up.
    """
    if seconds <= 0:
        raise FetchError(what)
    outcome: dict[str, typing.Any] = {}

    def run() -> None:
        try:
            outcome["value"] = function()
        except BaseException as exc:  # handed to the waiting thread, re-raised there
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="lode-fetch-resolve", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise FetchError(what)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class _BudgetStream(httpcore.NetworkStream):
    """A socket stream whose every read and write is bounded by the fetch's budget."""

    def __init__(self, stream: httpcore.NetworkStream, budget: _Budget) -> None:
        self._stream = stream
        self._budget = budget

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = self._stream.read(max_bytes, self._budget.timeout(timeout, reading=True))
        self._budget.count(len(data))
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, self._budget.timeout(timeout, reading=False))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: typing.Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        # The TLS handshake checks the certificate against `server_hostname`, which is
        # the URL's host name (not the pinned address).
        stream = self._stream.start_tls(
            ssl_context, server_hostname, self._budget.timeout(timeout, reading=False)
        )
        return _BudgetStream(stream, self._budget)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._stream.get_extra_info(info)


class _PinnedBackend(httpcore.NetworkBackend):
    """Connects only to `host`, and only to the addresses checked for it (no second DNS
    look-up); the streams it returns are bounded by the fetch's budget."""

    def __init__(self, host: str, addresses: list[str], budget: _Budget) -> None:
        self.host = host
        self.addresses = addresses
        self.budget = budget
        self._backend = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        if host != self.host:
            raise httpcore.ConnectError(f"{host} was not checked; refused")
        last: Exception | None = None
        for address in self.addresses:
            try:
                stream = self._backend.connect_tcp(
                    address,
                    port,
                    timeout=self.budget.timeout(timeout, reading=False),
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except httpcore.ConnectError as exc:
                last = exc  # the next checked address, as a resolver's fallback would
                continue
            return _BudgetStream(stream, self.budget)
        raise last or httpcore.ConnectError(f"no address to connect to for {host}")

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are never fetched")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class _PinnedTransport(httpx.HTTPTransport):
    """httpx's own transport with its connection pool built on `_PinnedBackend`.

    httpx 0.28 has no public argument for the network backend, so the pool it builds is
    replaced by an equivalent `httpcore.ConnectionPool` (public API) that has one.
    """

    def __init__(self, backend: _PinnedBackend) -> None:
        context = _ssl_context()
        super().__init__(verify=context, trust_env=False)
        self._pool = httpcore.ConnectionPool(
            ssl_context=context, max_connections=1, network_backend=backend
        )


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """httpx's default verifying context, built once: loading the CA bundle takes ~0.1 s,
    too much to repeat on every redirect hop."""
    return httpx.create_ssl_context(trust_env=False)


def _budget(timeout: float | None = None) -> _Budget:
    seconds = float(settings.LODE_FETCH_TIMEOUT_SECONDS)
    return _Budget(
        seconds if timeout is None else max(0.0, min(seconds, timeout)),
        int(getattr(settings, "LODE_FETCH_MIN_BYTES_PER_SECOND", 0)),
        MIN_RATE_GRACE_SECONDS,
    )


def fetch_url(url: str, *, max_bytes: int | None = None, timeout: float | None = None) -> Fetched:
    """GET `url` and return its body; raises `FetchError` with the reason on any refusal,
    on the deadline or on a transfer slower than the minimum rate. `max_bytes` lowers the
    size cap below `LODE_FETCH_MAX_BYTES` (an ask's remaining fetch allowance); `timeout`
    lowers the deadline below `LODE_FETCH_TIMEOUT_SECONDS` (an ask's remaining time)."""
    limit = settings.LODE_FETCH_MAX_BYTES
    if max_bytes is not None:
        limit = min(limit, max_bytes)
    budget = _budget(timeout)
    current = url
    for _hop in range(MAX_REDIRECTS + 1):
        host, port = check_url(current)
        # The look-up counts against the deadline too (checked before each hop; a resolver
        # that hangs is abandoned when the time is up).
        addresses = _within(
            budget.left(),
            functools.partial(resolve_host, host, port),
            budget.deadline_passed(current) + f" (resolving {host})",
        )
        backend = _PinnedBackend(host, addresses, budget)
        try:
            with (
                httpx.Client(
                    transport=_PinnedTransport(backend),
                    timeout=httpx.Timeout(budget.seconds),
                    follow_redirects=False,
                    trust_env=False,
                    headers={"User-Agent": USER_AGENT},
                ) as client,
                client.stream("GET", current) as response,
            ):
                if response.is_redirect:
                    location = response.headers.get("location", "")
                    if not location:
                        raise FetchError(f"redirect without a Location from {current}")
                    current = urljoin(current, location)
                    continue
                return _read_body(response, current, limit, budget)
        except httpx.TimeoutException:
            raise FetchError(budget.explain(current)) from None
        except httpx.HTTPError as exc:
            raise FetchError(f"could not fetch {current}: {exc}") from None
    raise FetchError(f"more than {MAX_REDIRECTS} redirects")


def _read_body(response: httpx.Response, url: str, limit: int, budget: _Budget) -> Fetched:
    if response.status_code != 200:
        raise FetchError(f"HTTP {response.status_code} from {url}")
    content_type = response.headers.get("content-type", "")
    if media_type(content_type) not in ALLOWED_CONTENT_TYPES:
        raise FetchError(
            f"content type {media_type(content_type) or 'none'!r} is not one "
            "lode mirrors (HTML, plain text, Markdown, PDF)"
        )
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise FetchError(f"{int(declared):,} bytes is over the {limit:,}-byte cap")
    budget.expect_body()
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            raise FetchError(f"the page is over the {limit:,}-byte cap")
        chunks.append(chunk)
    return Fetched(b"".join(chunks), content_type, str(response.url))
