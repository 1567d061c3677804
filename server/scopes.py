"""Token scopes and the auth cookie: shared by the REST API's auth and the dashboard's gate.

Outside `scalewatch.server.api` (and importing only the domain's shapes), so the dashboard
checks scopes without importing the API package (which assembles the app and mounts the
dashboard).
"""

from __future__ import annotations

from scalewatch.server.domain.alerts import Delivery

SCOPES = ("read", "write", "admin")
SCOPE_RANK = {name: i for i, name in enumerate(SCOPES)}  # read < write < admin
# The dashboard's sign-in cookie: a session id (see `DashboardSession`), never an API token.
# The REST API does not accept it (bearer tokens only).
AUTH_COOKIE = "scalewatch_session"

# What a token below admin sees of a webhook: the URL's scheme and host only (a Slack incoming
# webhook URL is itself the secret), and a generic error instead of the receiver's answer or
# the socket error (which would make the delivery log a port scanner).
GENERIC_DELIVERY_ERROR = "delivery failed"


def webhook_host_only(url: str | None) -> str | None:
    """ "https://hooks.slack.com/services/T0/B0/x" -> "https://hooks.slack.com/…"."""
    if not url:
        return url
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "…"
    host = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].rsplit("@", 1)[-1]
    return f"{scheme}://{host}/…"


def redact_delivery(delivery: Delivery, scope: str) -> Delivery:
    """A delivery (with its attempt log) as a token of `scope` may see it."""
    if SCOPE_RANK.get(scope, -1) >= SCOPE_RANK["admin"]:
        return delivery
    url = webhook_host_only(delivery.url) or ""
    if SCOPE_RANK.get(scope, -1) >= SCOPE_RANK["write"]:
        return delivery.model_copy(update={"url": url})
    return delivery.model_copy(update={
        "url": url,
        "last_error": GENERIC_DELIVERY_ERROR if delivery.last_error else None,
        "attempt_log": [
            a.model_copy(update={"error": GENERIC_DELIVERY_ERROR if a.error else None})
            for a in delivery.attempt_log
        ],
    })
