"""Asking the server once, before a command starts work, whether it takes the run.

``scalewatch import`` and ``scalewatch follow`` register their run with one request
(``POST /api/v1/runs``, create-or-get) before reading or following anything, so that a wrong
token, a token of too small a scope, a URL that is no scalewatch server or a run the server
refuses ends the command at once with the reason, instead of points piling up in a spool that
the server will never take. What happens when the server cannot be reached is each command's
choice: ``import`` stops (nothing was sent; run it again when the server is up), ``follow``
goes on (its points are spooled and sent once the server answers).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._http import Connection, TransportError, error_text, is_retryable_status

__all__ = ["ServerAnswer", "check_server", "DEFINITIVE"]

# Refusals that asking again will not change, with what to do about them.
DEFINITIVE = {
    401: "the token is missing or unknown: pass --token or set SCALEWATCH_TOKEN",
    403: "the token may not do this: a write token is needed",
    404: "is this the URL of a scalewatch server?",
    422: "the server refuses the run as described",
}
RETRIES = 3  # answers worth retrying (408, 429, 5xx): a few quick tries, then give up


@dataclass
class ServerAnswer:
    run_id: int | None = None
    refused: str | None = None  # a definitive refusal, with the reason and what to do
    unreachable: str | None = None  # no answer (or only 5xx/429/408), and why

    @property
    def ok(self) -> bool:
        return self.run_id is not None


def check_server(url: str, token: str | None, body: Mapping[str, Any],
                 timeout: float = 10.0, retries: int = RETRIES) -> ServerAnswer:
    """Register the run described by ``body`` (create-or-get) and say how it went."""
    conn = Connection(url, token, timeout=timeout)
    try:
        for attempt in range(retries):
            if attempt:
                time.sleep(min(4.0, 0.5 * 2 ** attempt))
            try:
                r = conn.post_json("/api/v1/runs", dict(body))
            except TransportError as exc:
                return ServerAnswer(unreachable=f"cannot reach the scalewatch server at {url} "
                                                f"({exc})")
            except ValueError as exc:  # a body json cannot encode (checked before: rare)
                return ServerAnswer(refused=f"the run cannot be sent: {exc}")
            if r.status in (200, 201):
                try:
                    return ServerAnswer(run_id=int(r.json()["id"]))
                except (ValueError, KeyError, TypeError):
                    return ServerAnswer(refused=f"{url} answered, but not as a scalewatch "
                                                f"server does ({error_text(r, 120)})")
            if r.status in DEFINITIVE:
                return ServerAnswer(refused=f"{url} refused run {body.get('project')}/"
                                            f"{body.get('name')}: {error_text(r)}; "
                                            f"{DEFINITIVE[r.status]}")
            if not is_retryable_status(r.status):
                return ServerAnswer(refused=f"{url} refused run {body.get('project')}/"
                                            f"{body.get('name')}: {error_text(r)}")
        return ServerAnswer(unreachable=f"the scalewatch server at {url} is not answering "
                                        f"requests ({error_text(r)})")
    finally:
        conn.close()
