"""Issue 35 (low): an IPv6 address that carries a non-public IPv4 one (6to4, NAT64, Teredo,
IPv4-mapped and -compatible) is refused as a webhook target like that IPv4 address, even where
the operator allows private targets (cloud metadata is link-local: never allowed)."""

from __future__ import annotations

import pytest

from scalewatch.server.alerts import targets
from tests.security.conftest import Authed

METADATA_IN_IPV6 = [
    "http://[2002:a9fe:a9fe::]/",  # 6to4 of 169.254.169.254
    "http://[2002:a9fe:a9fe:1::1]/latest/meta-data/",
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64, well-known prefix
    "http://[64:ff9b::169.254.169.254]/",
    "http://[64:ff9b:1::a9fe:a9fe]/",  # NAT64, local-use prefix
    "http://[2001:0:4136:e378:8000:63bf:5601:5601]/",  # Teredo, client 169.254.169.254
    "http://[::ffff:169.254.169.254]/",  # IPv4-mapped
    "http://[::169.254.169.254]/",  # IPv4-compatible
]
PRIVATE_IN_IPV6 = [
    "http://[2002:7f00:1::]/",  # 6to4 of 127.0.0.1
    "http://[2002:a00:7::1]/",  # 6to4 of 10.0.0.7
    "http://[64:ff9b::7f00:1]/",  # NAT64 of 127.0.0.1
    "http://[64:ff9b::c0a8:101]/",  # NAT64 of 192.168.1.1
]


@pytest.mark.parametrize("url", METADATA_IN_IPV6 + PRIVATE_IN_IPV6)
def test_embedded_non_public_ipv4_is_refused(url: str) -> None:
    with pytest.raises(targets.UnsafeTarget):
        targets.check_url(url, allow_private=False)


@pytest.mark.parametrize("url", METADATA_IN_IPV6)
def test_embedded_metadata_is_refused_even_with_private_allowed(url: str) -> None:
    with pytest.raises(targets.UnsafeTarget):
        targets.check_url(url, allow_private=True)


def test_embedded_public_ipv4_still_passes() -> None:
    # 6to4 of a public address, and NAT64 of one (what DNS64 answers on IPv6-only hosts).
    for url in ("http://[2002:5db8:d70e::1]/hook", "http://[64:ff9b::5db8:d70e]/hook"):
        assert targets.resolve(url, allow_private=False).address.startswith(("2002:", "64:ff9b"))


def test_the_api_refuses_a_6to4_metadata_webhook(authed: Authed) -> None:
    r = authed.client.post(
        "/api/v1/alert-rules",
        json={"project": "p", "kind": "asymptote_drop", "webhook_url": METADATA_IN_IPV6[0]},
        headers=authed.h("write"),
    )
    assert r.status_code == 422, r.text
    assert "webhook_url" in r.text
