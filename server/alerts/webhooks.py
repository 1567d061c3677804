"""Webhook events: the JSON body, its HMAC signature, and the outbox sender thread.

Body: the run (id, name, project; null for an alert on a group's pooled fit), the group (name,
project; null for a run's alert), the rule (id, kind), A before and after, a link to the run
page (a group's: its fit in the API) and a `text` field, so a Slack incoming webhook shows
the message as it is. Headers:
`X-Scalewatch-Signature: sha256=<hex HMAC-SHA256 of the exact body bytes with the rule's
secret>` (only when the rule has a secret), `X-Scalewatch-Delivery: <id>` (the same on every
retry of one event: receivers deduplicate on it), `X-Scalewatch-Event`.

Retries: exponential backoff with jitter until a 2xx, given up (`failed`) after
`webhook_max_attempts` attempts or `webhook_max_age` seconds. All state is in the database, so
a restart loses nothing; the worst case after a crash mid-request is one duplicate request with
the same delivery id.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import http.client
import json
import logging
import random
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import timedelta, timezone
from typing import Any
from urllib.parse import urlencode

from scalewatch.server.alerts.targets import Target, UnsafeTarget, resolve
from scalewatch.server.background import PollingWorker, worker_identity
from scalewatch.server.db.models import utcnow
from scalewatch.server.domain.alerts import Alert, AttemptRecord, ClaimedDelivery, DeliveryOutcome
from scalewatch.server.store.base import EventBuilder, OutboxStore

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


def event_builder(url: str | None, base_url: str) -> EventBuilder | None:
    """How an alert event of a rule with webhook ``url`` becomes an outbox row (None: the rule
    has no webhook): the URL and the JSON body."""
    if not url:
        return None

    def build(alert: Alert, event: str, delivery_id: str) -> tuple[str, str]:
        return url, build_body(alert, event, base_url, delivery_id)

    return build


def build_body(alert: Alert, event: str, base_url: str, delivery_id: str | None = None) -> str:
    details = alert.details
    group = alert.group
    base = base_url.rstrip("/")
    kind = alert.kind.value
    if alert.run_id is None and group:  # the group's pooled fit
        query = urlencode({"project": alert.project, "group": group})
        link = f"{base}/api/v1/groups/fit?{query}"
        subject = f"group {group} ({alert.project})"
    else:
        link = f"{base}/dashboard/run/{alert.run_id}"
        subject = f"run {alert.run_name or alert.run_id} ({alert.project})"
        if group:
            subject += f" of group {group}"
    if event == "alert.resolved":
        text = f"[scalewatch] resolved: {kind} on {subject}. {link}"
    else:
        text = (
            f"[scalewatch] {kind} on {subject}: {alert.message}"
            f" (A {_fmt(details.get('A_before'))} -> {_fmt(details.get('A_after'))}). {link}"
        )
    payload = {
        "event": event,
        "delivery_id": delivery_id,
        "text": text,
        "run": None if alert.run_id is None else {
            "id": alert.run_id, "name": alert.run_name, "project": alert.project},
        "group": None if not group else {"name": group, "project": alert.project},
        "rule": {"id": alert.rule_id, "kind": kind},
        "alert": {
            "id": alert.id,
            "state": alert.state,
            "message": alert.message,
            "created_at": alert.created_at,
            "resolved_at": alert.resolved_at,
            "fit_id": alert.fit_id,
            "details": details,
        },
        "A_before": details.get("A_before"),
        "A_after": details.get("A_after"),
        "A_before_ci": details.get("A_before_ci"),
        "A_after_ci": details.get("A_after_ci"),
        "link": link,
    }
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)


class _PinnedHTTP(http.client.HTTPConnection):
    """Connects to the address `targets.resolve` checked, not to a fresh lookup of the host."""

    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self.address = target.address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(self, target: Target, timeout: float) -> None:
        self.tls = ssl.create_default_context()
        super().__init__(target.host, target.port, timeout=timeout, context=self.tls)
        self.address = target.address

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), self.timeout)
        # The certificate is checked against the URL's host name (SNI too), as usual.
        self.sock = self.tls.wrap_socket(sock, server_hostname=self.host)


def post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    timeout: float,
    allow_private: bool = False,
) -> tuple[int | None, str | None]:
    """POST once; (status code, error). Redirects are not followed (they are not success).

    `timeout` is a total deadline for the attempt (connect, send, status, headers, body): a
    socket timeout alone is per read, and a receiver dribbling a byte at a time would hold the
    sender for ever. At the deadline a timer shuts the socket down, which ends any read.
    """
    started = time.monotonic()
    try:
        target = resolve(url, allow_private)
    except UnsafeTarget as exc:
        return None, f"refused: {exc}"[:500]
    cls = _PinnedHTTPS if target.scheme == "https" else _PinnedHTTP
    conn = cls(target, timeout=max(0.05, timeout - (time.monotonic() - started)))
    expired = threading.Event()

    def cut() -> None:
        expired.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(max(0.0, timeout - (time.monotonic() - started)), cut)
    timer.daemon = True
    timer.start()
    try:
        conn.request("POST", target.path, body=body, headers=headers)
        resp = conn.getresponse()
        resp.read(65536)
        if expired.is_set():
            raise TimeoutError
        return resp.status, None
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if expired.is_set() or isinstance(exc, TimeoutError):
            return None, f"timed out: no complete answer within {timeout:g} s"
        return None, f"{type(exc).__name__}: {exc}"[:500]
    finally:
        timer.cancel()
        conn.close()


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
        allow_private: bool = False,
        parallel: int = 8,
    ) -> None:
        super().__init__(poll_interval)
        self.store = store
        self.backoff = backoff
        self.backoff_max = backoff_max
        self.max_attempts = max_attempts
        self.max_age = max_age
        self.timeout = timeout
        self.allow_private = allow_private
        # Deliveries of one claim are sent at once, so one slow receiver does not hold the
        # others; each attempt has a total deadline of `timeout`.
        self.parallel = max(1, parallel)
        # The lease outlives one request by a wide margin, and is renewed while a batch is in
        # flight: never two senders on one delivery.
        self.lease_seconds = max(60.0, 3 * timeout)
        self.owner = worker_identity()

    def delay(self, attempts: int) -> float:
        """Seconds before retry number `attempts` + 1: exponential, capped, with jitter."""
        base = min(self.backoff * 2 ** max(attempts - 1, 0), self.backoff_max)
        return base * random.uniform(1.0, 1.5)

    def run_once(self) -> int:
        done = 0
        with ThreadPoolExecutor(self.parallel, thread_name_prefix="scalewatch-hook") as pool:
            while not self._stop.is_set():
                claimed = self.store.claim_deliveries(
                    self.owner, self.lease_seconds, limit=self.parallel
                )
                if not claimed:
                    return done
                pending = {pool.submit(self.send, item) for item in claimed}
                ids = [item.id for item in claimed]
                while pending:
                    finished, pending = wait(pending, timeout=self.lease_seconds / 3)
                    for f in finished:
                        f.result()
                    if pending:
                        self.store.renew_delivery_leases(ids, self.owner, self.lease_seconds)
                done += len(claimed)
        return done

    def send(self, item: ClaimedDelivery) -> DeliveryOutcome:
        body = item.body.encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "scalewatch-webhook/1",
            DELIVERY_HEADER: item.delivery_key,
            EVENT_HEADER: item.event,
        }
        if item.secret:
            headers[SIGNATURE_HEADER] = sign(item.secret, body)
        started = utcnow()
        t0 = time.perf_counter()
        status, error = post(item.url, body, headers, self.timeout, self.allow_private)
        ok = status is not None and 200 <= status < 300
        attempt = AttemptRecord(
            started_at=started,
            duration_ms=(time.perf_counter() - t0) * 1000.0,
            status_code=status,
            error=error,
            ok=ok,
        )
        attempts = item.attempts + 1
        created = item.created_at
        if created.tzinfo is None:
            created = created.replace(tzinfo=timezone.utc)
        age = (utcnow() - created).total_seconds()
        outcome: DeliveryOutcome
        if ok:
            outcome, next_at = "delivered", None
        elif attempts >= self.max_attempts or age >= self.max_age:
            outcome, next_at = "failed", None
            log.warning(
                "webhook %s for alert %s given up after %d attempts: %s",
                item.delivery_key,
                item.alert_id,
                attempts,
                error or f"HTTP {status}",
            )
        else:
            outcome, next_at = "retry", utcnow() + timedelta(seconds=self.delay(attempts))
        self.store.record_delivery_attempt(item.id, self.owner, attempt, outcome, next_at)
        return outcome
