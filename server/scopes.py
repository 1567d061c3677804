"""Token scopes and the auth cookie: shared by the REST API's auth and the dashboard's gate.

Standard library only and outside `server.api`, so the dashboard checks scopes without
importing the API package (which assembles the app and mounts the dashboard).
"""

from __future__ import annotations

SCOPES = ("read", "write", "admin")
SCOPE_RANK = {name: i for i, name in enumerate(SCOPES)}  # read < write < admin
AUTH_COOKIE = "scalewatch_token"  # the dashboard's login sets it; the API accepts it too
