"""Groups (recipes) between the engine and the rest: the fit options of a group, the record the
store keeps and the API returns, and the read path ("latest group fit, else queue one").

Shared by the group refitter (`server/refit/groups.py`), the REST API and group alerts, so a
group fit looks the same everywhere. A group's members are the runs of one project sharing
`group`; one metric is fitted for all of them (given, else their common fit metric).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from scalewatch.server.domain.runs import FitInputs
from scalewatch.server.fitting import FitOptions, FitResult
from scalewatch.server.services.compare import Fitted, MixedMetrics, common_metric
from scalewatch.server.services.fits import fit_options_for, fit_record, not_fitted, public_fit
from scalewatch.server.store.base import GroupStore
from scalewatch.server.store.fit_records import FitRecord


def group_metric(group: str, members: Sequence[Fitted], metric: str | None) -> str:
    """`metric` when given, else the members' common fit metric; `MixedMetrics` (a 422)
    naming each member's metric when they differ."""
    try:
        found = common_metric(members, metric)
    except MixedMetrics as exc:
        raise MixedMetrics(f"the runs of group {group!r} are fitted on different metrics"
                           f"{str(exc).partition('metrics')[2]}") from None
    return found or "val_pass_rate"


def group_options(members: list[dict[str, Any]], intervals: bool = True) -> FitOptions:
    """One set of options for the pooled fit: each member keeps its own R0 (`GroupMember.r0`);
    the target is the largest of the members' targets; the window is the one every member's
    settings allow (the latest warmup, the earliest fit_until) and A may take any value some
    member's range allows; the drift allowance is the project's (the same for every member)."""
    opts = ([fit_options_for(member_context(m), intervals) for m in members]
            or [FitOptions(intervals=intervals)])
    targets = [o.target_compute for o in opts if o.target_compute is not None]
    untils = [o.fit_until for o in opts if o.fit_until is not None]
    return FitOptions(
        warmup=max(o.warmup for o in opts),
        fit_until=min(untils) if untils else None,
        target_compute=max(targets) if targets else None,
        value_range=(min(o.value_range[0] for o in opts), max(o.value_range[1] for o in opts)),
        intervals=intervals,
        drift_rate=opts[0].drift_rate,
        drift_allowance=opts[0].drift_allowance,
    )


def member_context(member: Mapping[str, Any]) -> FitInputs:
    """A member of a group snapshot (`GroupStore.group_snapshot`: its settings, target, status
    and the project's hindcasts beside its points) as what its fit options come from."""
    return FitInputs.model_validate(member)


def member_r0(member: dict[str, Any]) -> float | None:
    r0 = (member.get("fit_settings") or {}).get("r0")
    return None if r0 is None else float(r0)


def group_record(
    result: Any, members: list[dict[str, Any]], *, group: str, metric: str, **extra: Any
) -> FitRecord:
    """A `GroupFitResult` as a stored record: the pooled result object (as a run's fit, with
    its `message`), `members` (each run's id and name, its own fit and how it sits against the
    recipe's curve) and `seed_spread`."""
    d = result.to_dict(internal=True)
    record: dict[str, Any] = {**d, "message": result.pooled.message, "metric": metric,
                              "group": group}
    infos = list(getattr(result, "member_info", ()) or ())
    out_members = []
    for i, (m, fitted) in enumerate(zip(members, d.get("members") or [], strict=False)):
        entry = dict(fitted)  # with its internal block: the next fit warm-starts from it
        if i < len(result.members):
            entry["message"] = result.members[i].message
        if i < len(infos):
            entry.update(infos[i])
        out_members.append({"run_id": m["id"], "name": m["name"], **entry})
    record["members"] = out_members
    record.update(extra)
    return cast(FitRecord, record)


def failed_group_record(message: str, members: list[dict[str, Any]], options: FitOptions, *,
                        group: str, metric: str, **extra: Any) -> FitRecord:
    """What is stored when the engine raised on a group: readers see why, not `pending`."""
    result = FitResult(status="insufficient_data", message=message[:500],
                       n_points=sum(len(m.get("values") or ()) for m in members),
                       target_compute=options.target_compute, value_range=options.value_range)
    record = fit_record(result, metric=metric, group=group, **extra)
    cast(dict[str, Any], record).update(
        members=[{"run_id": m["id"], "name": m["name"], "status": "insufficient_data"}
                 for m in members],
        seed_spread={"n": 0, "sd": None, "ci": None, "members_A_sd": None},
    )
    return record


def latest_group_or_pending(
    store: GroupStore, project: str, group: str, metric: str | None
) -> FitRecord:
    """The latest stored fit of a group's metric, never fitting here: like a run's fit, a
    metric without a stored fit answers `pending` (queued) or `insufficient_data` (no member
    has points of it), and a fit older than a member's newest points queues a refit.
    Raises `NotFound` for an unknown project or group, `MixedMetrics` for members fitted on
    different metrics when no metric is given."""
    members = store.group_members(project, group)
    name = group_metric(group, members, metric)
    stored = store.latest_group_fit(project, group, name)
    queued = store.request_group_fit(project, group, name)
    if stored is None:
        record = cast(dict[str, Any], not_fitted(name, queued))
        record.update(group=group, members=[
            {"run_id": m.id, "name": m.name, "status": record["status"]} for m in members
        ], seed_spread=None)
        return cast(FitRecord, record)
    return stored


def public_group_fit(stored: FitRecord, project: str) -> dict[str, Any]:
    """What the API returns: the record without the engine's internal blocks."""
    out: dict[str, Any] = dict(public_fit(stored) or {})
    out["project"] = project
    return out
