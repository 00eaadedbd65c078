"""Fetch one web page for a URL source (issue 6, item 1): a bounded, SSRF-aware HTTP GET.

Bounds: connect/read timeouts, a size cap enforced while streaming (a lying or missing
Content-Length cannot make lode read more), an allow-list of content types, at most
`MAX_REDIRECTS` redirects. Every hop's host is resolved and refused when any of its
addresses is private, loopback, link-local, multicast, reserved or unspecified, unless
`LODE_FETCH_ALLOW_PRIVATE` is on (tests serve pages from 127.0.0.1).

Known limit: the address check and httpx's own connection resolve the name separately, so a
DNS answer that changes between the two (rebinding) is not caught. Pinning the connection to
the checked address would close that; it is not done yet.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx
from django.conf import settings

from externals.extract import HTML_TYPES, PDF_TYPES, TEXT_TYPES, media_type

ALLOWED_CONTENT_TYPES = HTML_TYPES | PDF_TYPES | TEXT_TYPES
MAX_REDIRECTS = 5
USER_AGENT = "lode-mirror/1 (+self-hosted; one page per request)"


class FetchError(Exception):
    """The page could not be fetched; the message is the reason recorded on the scan."""


@dataclass
class Fetched:
    data: bytes
    content_type: str
    final_url: str


def check_url(url: str) -> tuple[str, int]:
    """Refuse anything but http(s) with a host; returns (host, port)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise FetchError(f"only http and https URLs are fetched, not {parts.scheme or 'none'!r}")
    if not parts.hostname:
        raise FetchError("the URL has no host")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise FetchError("the URL has an invalid port") from None
    return parts.hostname, port


def is_public_address(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
    )


def check_host(host: str, port: int) -> None:
    """Resolve `host` and refuse it if any address is not public (unless allowed)."""
    if settings.LODE_FETCH_ALLOW_PRIVATE:
        return
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise FetchError(f"cannot resolve {host}: {exc}") from None
    for info in infos:
        address = str(info[4][0])
        if not is_public_address(address):
            raise FetchError(
                f"{host} resolves to {address}, a private, loopback or reserved address; "
                "refused (LODE_FETCH_ALLOW_PRIVATE allows it)"
            )


def fetch_url(url: str) -> Fetched:
    """GET `url` and return its body; raises `FetchError` with the reason on any refusal."""
    limit = settings.LODE_FETCH_MAX_BYTES
    timeout = httpx.Timeout(settings.LODE_FETCH_TIMEOUT_SECONDS)
    current = url
    with httpx.Client(
        timeout=timeout, follow_redirects=False, headers={"User-Agent": USER_AGENT}
    ) as client:
        for _hop in range(MAX_REDIRECTS + 1):
            host, port = check_url(current)
            check_host(host, port)
            try:
                with client.stream("GET", current) as response:
                    if response.is_redirect:
                        location = response.headers.get("location", "")
                        if not location:
                            raise FetchError(f"redirect without a Location from {current}")
                        current = urljoin(current, location)
                        continue
                    if response.status_code != 200:
                        raise FetchError(f"HTTP {response.status_code} from {current}")
                    content_type = response.headers.get("content-type", "")
                    if media_type(content_type) not in ALLOWED_CONTENT_TYPES:
                        raise FetchError(
                            f"content type {media_type(content_type) or 'none'!r} is not one "
                            "lode mirrors (HTML, plain text, Markdown, PDF)"
                        )
                    declared = response.headers.get("content-length", "")
                    if declared.isdigit() and int(declared) > limit:
                        raise FetchError(f"{int(declared):,} bytes is over the {limit:,}-byte cap")
                    chunks: list[bytes] = []
                    size = 0
                    for chunk in response.iter_bytes():
                        size += len(chunk)
                        if size > limit:
                            raise FetchError(f"the page is over the {limit:,}-byte cap")
                        chunks.append(chunk)
                    return Fetched(b"".join(chunks), content_type, str(response.url))
            except httpx.TimeoutException:
                raise FetchError(f"timed out fetching {current}") from None
            except httpx.HTTPError as exc:
                raise FetchError(f"could not fetch {current}: {exc}") from None
    raise FetchError(f"more than {MAX_REDIRECTS} redirects")
