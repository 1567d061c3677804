"""Webhook events: the JSON body, its HMAC signature, and the outbox sender thread.

Body: the run (id, name, project), the rule (id, kind), A before and after, a link to the run
page and a `text` field, so a Slack incoming webhook shows the message as it is. Headers:
`X-Scalewatch-Signature: sha256=<hex HMAC-SHA256 of the exact body bytes with the rule's
secret>` (only when the rule has a secret), `X-Scalewatch-Delivery: <id>` (the same on every
retry of one event: receivers deduplicate on it), `X-Scalewatch-Event`.

Retries: exponential backoff with jitter until a 2xx, given up (`failed`) after
`webhook_max_attempts` attempts or `webhook_max_age` seconds. All state is in the database, so
a restart loses nothing; the worst case after a crash mid-request is one duplicate request with
the same delivery id.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import random
import time
import urllib.error
import urllib.request
from datetime import timedelta, timezone
from typing import Any

from server.background import PollingWorker, worker_identity
from server.db.models import utcnow
from server.store.base import OutboxStore

log = logging.getLogger("scalewatch.alerts")

SIGNATURE_HEADER = "X-Scalewatch-Signature"
DELIVERY_HEADER = "X-Scalewatch-Delivery"
EVENT_HEADER = "X-Scalewatch-Event"


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, header: str | None) -> bool:
    """What a receiver does (documented here, used by the tests)."""
    return bool(header) and hmac.compare_digest(sign(secret, body), header or "")


def _fmt(v: Any) -> str:
    return "n/a" if v is None else f"{float(v):.3f}"


def build_body(alert: dict[str, Any], event: str, base_url: str) -> str:
    details = alert.get("details") or {}
    link = f"{base_url.rstrip('/')}/dashboard/run/{alert['run_id']}"
    run_label = f"{alert.get('run_name') or alert['run_id']} ({alert['project']})"
    if event == "alert.resolved":
        text = f"[scalewatch] resolved: {alert['kind']} on run {run_label}. {link}"
    else:
        text = (
            f"[scalewatch] {alert['kind']} on run {run_label}: {alert.get('message', '')}"
            f" (A {_fmt(details.get('A_before'))} -> {_fmt(details.get('A_after'))}). {link}"
        )
    payload = {
        "event": event,
        "delivery_id": alert.get("delivery_id"),
        "text": text,
        "run": {"id": alert["run_id"], "name": alert.get("run_name"), "project": alert["project"]},
        "rule": {"id": alert["rule_id"], "kind": alert["kind"]},
        "alert": {
            "id": alert["id"],
            "state": alert["state"],
            "message": alert.get("message"),
            "created_at": alert.get("created_at"),
            "resolved_at": alert.get("resolved_at"),
            "fit_id": alert.get("fit_id"),
            "details": details,
        },
        "A_before": details.get("A_before"),
        "A_after": details.get("A_after"),
        "A_before_ci": details.get("A_before_ci"),
        "A_after_ci": details.get("A_after_ci"),
        "link": link,
    }
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)


def post(
    url: str, body: bytes, headers: dict[str, str], timeout: float
) -> tuple[int | None, str | None]:
    """POST once; (status code, error). Redirects are not followed (they are not success)."""

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(_NoRedirect)
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with opener.open(req, timeout=timeout) as resp:
            resp.read(65536)
            return resp.status, None
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return None, f"{type(exc).__name__}: {reason}"[:500]


class WebhookSender(PollingWorker):
    thread_name = "scalewatch-webhooks"

    """Background thread draining the outbox; several processes may run one each."""

    def __init__(
        self,
        store: OutboxStore,
        backoff: float = 30.0,
        backoff_max: float = 3600.0,
        max_attempts: int = 20,
        max_age: float = 24 * 3600.0,
        timeout: float = 10.0,
        poll_interval: float = 2.0,
    ) -> None:
        super().__init__(poll_interval)
        self.store = store
        self.backoff = backoff
        self.backoff_max = backoff_max
        self.max_attempts = max_attempts
        self.max_age = max_age
        self.timeout = timeout
        # The lease outlives one request by a wide margin: never two senders on one delivery.
        self.lease_seconds = max(60.0, 3 * timeout)
        self.owner = worker_identity()

    def delay(self, attempts: int) -> float:
        """Seconds before retry number `attempts` + 1: exponential, capped, with jitter."""
        base = min(self.backoff * 2 ** max(attempts - 1, 0), self.backoff_max)
        return base * random.uniform(1.0, 1.5)

    def run_once(self) -> int:
        done = 0
        while not self._stop.is_set():
            claimed = self.store.claim_deliveries(self.owner, self.lease_seconds, limit=8)
            if not claimed:
                return done
            for item in claimed:
                self.send(item)
                done += 1
        return done

    def send(self, item: dict[str, Any]) -> str:
        body = item["body"].encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "scalewatch-webhook/1",
            DELIVERY_HEADER: item["delivery_key"],
            EVENT_HEADER: item["event"],
        }
        if item.get("secret"):
            headers[SIGNATURE_HEADER] = sign(item["secret"], body)
        started = utcnow()
        t0 = time.perf_counter()
        status, error = post(item["url"], body, headers, self.timeout)
        ok = status is not None and 200 <= status < 300
        attempt = {
            "started_at": started,
            "duration_ms": (time.perf_counter() - t0) * 1000.0,
            "status_code": status,
            "error": error,
            "ok": ok,
        }
        attempts = int(item["attempts"]) + 1
        created = item["created_at"]
        if created.tzinfo is None:
            created = created.replace(tzinfo=timezone.utc)
        age = (utcnow() - created).total_seconds()
        if ok:
            outcome, next_at = "delivered", None
        elif attempts >= self.max_attempts or age >= self.max_age:
            outcome, next_at = "failed", None
            log.warning(
                "webhook %s for alert %s given up after %d attempts: %s",
                item["delivery_key"],
                item["alert_id"],
                attempts,
                error or f"HTTP {status}",
            )
        else:
            outcome, next_at = "retry", utcnow() + timedelta(seconds=self.delay(attempts))
        self.store.record_delivery_attempt(item["id"], self.owner, attempt, outcome, next_at)
        return outcome
