"""The one storage interface every part of the server talks to."""

from server.store.base import NotFound, Store
from server.store.sql import SqlStore

__all__ = ["NotFound", "SqlStore", "Store"]
