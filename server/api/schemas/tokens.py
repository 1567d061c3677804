"""Tokens and health: request and response models."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from scalewatch.server.api.schemas.common import Name, clean_text


class TokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Name
    scope: Literal["read", "write", "admin"] = "write"

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return clean_text(v, "name")


class TokenOut(BaseModel):
    id: int
    name: str
    scope: str
    prefix: str
    created_at: str | None
    last_used_at: str | None
    revoked: bool


class TokenCreated(TokenOut):
    token: str = Field(description="the secret: shown in this response only")


class TokenList(BaseModel):
    tokens: list[TokenOut]


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: Literal["ready", "unavailable"]
    database: str | None = Field(None, description="the SQL dialect, when ready")
    detail: str | None = Field(None, description="why not, when unavailable")
