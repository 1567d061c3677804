"""Where a webhook may go (SSRF): public addresses only, unless the deployment allows private.

A write token chooses a rule's webhook URL and the server makes the request, so without a check
the server would POST to cloud metadata (169.254.169.254), to its own loopback services or into
the private network, and the delivery log would tell a read token what answered. Targets are
checked when a rule is saved (`check_url`) and again at each send (`resolve`), and the send
connects to the very address that was checked (no second DNS lookup a rebinding attack could
answer differently).
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit


class UnsafeTarget(ValueError):
    """The URL is malformed, does not resolve, or resolves to an address not allowed."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str  # path and query, as sent in the request line
    address: str  # the checked IP the request connects to


IP = ipaddress.IPv4Address | ipaddress.IPv6Address
# IPv6 prefixes that carry an IPv4 address in their last 32 bits: NAT64 (RFC 6052's well-known
# prefix and RFC 8215's local-use one) and the deprecated IPv4-compatible form (::a.b.c.d).
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_V4_COMPATIBLE = ipaddress.ip_network("::/96")


def _translated_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a packet to `ip` is delivered to, for the forms that are that address
    (mapped, NAT64, IPv4-compatible); None for any other IPv6 address."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if any(ip in net for net in _NAT64) or (ip in _V4_COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _tunnelled_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses a tunnelling form routes through: 6to4 (2002:AABB:CCDD::, via the
    relay to A.B.C.D) and Teredo (its server and client)."""
    found = [ip.sixtofour] if ip.sixtofour is not None else []
    if ip.teredo is not None:
        found.extend(ip.teredo)
    return found


def _allowed(ip: IP, allow_private: bool) -> bool:
    if isinstance(ip, ipaddress.IPv6Address):
        # An IPv4 address inside an IPv6 one is checked as that IPv4 address: otherwise
        # http://[2002:a9fe:a9fe::]/ (6to4 of 169.254.169.254) passes as a "global" address.
        v4 = _translated_ipv4(ip)
        if v4 is not None:
            return _allowed(v4, allow_private)
        if not all(_allowed(t, allow_private) for t in _tunnelled_ipv4(ip)):
            return False
    # Never: link-local (cloud metadata lives there), multicast, unspecified, reserved.
    if ip.is_link_local or ip.is_multicast or ip.is_unspecified or ip.is_reserved:
        return False
    if ip.is_global:
        return True
    # Loopback, RFC 1918, ULA, CGNAT...: only for self-hosted relays, when the operator says so.
    return allow_private and (ip.is_private or ip.is_loopback or ip in _CGNAT)


_CGNAT = ipaddress.ip_network("100.64.0.0/10")


def parse(url: str) -> tuple[str, str, int, str]:
    # Before urlsplit, which drops tabs and newlines (a rule's "/a\tb" was sent to "/ab"):
    # a URL with whitespace or control characters is refused, not changed into another one.
    at = next((i for i, c in enumerate(url) if c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F),
              None)
    if at is not None:
        start = url.find("://") + 3
        end = min((j for j in (url.find(c, start) for c in "/?#") if j >= 0), default=len(url))
        where = "webhook_url's host" if start <= at < end else "webhook_url"
        raise UnsafeTarget(f"{where} must not contain spaces or control characters (found "
                           f"{url[at]!r}): encode them as %XX")
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # "http://[::1": an unclosed IPv6 bracket (it was a 500)
        raise UnsafeTarget(f"webhook_url is not a URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise UnsafeTarget("webhook_url must be an http:// or https:// URL")
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise UnsafeTarget(f"webhook_url has an invalid port: {exc}") from exc
    if not host:
        raise UnsafeTarget("webhook_url has no host")
    if not _host_syntax_ok(host):
        # Unresolvable hosts are saved (DNS may be down now); these can never resolve.
        raise UnsafeTarget(f"webhook_url has an invalid host {host[:80]!r}")
    if parts.username or parts.password:
        raise UnsafeTarget("webhook_url must not carry credentials")
    if port == 0:
        raise UnsafeTarget("webhook_url has an invalid port: 0")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if not path.isascii():  # an HTTP request line is ASCII: every attempt failed to encode it
        raise UnsafeTarget("webhook_url's path and query must be ASCII: encode other "
                           "characters as %XX")
    return scheme, host, port or (443 if scheme == "https" else 80), path


_LABEL = re.compile(r"(?!-)[A-Za-z0-9_-]{1,63}(?<!-)")


def _host_syntax_ok(host: str) -> bool:
    """An IP address, or a name of DNS labels (international ones as IDNA)."""
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
        return True
    except ValueError:
        pass
    try:
        name = host.encode("idna").decode("ascii")
    except UnicodeError:
        return False
    return len(name) <= 253 and all(_LABEL.fullmatch(p) for p in name.rstrip(".").split("."))


def resolve(url: str, allow_private: bool) -> Target:
    """The URL's parts and the first address it resolves to, all of them checked."""
    scheme, host, port, path = parse(url)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise Unresolvable(f"webhook host {host!r} does not resolve") from exc
    addresses = [str(info[4][0]) for info in infos]
    if not addresses:
        raise Unresolvable(f"webhook host {host!r} does not resolve")
    for a in addresses:
        if not _allowed(ipaddress.ip_address(a.split("%", 1)[0]), allow_private):
            # Every address must pass: otherwise a host with one public and one private
            # address would be accepted and might be connected to the private one.
            raise UnsafeTarget(
                f"webhook host {host!r} resolves to a loopback, private, link-local or reserved "
                "address; allowed only with SCALEWATCH_WEBHOOK_ALLOW_PRIVATE=1"
            )
    return Target(scheme, host, port, path, addresses[0])


class Unresolvable(UnsafeTarget):
    """The host name does not resolve (now)."""


def check_url(url: str, allow_private: bool) -> None:
    """Raise `UnsafeTarget` (a 422 when saving a rule) for a URL the sender would refuse.

    A host name that does not resolve at this moment is accepted: DNS may be down or the
    name not yet published, and every send checks again (and refuses what is not allowed).
    """
    with contextlib.suppress(Unresolvable):
        resolve(url, allow_private)
