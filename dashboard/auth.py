"""Dashboard auth: a gate in front of the mounted Dash app and a small /login page.

When `settings.auth` is on, every `/dashboard/*` request needs read scope: an
`Authorization: Bearer` token (the REST API's tokens), or the `scalewatch_session` cookie. A
browser without one is redirected to `/login`, which checks the token and opens a server-side
session: the cookie (HttpOnly, SameSite=Lax, Secure over https) holds a random session id, never
the token, and `/logout` ends the session in the database. Revoking the token ends its sessions.
State-changing requests (Dash callbacks, login, logout) from another origin are refused: the
cookie is sent along from any page of the same site, other ports included.
"""

from __future__ import annotations

import html
from typing import Any
from urllib.parse import parse_qs, quote

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from scalewatch.server.domain.tokens import Token
from scalewatch.server.scopes import AUTH_COOKIE, SCOPE_RANK

SESSION_SECONDS = 7 * 24 * 3600  # a sign-in lasts a week (the cookie and the session row)


def token_info(state: Any, token: str | None) -> Token | None:
    """An API token's record (with its scope) or None; cached like the API's lookups."""
    if not token:
        return None
    return state.token_cache.get(state.store, token)


def request_info(
    state: Any, headers: dict[str, str], cookies: dict[str, str]
) -> Token | None:
    """Who is asking: the bearer token's record, else the session cookie's, else None.

    Header names are matched case-insensitively: starlette hands them over lower-cased, Flask
    (inside a Dash callback) as sent ("Authorization")."""
    header = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
    if header:
        kind, _, value = header.partition(" ")
        return token_info(state, value.strip()) if kind.lower() == "bearer" else None
    sid = cookies.get(AUTH_COOKIE)
    if not sid:
        return None
    return state.token_cache.get_session(state.store, sid)


def cross_origin(headers: dict[str, str]) -> bool:
    """A browser request sent by a page of another origin (scheme, host and port)."""
    if headers.get("sec-fetch-site") in ("cross-site", "same-site"):
        return True
    origin = headers.get("origin")
    if origin is None or origin == "null":
        return origin == "null"
    host = headers.get("host", "")
    return origin.split("://", 1)[-1].rstrip("/") != host


def has_scope(info: Token | None, scope: str) -> bool:
    return info is not None and SCOPE_RANK.get(info.scope, -1) >= SCOPE_RANK[scope]


def safe_next(target: str | None) -> str:
    """Only local paths: never redirect a login to another site."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/dashboard/"
    return target


class DashboardGate:
    """ASGI wrapper: checks the token before the request reaches the WSGI (Dash) app."""

    def __init__(self, inner: ASGIApp, state: Any) -> None:
        self.inner = inner
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.state.settings.auth:
            await self.inner(scope, receive, send)
            return
        request = Request(scope)
        headers = dict(request.headers)
        if request.method not in ("GET", "HEAD") and cross_origin(headers):
            response_: Response = JSONResponse(
                {"detail": "cross-origin request refused"}, status_code=403
            )
            await response_(scope, receive, send)
            return
        info = request_info(self.state, headers, dict(request.cookies))
        if has_scope(info, "read"):
            await self.inner(scope, receive, send)
            return
        path = scope.get("root_path", "") + scope.get("path", "")
        if "/_dash-" in path or request.method != "GET":
            response: Response = JSONResponse(
                {"detail": "sign in at /login (token with read scope needed)"}, status_code=401
            )
        else:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            response = RedirectResponse(f"/login?next={quote(target)}", status_code=303)
        await response(scope, receive, send)


_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>scalewatch · sign in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{{font-family:system-ui,-apple-system,Segoe UI,sans-serif;background:#f5f7fa;margin:0}}
form{{max-width:380px;margin:12vh auto;background:#fff;padding:28px 32px;border-radius:10px;
box-shadow:0 1px 4px rgba(0,0,0,.12)}}
h1{{font-size:20px;margin:0 0 6px}} p{{color:#5f6368;font-size:14px}}
input{{width:100%;box-sizing:border-box;padding:9px;font-size:14px;margin:8px 0 14px;
border:1px solid #c5cbd3;border-radius:6px}}
button{{background:#4e79a7;color:#fff;border:0;padding:9px 18px;border-radius:6px;font-size:14px;
cursor:pointer}} .err{{color:#c62828}}
</style></head><body>
<form method="post" action="/login">
<h1>scalewatch</h1>
<p>Sign in with an API token (<code>scalewatch token create --scope read</code>).</p>
{error}<label for="token">Token</label>
<input id="token" name="token" type="password" autocomplete="off" autofocus required>
<input type="hidden" name="next" value="{next}">
<button type="submit" id="login-submit">Sign in</button>
</form></body></html>"""


def login_page(next_url: str, error: str = "", status: int = 200) -> HTMLResponse:
    err = f'<p class="err" id="login-error">{html.escape(error)}</p>' if error else ""
    return HTMLResponse(
        _PAGE.format(error=err, next=html.escape(safe_next(next_url))), status_code=status
    )


def add_login_routes(app: FastAPI) -> None:
    @app.get("/login", include_in_schema=False)
    def login_form(request: Request, next: str = "/dashboard/") -> Response:  # noqa: A002
        if not request.app.state.settings.auth:
            return RedirectResponse(safe_next(next), status_code=303)
        return login_page(next)

    @app.post("/login", include_in_schema=False)
    async def login_submit(request: Request) -> Response:
        if cross_origin(dict(request.headers)):  # login CSRF: signing a victim in as us
            return JSONResponse({"detail": "cross-origin request refused"}, status_code=403)
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        token = (form.get("token") or [""])[0].strip()
        target = safe_next((form.get("next") or ["/dashboard/"])[0])
        info = token_info(request.app.state, token)
        opened = (
            await run_in_threadpool(request.app.state.store.create_session, token, SESSION_SECONDS)
            if has_scope(info, "read")
            else None
        )
        if opened is None:
            return login_page(target, "Unknown or revoked token.", status=401)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            AUTH_COOKIE,
            opened[0],
            max_age=SESSION_SECONDS,
            httponly=True,
            samesite="lax",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    @app.api_route("/logout", methods=["GET", "POST"], include_in_schema=False)
    def logout(request: Request) -> Response:
        sid = request.cookies.get(AUTH_COOKIE)
        if sid:
            # Ended in the database, not just forgotten by this browser: a copied cookie
            # stops working too.
            request.app.state.store.end_session(sid)
            request.app.state.token_cache.clear()
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(AUTH_COOKIE, path="/")
        return response
