"""Request guards that apply to every route (pure ASGI: no cost to streamed ingest bodies)."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send


class RejectNulMiddleware:
    """422 for a NUL in the query string: PostgreSQL text cannot hold it, so no filter can match
    it, and letting it through would turn a bad request into a database error."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and b"%00" in scope.get("query_string", b""):
            body = json.dumps({"detail": "query parameters must not contain NUL characters"})
            await send(
                {
                    "type": "http.response.start",
                    "status": 422,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body.encode()})
            return
        await self.app(scope, receive, send)
