"""Group refits: after the series, the refitter fits the groups whose members changed.

A member's points, the membership or a member's settings bump the group's counter in the
transaction that changes them (`server/store/group_marks.py`); here dirty groups are claimed
with a lease (never two workers on one group, across processes), every member's points of the
group's metric are read from one snapshot, `fit_group` fits the recipe and its seeds, the fit
is stored as history and group listeners (alerts) are told. Bursts coalesce like series: the
next claim fits the group once more, however many changes arrived meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

import numpy as np

from scalewatch.server.fitting import FitOptions, FitResult
from scalewatch.server.fitting.fit import prepare
from scalewatch.server.fitting.group import GroupFitResult, GroupMember, fit_group
from scalewatch.server.fitting.noise_prior import prior_record
from scalewatch.server.services.fits import fit_options_for, prior_source
from scalewatch.server.services.groups import (
    failed_group_record,
    group_options,
    group_record,
    member_context,
    member_r0,
)
from scalewatch.server.store.base import DirtyGroup, GroupStore
from scalewatch.server.store.fit_records import FitRecord

log = logging.getLogger("scalewatch.refit")

# (the claimed group, its members, the stored group fit, the group fit before it)
GroupFitListener = Callable[[DirtyGroup, list[dict[str, Any]], FitRecord, FitRecord | None],
                            None]


def _warm(previous: FitRecord | None, members: list[dict[str, Any]]) -> GroupFitResult | None:
    """The previous group fit as a warm start, only when it had the same members in the same
    order (a seed's fit must not warm-start another's)."""
    if not previous or previous.get("status") == "pending":
        return None
    record = cast(dict[str, Any], previous)  # a group record: FitRecord plus `members`
    ids = [m.get("run_id") for m in record.get("members") or []]
    if ids != [m["id"] for m in members]:
        return None
    try:
        return GroupFitResult.from_dict(previous)
    except (KeyError, TypeError, ValueError):
        return None


def reusable_run_fit(member: dict[str, Any], options: FitOptions) -> FitResult | None:
    """The member's stored run fit when it is what `fit_group` would compute for it: made with
    the same window, range, R0 and target as the group's options give this member, and on
    exactly the points of the snapshot.  Then the group refit pools it instead of fitting the
    seed again (the refitter has just fitted each seed's series on its own)."""
    stored = member.get("run_fit")
    if not stored or stored.get("status") == "pending":
        return None
    own = fit_options_for(member_context(member))
    if ((own.warmup, own.fit_until, tuple(own.value_range), own.target_compute)
            != (options.warmup, options.fit_until, tuple(options.value_range),
                options.target_compute)):
        return None
    try:
        fit = FitResult.from_dict(stored)
    except (KeyError, TypeError, ValueError):
        return None
    # A run fit made with a noise or B prior is not what the group's fit of this seed uses
    # (the group gives its seeds no prior), and vice versa: refit rather than mix the two.
    used, wanted = fit.prior or {}, prior_record(options.noise_prior, options.b_prior) or {}
    if (used.get("rho"), used.get("B")) != (wanted.get("rho"), wanted.get("B")):
        return None
    prep = prepare(np.asarray(member["compute"], dtype=float),
                   np.asarray(member["values"], dtype=float),
                   replace(options, r0=member_r0(member)))
    if fit.n_points != prep.y.size or tuple(fit.fit_range or ()) != tuple(prep.fit_range or ()):
        return None
    return fit


class GroupRefits:
    """The group half of the refitter: `Refitter.run_once` alternates series claims and
    `run_batch`."""

    def __init__(
        self,
        store: GroupStore,
        owner: str,
        lease_seconds: float,
        listeners: list[GroupFitListener] | None = None,
        count: Callable[[bool], None] | None = None,
    ) -> None:
        self.store = store
        self.owner = owner
        self.lease_seconds = lease_seconds
        self.listeners = listeners or []
        self.count = count
        self.member_fits_reused = 0  # seeds pooled from their stored run fit (not refitted)

    def run_batch(self) -> int:
        """Claim and fit up to four dirty groups; returns how many were fitted."""
        claimed = self.store.claim_dirty_groups(self.owner, self.lease_seconds, limit=4)
        for item in claimed:
            self.refit(item)
        return len(claimed)

    def refit(self, item: DirtyGroup) -> None:
        try:
            requested, members = self.store.group_snapshot(item.group_series_id)
            previous = self.store.latest_group_fit(item.project, item.group, item.metric)
        except Exception:  # noqa: BLE001 - a bad group must not stop the others
            log.exception("loading group %s/%s to fit failed", item.project, item.group)
            self.store.finish_group_refit(item.group_series_id, self.owner, item.requested,
                                          None, False)
            return
        requested = max(requested, item.requested)
        if not members:  # the group has no members left: nothing to fit, nothing to show
            self.store.finish_group_refit(item.group_series_id, self.owner, requested, None,
                                          False)
            return
        options = group_options(members)
        t0 = time.perf_counter()
        ok = True
        try:
            reused = [reusable_run_fit(m, options) for m in members]
            self.member_fits_reused += sum(f is not None for f in reused)
            result = fit_group(
                [GroupMember(np.asarray(m["compute"], dtype=float),
                             np.asarray(m["values"], dtype=float),
                             np.asarray(m["steps"], dtype=np.int64), r0=member_r0(m),
                             target_compute=m.get("target_compute"), fit=f)
                 for m, f in zip(members, reused, strict=True)],
                options, previous=_warm(previous, members),
            )
            stored = prior_source(  # the project's drift allowance, named as a run's is
                group_record(result, members, group=item.group, metric=item.metric,
                             fit_seconds=round(time.perf_counter() - t0, 4)),
                member_context(members[0]), options)
        except Exception as exc:  # noqa: BLE001 - stored as the group's fit, like a series'
            log.exception("fit of group %s/%s failed", item.project, item.group)
            ok = False
            stored = failed_group_record(f"fit failed: {type(exc).__name__}: {exc}", members,
                                         options, group=item.group, metric=item.metric)
        fit_id = self.store.finish_group_refit(
            item.group_series_id, self.owner, requested, stored, options.intervals and ok,
            n_members=len(members),
        )
        if self.count is not None:
            self.count(ok)
        if fit_id is None:  # the lease was lost: another worker fits it
            return
        stored["fit_id"] = fit_id
        for listener in self.listeners:
            try:
                listener(item, members, stored, previous)
            except Exception:  # noqa: BLE001 - alerts failing must not affect fitting
                log.exception("group fit listener %r failed", listener)

