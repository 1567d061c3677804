"""Request and response models of the REST API (what /docs shows), one module per concern:
``common`` (names, ids, text checks, the error shape), ``runs`` (runs, points, projects),
``fits`` (fits, comparisons, groups), ``alerts`` (rules, alerts, deliveries), ``tokens``
(tokens, health).  The routes import them from here."""

from scalewatch.server.api.schemas.alerts import (
    PARAMS_HELP,
    AlertList,
    AlertOut,
    DeliveryList,
    RuleCreate,
    RuleList,
    RuleOut,
    RulePatch,
)
from scalewatch.server.api.schemas.common import (
    ID_MAX,
    AlertState,
    ErrorOut,
    GroupName,
    Id,
    Name,
    PathId,
    RunStatus,
    not_found,
)
from scalewatch.server.api.schemas.fits import (
    CompareOut,
    CompareRun,
    Comparison,
    FitHistory,
    FitHistoryEntry,
    FitOut,
    FitRequest,
    GroupFitHistory,
    GroupFitOut,
    GroupList,
    GroupOut,
    GroupPage,
    Interval,
)
from scalewatch.server.api.schemas.runs import (
    B_PRIOR_HELP,
    NOISE_PRIOR_HELP,
    FitSettings,
    FitSummary,
    IngestResult,
    PointIn,
    PointOut,
    PointsIn,
    PointsOut,
    ProjectOut,
    ProjectPatch,
    RunCreate,
    RunList,
    RunOut,
    RunPage,
    RunPatch,
)
from scalewatch.server.api.schemas.tokens import (
    Health,
    Readiness,
    TokenCreate,
    TokenCreated,
    TokenList,
    TokenOut,
    TokenPage,
)
from scalewatch.server.domain.alerts import Delivery, DeliveryAttempt

__all__ = [
    "B_PRIOR_HELP", "ID_MAX", "NOISE_PRIOR_HELP", "PARAMS_HELP", "AlertList", "AlertOut",
    "AlertState", "CompareOut", "CompareRun", "Comparison", "Delivery", "DeliveryAttempt",
    "DeliveryList", "ErrorOut", "FitHistory", "FitHistoryEntry", "FitOut", "FitRequest",
    "FitSettings", "FitSummary", "GroupFitHistory", "GroupFitOut", "GroupList", "GroupName",
    "GroupOut", "GroupPage", "Health", "Id", "IngestResult", "Interval", "Name", "PathId",
    "PointIn", "PointOut", "PointsIn", "PointsOut", "ProjectOut", "ProjectPatch", "Readiness",
    "RuleCreate", "RuleList", "RuleOut", "RulePatch", "RunCreate", "RunList", "RunOut", "RunPage",
    "RunPatch", "RunStatus", "TokenCreate", "TokenCreated", "TokenList", "TokenOut", "TokenPage",
    "not_found",
]
