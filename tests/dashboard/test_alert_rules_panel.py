"""The Alerts page's Rules panel: rows as a token's scope may see them, and the New rule form
checked as the API checks a rule."""

from __future__ import annotations

import pytest

from scalewatch.dashboard.alert_rules import new_rule, param_inputs, rule_rows
from scalewatch.server.alerts.checks import InvalidRule
from scalewatch.server.domain.runs import Run
from scalewatch.server.store.base import NotFound
from tests.support.records import a_run

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


class _Store:
    """The two reads a rule check makes: runs 12 (project p) and 13 (project q)."""

    def get_run(self, run_id: int) -> Run:
        if run_id not in (12, 13):
            raise NotFound(f"run {run_id} not found")
        return a_run(id=run_id, project="p" if run_id == 12 else "q")


def test_the_form_becomes_a_rule_checked_as_the_api_checks_one() -> None:
    store = _Store()
    rule = new_rule(store, "p", "run:12", "asymptote_drop", {"delta": None}, "", None, False)
    assert (rule.project, rule.run_id, rule.group, rule.params) == ("p", 12, None, {"delta": 0.02})
    rule = new_rule(store, "p", "group:8gen", "seed_off_curve", {}, None, None, False)
    assert (rule.run_id, rule.group) == (None, "8gen")
    rule = new_rule(store, "p", "every", "stalled", {"minutes": 30}, "https://8.8.8.8/h", "s",
                    False)
    assert (rule.run_id, rule.params, rule.webhook_url) == (None, {"minutes": 30.0},
                                                             "https://8.8.8.8/h")
    bad = [
        ((None, "every", "stalled", {"minutes": 1}, None, None), "project", "pick a project"),
        (("p", "every", "stalled", {}, None, None), "params", "needs parameter 'minutes'"),
        (("p", "run:13", "stalled", {"minutes": 1}, None, None), "run_id", "belongs to project"),
        (("p", "every", "seed_off_curve", {}, None, None), "group", "give its group"),
        (("p", "every", "stalled", {"minutes": 1}, "ftp://x.org/h", None), "webhook_url",
         "http:// or https://"),
        (("p", "every", "stalled", {"minutes": 1}, "https://x.org/\x00", None), "webhook_url",
         "NUL"),
        (("p", "every", "stalled", {"minutes": 1}, "https://127.0.0.1/h", None), "webhook_url",
         "loopback"),
        (("p", "every", "stalled", {"minutes": 1}, None, "s" * 501), "webhook_secret",
         "1 to 500"),
        (("p\udfff", "every", "stalled", {"minutes": 1}, None, None), "project", "UTF-8"),
        ((["p"], "every", "stalled", {"minutes": 1}, None, None), "project", "must be text"),
        (("p", "run:x", "stalled", {"minutes": 1}, None, None), "run_id", "not a run"),
        (("p", "every", "stalled", {"minutes": [1]}, None, None), "params", "a number"),
    ]
    for args, field, says in bad:
        with pytest.raises(InvalidRule, match=says) as exc:
            new_rule(store, *args, False)
        assert exc.value.field == field, args


def test_the_api_refuses_what_the_form_refuses(api) -> None:  # noqa: ANN001
    """One check behind both: the API's 422 says what the form says."""
    for url, says in (("ftp://x.org/h", "http:// or https://"), ("https://x.org/\x00", "NUL")):
        r = api.post("/api/v1/alert-rules", json={"project": "p", "kind": "stalled",
                                                  "params": {"minutes": 1}, "webhook_url": url})
        assert r.status_code == 422 and says in r.text, r.text
