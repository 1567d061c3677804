"""API tokens: the record the store keeps (never the secret, which is shown once)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Token(BaseModel):
    """A token's record: what authentication, the token list and dashboard sessions read."""

    model_config = ConfigDict(frozen=True)
    id: int
    name: str
    scope: str
    prefix: str
    created_at: str | None
    last_used_at: str | None
    revoked: bool
    projects: list[str] | None = Field(None, description="the projects it is limited to; null: all")
