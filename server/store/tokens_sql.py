"""API tokens: created once and shown once, stored as SHA-256 digests."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta, timezone

from sqlalchemy import delete, func, select, update

from scalewatch.server.db.models import ApiToken, DashboardSession, utcnow
from scalewatch.server.domain.tokens import Token
from scalewatch.server.limits import MAX_NAME_LENGTH, MAX_TOKEN_PROJECTS
from scalewatch.server.scopes import SCOPES
from scalewatch.server.store.common import SqlBase, iso

TOKEN_PREFIX = "sw_"
SESSION_PREFIX = "sws_"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokensMixin(SqlBase):
    def create_token(
        self, name: str, scope: str, projects: list[str] | None = None
    ) -> tuple[Token, str]:
        """A new token (its record, the secret shown once). `projects`: the project names it is
        limited to; None, every project (an empty list is refused: a token for nothing)."""
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {', '.join(SCOPES)}")
        if projects is not None:
            projects = list(dict.fromkeys(projects))
            if not projects or len(projects) > MAX_TOKEN_PROJECTS:
                raise ValueError(f"a token is limited to 1 to {MAX_TOKEN_PROJECTS} projects")
            for p in projects:
                if not p.strip() or len(p) > MAX_NAME_LENGTH or "\x00" in p:
                    raise ValueError(f"project {p!r} is not a project name")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self.session() as s:
            row = ApiToken(
                name=name,
                scope=scope,
                token_hash=hash_token(token),
                prefix=token[:10],
                created_at=utcnow(),
                revoked=False,
                projects=projects,
            )
            s.add(row)
            s.flush()
            return self._token(row), token

    def lookup_token(self, token: str) -> Token | None:
        with self.session() as s:
            row = s.scalar(select(ApiToken).where(ApiToken.token_hash == hash_token(token)))
            if row is None or row.revoked:
                return None
            return self._token(row)

    def list_tokens(self) -> list[Token]:
        with self.session() as s:
            return [self._token(t) for t in s.scalars(select(ApiToken).order_by(ApiToken.id))]

    def revoke_token(self, token_id: int) -> bool:
        with self.session() as s:
            res = s.execute(update(ApiToken).where(ApiToken.id == token_id).values(revoked=True))
            return bool(getattr(res, "rowcount", 0))  # a CursorResult for an UPDATE

    def count_tokens(self) -> int:
        with self.session() as s:
            return (
                s.scalar(select(func.count()).select_from(ApiToken).where(~ApiToken.revoked)) or 0
            )

    # ---- dashboard sessions ------------------------------------------------------------------
    def create_session(self, token: str, seconds: float) -> tuple[str, Token] | None:
        """Open a session for a valid token: (session id, token record); None if the token is
        unknown or revoked. The id is shown once (the cookie); only its digest is stored."""
        sid = SESSION_PREFIX + secrets.token_urlsafe(32)
        now = utcnow()
        with self.session() as s:
            row = s.scalar(select(ApiToken).where(ApiToken.token_hash == hash_token(token)))
            if row is None or row.revoked:
                return None
            # Expired sessions are swept here, where sessions are made, not on a timer.
            s.execute(delete(DashboardSession).where(DashboardSession.expires_at < now))
            s.add(
                DashboardSession(
                    session_hash=hash_token(sid),
                    token_id=row.id,
                    created_at=now,
                    expires_at=now + timedelta(seconds=seconds),
                )
            )
            return sid, self._token(row)

    def lookup_session(self, session_id: str) -> Token | None:
        """The token record behind a live session (not expired, token not revoked), or None."""
        with self.session() as s:
            found = s.execute(
                select(ApiToken, DashboardSession.expires_at)
                .join(DashboardSession, DashboardSession.token_id == ApiToken.id)
                .where(DashboardSession.session_hash == hash_token(session_id))
            ).first()
            if found is None:
                return None
            token, expires = found
            if expires.tzinfo is None:  # SQLite hands back naive UTC datetimes
                expires = expires.replace(tzinfo=timezone.utc)
            if token.revoked or expires <= utcnow():
                return None
            return self._token(token)

    def end_session(self, session_id: str) -> bool:
        with self.session() as s:
            res = s.execute(
                delete(DashboardSession).where(
                    DashboardSession.session_hash == hash_token(session_id)
                )
            )
            return bool(getattr(res, "rowcount", 0))

    @staticmethod
    def _token(t: ApiToken) -> Token:
        return Token(
            id=t.id,
            name=t.name,
            scope=t.scope,
            prefix=t.prefix,
            created_at=iso(t.created_at),
            last_used_at=iso(t.last_used_at),
            revoked=t.revoked,
            # None: every project. Carried by the token cache with the scope.
            projects=list(t.projects) if t.projects is not None else None,
        )
