"""The URL fetcher's deny table (`externals.fetch.SPECIAL_PURPOSE_DENY`): every IANA
special-purpose range that is not globally reachable is refused, even where Python's
`is_global` still says global; public addresses still pass; an IPv4 address carried in an
IPv6 one is judged as that IPv4 address; and the table is the one transcribed from the
registry versions its date constants name.
"""

from __future__ import annotations

import ipaddress
import re

import pytest

from externals.fetch import (
    IPV4_SPECIAL_REGISTRY_DATE,
    IPV6_SPECIAL_REGISTRY_DATE,
    SPECIAL_PURPOSE_DENY,
    in_special_purpose_range,
    is_public_address,
)

# The registry versions this test was written against. A table moved to a newer registry
# must move these too, after checking the new rows.
EXPECTED_IPV4_REGISTRY_DATE = "2020-09-04"
EXPECTED_IPV6_REGISTRY_DATE = "2024-10-22"


def _addresses_of(network: str) -> list[str]:
    """The first, a middle and the last address of `network`."""
    net = ipaddress.ip_network(network)
    middle = net.network_address + net.num_addresses // 2
    return list(dict.fromkeys(str(a) for a in (net[0], middle, net[-1])))


@pytest.mark.parametrize("row", SPECIAL_PURPOSE_DENY, ids=lambda row: row.network)
def test_every_address_of_every_row_is_refused(row):
    for address in _addresses_of(row.network):
        assert in_special_purpose_range(ipaddress.ip_address(address)), address
        assert is_public_address(address) is False, address


@pytest.mark.parametrize(
    "address",
    [
        "192.88.99.1",  # deprecated 6to4 relay anycast
        "192.88.99.254",
        "3fff::1",  # documentation (RFC 9637)
        "3fff:fff:ffff::1",
        "5f00::1",  # SRv6 SIDs (RFC 9602)
        "5f00:ffff::1",
    ],
)
def test_ranges_is_global_still_calls_global_are_refused(address):
    """The reason the table exists: Python's own table lets these through."""
    assert ipaddress.ip_address(address).is_global is True
    assert is_public_address(address) is False


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "1.1.1.1",
        "93.184.215.14",
        "151.101.1.69",
        "192.88.98.1",  # beside the 6to4 relay block
        "192.88.100.1",
        "198.17.255.1",  # beside benchmarking
        "198.20.0.1",
        "100.63.255.255",  # beside shared address space
        "100.128.0.1",
        "2606:4700:4700::1111",
        "2a00:1450:4001:80b::200e",
        "2620:fe::fe",
        "3fff:1000::1",  # past the /20
        "5e00::1",  # below the SRv6 block
        "6000::1",
        "::ffff:8.8.8.8",  # IPv4-mapped public
        "64:ff9b::808:808",  # NAT64 of 8.8.8.8
        "::ffff:0:808:808",  # IPv4-translated 8.8.8.8
    ],
)
def test_public_addresses_are_allowed(address):
    assert is_public_address(address) is True


@pytest.mark.parametrize(
    "address",
    [
        "::ffff:192.88.99.1",  # IPv4-mapped 6to4 relay anycast
        "::ffff:10.1.2.3",
        "::ffff:169.254.169.254",
        "::ffff:100.64.0.1",
        "2002:c0a8:101::1",  # 6to4 of 192.168.1.1
        "2002:a00:1::1",  # 6to4 of 10.0.0.1
        "2002:c058:6301::1",  # 6to4 of 192.88.99.1
        "64:ff9b::c0a8:101",  # NAT64 of 192.168.1.1
        "64:ff9b::c058:6301",  # NAT64 of 192.88.99.1
        "64:ff9b::c612:1",  # NAT64 of 198.18.0.1
        "::ffff:0:c058:6301",  # IPv4-translated 192.88.99.1
    ],
)
def test_embedded_ipv4_is_judged_as_that_address(address):
    assert is_public_address(address) is False


def test_the_table_is_the_registry_version_it_names():
    assert IPV4_SPECIAL_REGISTRY_DATE == EXPECTED_IPV4_REGISTRY_DATE
    assert IPV6_SPECIAL_REGISTRY_DATE == EXPECTED_IPV6_REGISTRY_DATE
    networks = [row.network for row in SPECIAL_PURPOSE_DENY]
    assert len(networks) == len(set(networks))
    for row in SPECIAL_PURPOSE_DENY:
        assert re.match(r"RFC\d{3,5}\b", row.rfc), row  # every row cites its RFC
        assert row.name
        network = ipaddress.ip_network(row.network)  # strict: no host bits set
        assert str(network) == row.network
    by_version = {4: 0, 6: 0}
    for network in networks:
        by_version[ipaddress.ip_network(network).version] += 1
    # The rows of each registry that are not globally reachable, as of the dates above.
    # (less the IPv4-mapped row, judged by its IPv4 address instead).
    assert by_version == {4: 20, 6: 14}
    for required in ("192.88.99.0/24", "3fff::/20", "5f00::/16", "64:ff9b:1::/48"):
        assert required in networks
    assert "::ffff:0:0/96" not in networks
