"""API tokens over HTTP (admin scope); `scalewatch token create` does the same offline."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request

from scalewatch.server.api.deps import ADMIN, AUTH_RESPONSES, UNSCOPED, StoreDep
from scalewatch.server.api.schemas import (
    PathId,
    TokenCreate,
    TokenCreated,
    TokenList,
    TokenPage,
    not_found,
)

router = APIRouter(
    prefix="/api/v1/tokens", tags=["tokens"], responses=AUTH_RESPONSES,
    dependencies=[ADMIN, UNSCOPED],
)


@router.post("", response_model=TokenCreated, status_code=201)
def create_token(body: TokenCreate, store: StoreDep) -> TokenCreated:
    """Create a token; the secret is in this response only. With `projects`, the token reads
    and writes those projects only (REST, MLflow, dashboard sessions, alerts)."""
    info, token = store.create_token(body.name, body.scope, body.projects)
    return TokenCreated(**info.model_dump(), token=token)


@router.get("", response_model=TokenList)
def list_tokens(store: StoreDep) -> TokenPage:
    """Tokens (never their secrets)."""
    return TokenPage(tokens=store.list_tokens())


@router.delete(
    "/{token_id}",
    status_code=204,
    responses=not_found("token"),
)
def revoke_token(token_id: PathId, store: StoreDep, request: Request) -> None:
    if not store.revoke_token(token_id):
        raise HTTPException(404, f"token {token_id} not found")
    request.app.state.token_cache.clear()  # revocation takes effect at once in this process
