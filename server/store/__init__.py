"""The one storage interface every part of the server talks to."""

from scalewatch.server.store.base import NotFound, Store
from scalewatch.server.store.sql import SqlStore

__all__ = ["NotFound", "SqlStore", "Store"]
