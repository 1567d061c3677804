"""Every registered alert kind, through every hook it registers, raises an alert and resolves it
through the real evaluation path: fits stored by the real store (leased and finished as the
refitter does), then the alert service's listeners and timer (`AlertService.on_fit`,
`on_group_fit`, `check_stalled`) reading that store. A kind or hook added to the registry
without a scenario here fails `test_every_kind_and_hook_has_a_scenario`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update

from scalewatch.server.alerts.kinds import KINDS
from scalewatch.server.alerts.service import AlertService
from scalewatch.server.db.models import Run, utcnow
from scalewatch.server.domain.alerts import Alert, AlertKind
from scalewatch.server.services.runs import fit_context
from scalewatch.server.store.base import DirtyGroup

METRIC = "m"
A0, B, C_MID, R0 = 0.61, 1.9, 2500.0, 0.1
HOOKS = ("on_run_fit", "on_group_fit", "on_group_seeds", "on_timer")


def curve(c: float, a: float = A0) -> float:
    return R0 + (a - R0) / (1 + (C_MID / c) ** B)


def record(a: float, lo: float, hi: float, max_compute: float) -> dict[str, Any]:
    """An `ok` fit with an A interval, as the refitter stores one."""
    return {"status": "ok", "A": a, "B": B, "C_mid": C_MID, "R0": R0, "r0_source": "fitted",
            "ci": {"A": [lo, hi]}, "n_points": 10, "fit_range": [100.0, max_compute],
            "rmse": 0.005, "method": "default", "metric": METRIC}


class World:
    """A project `p` on the real store, and the alert service that evaluates its rules."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.store = api.app.state.store
        self.service = AlertService(self.store, "http://sw.example")
        self.step = 0

    def run(self, name: str, group: str | None = None) -> int:
        body = {"project": "p", "name": name, "fit_metric": METRIC, "group": group}
        r = self.api.post("/api/v1/runs", json={k: v for k, v in body.items() if v is not None})
        assert r.status_code in (200, 201), r.text
        return int(r.json()["id"])

    def points(self, run_id: int, values: list[tuple[float, float]]) -> None:
        pts = []
        for c, y in values:
            self.step += 1
            pts.append({"step": self.step, "compute": c, "metrics": {METRIC: y}})
        r = self.api.post(f"/api/v1/runs/{run_id}/points", json={"points": pts})
        assert r.status_code == 200, r.text

    def store_fit(self, run_id: int, fit: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Lease the run's series and store `fit` as its newest fit (as the refitter does)."""
        self.store.request_fit(run_id, METRIC, force=True)
        claimed = self.store.claim_dirty_series("test", lease_seconds=0.001, limit=100)
        (item,) = [d for d in claimed if d.run_id == run_id]
        fit_id = self.store.finish_refit(item.series_id, "test", item.requested, fit, True)
        assert fit_id is not None
        return item.series_id, {**fit, "fit_id": fit_id}

    def run_fit(self, run_id: int, fit: dict[str, Any]) -> None:
        """A new fit of the run: stored, then handed to the listener."""
        series_id, stored = self.store_fit(run_id, fit)
        context = fit_context(self.store, run_id)  # the refitter's own context of the run
        assert context.fit_metric == METRIC
        self.service.on_fit(context, series_id, stored, None)

    def group_fit(self, group: str, fit: dict[str, Any]) -> None:
        """A new pooled fit of the group, on a newer point of a seed: stored, then handed to
        the group listener."""
        seed = self.store.group_members("p", group)[0].id
        self.points(seed, [(2000.0 + 10 * self.step, curve(2000.0))])
        assert self.store.request_group_fit("p", group, METRIC)
        claimed = self.store.claim_dirty_groups("test", lease_seconds=0.001, limit=100)
        (item,) = [d for d in claimed if d.group == group]
        fit_id = self.store.finish_group_refit(item.group_series_id, "test", item.requested,
                                               fit, True, n_members=len(fit.get("members", [])))
        item = DirtyGroup(item.group_series_id, item.project_id, item.project, item.group,
                          item.metric, item.requested)
        members = [m.model_dump() for m in self.store.group_members("p", group)]
        self.service.on_group_fit(item, members, {**fit, "fit_id": fit_id}, None)

    def rule(self, kind: str, params: dict[str, Any], **target: Any) -> int:
        r = self.api.post("/api/v1/alert-rules",
                          json={"project": "p", "kind": kind, "params": params, **target})
        assert r.status_code == 201, r.text
        return int(r.json()["id"])

    def alerts(self, rule_id: int) -> list[Alert]:
        found, _ = self.store.list_alerts(project="p")
        return [a for a in found if a.rule_id == rule_id]


@dataclass(frozen=True)
class Scenario:
    """Sets a rule up, makes its condition hold, then makes it clear; returns the rule id."""

    setup: Callable[[World], tuple[int, Callable[[], None], Callable[[], None]]]


def _drop_on_run(w: World) -> tuple[int, Callable[[], None], Callable[[], None]]:
    rid = w.run("drop")
    w.points(rid, [(c, curve(c)) for c in (500.0, 1000.0, 2000.0)])
    w.run_fit(rid, record(0.61, 0.60, 0.62, 2000.0))  # the run's best claim
    rule = w.rule("asymptote_drop", {"delta": 0.02}, run_id=rid)
    return (rule, lambda: w.run_fit(rid, record(0.55, 0.54, 0.56, 2000.0)),
            lambda: w.run_fit(rid, record(0.61, 0.60, 0.62, 2000.0)))


def _below_on_run(w: World) -> tuple[int, Callable[[], None], Callable[[], None]]:
    rid = w.run("below")
    w.points(rid, [(c, curve(c)) for c in (500.0, 1000.0)])
    rule = w.rule("asymptote_below", {"threshold": 0.7}, run_id=rid)
    return (rule, lambda: w.run_fit(rid, record(0.61, 0.60, 0.62, 1000.0)),
            lambda: w.run_fit(rid, record(0.75, 0.72, 0.78, 1000.0)))


def _baseline_on_run(w: World) -> tuple[int, Callable[[], None], Callable[[], None]]:
    base, rid = w.run("baseline"), w.run("candidate")
    for run in (base, rid):
        w.points(run, [(c, curve(c)) for c in (500.0, 1000.0)])
    w.store_fit(base, record(0.70, 0.69, 0.71, 1000.0))
    rule = w.rule("below_baseline", {"baseline_run_id": base}, run_id=rid)
    return (rule, lambda: w.run_fit(rid, record(0.61, 0.60, 0.62, 1000.0)),
            lambda: w.run_fit(rid, record(0.72, 0.70, 0.74, 1000.0)))


def _off_curve_on_run(w: World) -> tuple[int, Callable[[], None], Callable[[], None]]:
    rid = w.run("collapse")
    w.points(rid, [(c, curve(c)) for c in (500.0, 1000.0, 2000.0, 3000.0)])
    w.store_fit(rid, record(0.61, 0.60, 0.62, 3000.0))  # the curve before the newest points
    rule = w.rule("off_curve", {"n": 3, "k": 4.0}, run_id=rid)

    def collapse() -> None:  # three points far below the curve, all on one side
        w.points(rid, [(c, curve(c) - 0.2) for c in (4000.0, 5000.0, 6000.0)])
        w.run_fit(rid, record(0.61, 0.60, 0.62, 6000.0))

    def recover() -> None:  # three newer points back on the curve
        w.points(rid, [(c, curve(c)) for c in (7000.0, 8000.0, 9000.0)])
        w.run_fit(rid, record(0.61, 0.60, 0.62, 9000.0))

    return rule, collapse, recover


def _stalled_on_timer(w: World) -> tuple[int, Callable[[], None], Callable[[], None]]:
    rid = w.run("quiet")
    w.points(rid, [(500.0, curve(500.0))])
    rule = w.rule("stalled", {"minutes": 1.0}, run_id=rid)

    def go_quiet() -> None:
        with w.store.session() as s:
            s.execute(update(Run).where(Run.id == rid)
                      .values(last_seen_at=utcnow() - timedelta(minutes=5)))
        w.service.check_stalled()

    def speak() -> None:
        w.points(rid, [(600.0, curve(600.0))])
        w.service.check_stalled()

    return rule, go_quiet, speak


def _group(w: World, name: str) -> list[int]:
    seeds = [w.run(f"{name}-s{i}", group=name) for i in (1, 2)]
    for run in seeds:
        w.points(run, [(c, curve(c)) for c in (500.0, 1000.0, 2000.0)])
    return seeds


def _drop_on_group(w: World) -> tuple[int, Callable[[], None], Callable[[], None]]:
    _group(w, "gd")
    w.group_fit("gd", record(0.61, 0.60, 0.62, 2000.0))  # the group's best claim
    rule = w.rule("asymptote_drop", {"delta": 0.02}, group="gd")
    return (rule, lambda: w.group_fit("gd", record(0.55, 0.54, 0.56, 2000.0)),
            lambda: w.group_fit("gd", record(0.61, 0.60, 0.62, 2000.0)))


def _below_on_group(w: World) -> tuple[int, Callable[[], None], Callable[[], None]]:
    _group(w, "gb")
    rule = w.rule("asymptote_below", {"threshold": 0.7}, group="gb")
    return (rule, lambda: w.group_fit("gb", record(0.61, 0.60, 0.62, 2000.0)),
            lambda: w.group_fit("gb", record(0.75, 0.72, 0.78, 2000.0)))


def _seed_off_group(w: World) -> tuple[int, Callable[[], None], Callable[[], None]]:
    seeds = _group(w, "gs")
    rule = w.rule("seed_off_curve", {}, group="gs")

    def pooled(off: bool) -> dict[str, Any]:
        members = [{"run_id": s, "name": f"gs-s{i}", "off_curve": off and i == 1,
                    "reason": "it broke" if off and i == 1 else "", "included": True}
                   for i, s in enumerate(seeds, 1)]
        return {**record(0.61, 0.60, 0.62, 2000.0), "members": members}

    return (rule, lambda: w.group_fit("gs", pooled(True)),
            lambda: w.group_fit("gs", pooled(False)))


SCENARIOS: dict[tuple[AlertKind, str], Scenario] = {
    (AlertKind.asymptote_drop, "on_run_fit"): Scenario(_drop_on_run),
    (AlertKind.asymptote_drop, "on_group_fit"): Scenario(_drop_on_group),
    (AlertKind.asymptote_below, "on_run_fit"): Scenario(_below_on_run),
    (AlertKind.asymptote_below, "on_group_fit"): Scenario(_below_on_group),
    (AlertKind.below_baseline, "on_run_fit"): Scenario(_baseline_on_run),
    (AlertKind.off_curve, "on_run_fit"): Scenario(_off_curve_on_run),
    (AlertKind.stalled, "on_timer"): Scenario(_stalled_on_timer),
    (AlertKind.seed_off_curve, "on_group_seeds"): Scenario(_seed_off_group),
}
REGISTERED = [(kind, hook) for kind, spec in KINDS.items() for hook in HOOKS
              if getattr(spec, hook) is not None]


def test_every_kind_and_hook_has_a_scenario() -> None:
    assert sorted(SCENARIOS) == sorted(REGISTERED)


@pytest.mark.parametrize(("kind", "hook"), REGISTERED,
                         ids=[f"{k.value}-{h}" for k, h in REGISTERED])
def test_each_kind_raises_and_resolves_through_the_evaluation(api: Any, kind: AlertKind,
                                                              hook: str) -> None:
    w = World(api)
    rule, fire, clear = SCENARIOS[(kind, hook)].setup(w)
    assert w.alerts(rule) == []
    fire()
    opened = w.alerts(rule)
    assert [(a.kind, a.state) for a in opened] == [(kind, "open")], opened
    assert opened[0].message
    fire()  # still true: no second alert
    assert len(w.alerts(rule)) == 1
    clear()
    assert [(a.id, a.state) for a in w.alerts(rule)] == [(opened[0].id, "resolved")]
