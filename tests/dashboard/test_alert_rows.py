"""The Alerts table names what an alert is about: a run, a seed of a group, or a group."""

from __future__ import annotations

from typing import Any

from scalewatch.dashboard.data import _alert_subject
from scalewatch.server.domain.alerts import Alert


def _alert(**fields: Any) -> Alert:
    base = {"id": 1, "rule_id": 1, "run_name": None, "kind": "off_curve", "state": "open",
            "message": "m", "created_at": None, "acknowledged_at": None, "resolved_at": None,
            "fit_id": None, "details": {}}
    return Alert.model_validate({**base, **fields})


def test_a_run_alert_links_its_run() -> None:
    cell = _alert_subject(_alert(run_id=7, run_name="cispo-1", project="p", group=None))
    assert cell == "[cispo\\-1](/dashboard/run/7)"


def test_a_pooled_fit_alert_links_its_group_not_a_missing_run() -> None:
    cell = _alert_subject(_alert(run_id=None, project="my proj", group="cispo 768"))
    assert "/dashboard/run/" not in cell and "None" not in cell
    assert cell == "group [cispo 768](/dashboard/group?project=my+proj&group=cispo+768)"


def test_a_seed_alert_links_the_seed_and_its_group() -> None:
    cell = _alert_subject(_alert(run_id=3, run_name="s1", project="p", group="g"))
    assert cell.startswith("[s1](/dashboard/run/3)")
    assert "(seed of [g](/dashboard/group?project=p&group=g))" in cell
