"""SqlStore: the SQLAlchemy implementation of the Store interface (SQLite and PostgreSQL).

Split by concern into mixins so each module stays small; all extend `SqlBase` (engine,
`session()`), which `SqlStore` initialises once.
"""

from __future__ import annotations

from scalewatch.server.store.alerts_sql import AlertsMixin
from scalewatch.server.store.fits_sql import FitsMixin
from scalewatch.server.store.groups_sql import GroupsMixin
from scalewatch.server.store.outbox_sql import OutboxMixin
from scalewatch.server.store.points_sql import PointsMixin
from scalewatch.server.store.rollup_sql import RollupMixin
from scalewatch.server.store.runs_sql import RunsMixin
from scalewatch.server.store.tokens_sql import TokensMixin


# AlertsMixin first: its `_delete_run_dependents` runs before the (empty) SqlBase hook.
class SqlStore(
    AlertsMixin, OutboxMixin, RunsMixin, PointsMixin, RollupMixin, FitsMixin, GroupsMixin,
    TokensMixin,
):
    """Every store protocol of `scalewatch.server.store.base`, on one engine."""
