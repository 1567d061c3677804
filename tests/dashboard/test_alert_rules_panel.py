"""The Alerts page's Rules panel: rows as a token's scope may see them, and the New rule form
checked as the API checks a rule."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from scalewatch.dashboard.alert_rules import new_rule, param_inputs, rule_rows
from scalewatch.server.services.alert_rules import InvalidRule

SLACK = "https://hooks.slack.com/services/T0/B0/secret-part"
RULES = [
    {"id": 1, "project": "p", "run_id": None, "group": None, "kind": "asymptote_drop",
     "params": {"delta": 0.02}, "webhook_url": SLACK, "has_secret": True, "enabled": True,
     "created_at": "2026-12-02T07:25:11.317394+00:00"},
    {"id": 2, "project": "p", "run_id": 7, "group": None, "kind": "off_curve",
     "params": {"n": 3, "k": 4.0}, "webhook_url": None, "has_secret": False, "enabled": False,
     "created_at": None},
    {"id": 3, "project": "p q", "run_id": None, "group": "8gen", "kind": "seed_off_curve",
     "params": {}, "webhook_url": None, "has_secret": False, "enabled": True,
     "created_at": None},
]


def test_a_webhook_is_shown_whole_to_admins_only() -> None:
    admin = rule_rows(RULES, {}, "admin")
    assert admin[0]["webhook"] == SLACK + " (signed)"
    for scope in ("write", "read", ""):
        row = rule_rows(RULES, {}, scope)[0]
        assert "secret-part" not in row["webhook"]
        assert row["webhook"] == "https://hooks.slack.com/… (signed)"


def test_rows_say_what_each_rule_watches_with_links() -> None:
    rows = rule_rows(RULES, {7: "my[run]"}, "admin")
    assert rows[0]["watches"] == "every run of the project"
    assert rows[1]["watches"] == r"[my\[run\]](/dashboard/run/7)"  # the name escaped
    assert rows[2]["watches"] == "group [8gen](/dashboard/group?project=p+q&group=8gen)"
    assert [r["enabled"] for r in rows] == ["on", "off", "on"]
    assert [r["params"] for r in rows] == ["delta 0.02", "n 3, k 4", "—"]
    assert rows[0]["created_at"] == "2026-12-02 07:25:11"
    assert rule_rows(RULES, {}, "admin")[1]["watches"] == "[run 7](/dashboard/run/7)"


def test_the_form_shows_one_box_per_parameter_with_its_default() -> None:
    boxes = [c for c in param_inputs("off_curve") if getattr(c, "placeholder", None)]
    assert [(b.id["name"], b.placeholder) for b in boxes] == [("n", "3"), ("k", "4")]
    required = [c for c in param_inputs("asymptote_below") if hasattr(c, "placeholder")]
    assert required[0].placeholder == "required"
    assert param_inputs(None) == [] and param_inputs("nonsense") == []


def test_the_form_becomes_the_apis_request_or_says_what_is_wrong() -> None:
    body = new_rule("p", "run:12", "asymptote_drop", {"delta": None}, "", None)
    assert (body.project, body.run_id, body.group, body.params) == ("p", 12, None, {})
    body = new_rule("p", "group:8gen", "seed_off_curve", {}, None, None)
    assert (body.run_id, body.group) == (None, "8gen")
    body = new_rule("p", "every", "stalled", {"minutes": 30}, "https://example.com/h", "s")
    assert (body.run_id, body.group, body.params) == (None, None, {"minutes": 30})
    with pytest.raises(InvalidRule, match="pick a project"):
        new_rule(None, "every", "stalled", {}, None, None)
    with pytest.raises(ValidationError, match="webhook_url"):
        new_rule("p", "every", "stalled", {"minutes": 30}, "ftp://example.com/h", None)
