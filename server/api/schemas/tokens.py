"""Tokens and health: request and response models."""

from __future__ import annotations

from typing import Annotated, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, field_validator

from scalewatch.server import limits
from scalewatch.server.api.schemas.common import Name, clean_text
from scalewatch.server.domain.tokens import Token


class TokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Name
    scope: Literal["read", "write", "admin"] = "write"
    projects: list[Annotated[str, Name]] | None = Field(
        None,
        min_length=1,
        max_length=limits.MAX_TOKEN_PROJECTS,
        description="limit the token to these projects (by name); null: every project",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return clean_text(v, "name")

    @field_validator("projects")
    @classmethod
    def _projects(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else [clean_text(p, "projects") for p in v]


class TokenOut(Token):
    pass


class TokenCreated(TokenOut):
    token: str = Field(description="the secret: shown in this response only")


class TokenList(BaseModel):
    tokens: list[TokenOut]


class TokenPage(TypedDict):
    """What a handler returns as a `TokenList` (FastAPI turns the records into it)."""

    tokens: list[Token]


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: Literal["ready", "unavailable"]
    database: str | None = Field(None, description="the SQL dialect, when ready")
    detail: str | None = Field(None, description="why not, when unavailable")
