"""The Alerts page's Rules panel: rows as a token's scope may see them, and the New rule form
checked as the API checks a rule."""

from __future__ import annotations

from typing import Any

import pytest

from scalewatch.dashboard.alert_rules import new_rule, param_inputs, rule_rows
from scalewatch.server.alerts.checks import InvalidRule
from scalewatch.server.alerts.rule_service import RuleDraft, check_new_rule
from scalewatch.server.domain.alerts import AlertRule
from scalewatch.server.domain.runs import Run
from scalewatch.server.store.base import NotFound
from tests.support.records import a_run

SLACK = "https://hooks.slack.com/services/T0/B0/secret-part"
RULES = [AlertRule.model_validate({"updated_at": None, **r}) for r in [
    {"id": 1, "project": "p", "run_id": None, "group": None, "kind": "asymptote_drop",
     "params": {"delta": 0.02}, "webhook_url": SLACK, "has_secret": True, "enabled": True,
     "created_at": "2026-12-02T07:25:11.317394+00:00"},
    {"id": 2, "project": "p", "run_id": 7, "group": None, "kind": "off_curve",
     "params": {"n": 3, "k": 4.0}, "webhook_url": None, "has_secret": False, "enabled": False,
     "created_at": None},
    {"id": 3, "project": "p q", "run_id": None, "group": "8gen", "kind": "seed_off_curve",
     "params": {}, "webhook_url": None, "has_secret": False, "enabled": True,
     "created_at": None},
]]


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


def _form_rule(store: Any, *fields: Any) -> RuleDraft:
    """The form's fields as a rule, checked as ``rule_service.create_rule`` checks it."""
    return check_new_rule(store, new_rule(*fields), False)


def test_the_form_becomes_a_rule_checked_as_the_api_checks_one() -> None:
    store = _Store()
    rule = _form_rule(store, "p", "run:12", "asymptote_drop", {"delta": None}, "", None)
    assert (rule.project, rule.run_id, rule.group, rule.params) == ("p", 12, None, {"delta": 0.02})
    rule = _form_rule(store, "p", "group:8gen", "seed_off_curve", {}, None, None)
    assert (rule.run_id, rule.group) == (None, "8gen")
    rule = _form_rule(store, "p", "every", "stalled", {"minutes": 30}, "https://8.8.8.8/h", "s")
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
            _form_rule(store, *args)
        assert exc.value.field == field, args


def test_the_api_refuses_what_the_form_refuses(api) -> None:  # noqa: ANN001
    """One check behind both: the API's 422 says what the form says."""
    for url, says in (("ftp://x.org/h", "http:// or https://"), ("https://x.org/\x00", "NUL")):
        r = api.post("/api/v1/alert-rules", json={"project": "p", "kind": "stalled",
                                                  "params": {"minutes": 1}, "webhook_url": url})
        assert r.status_code == 422 and says in r.text, r.text


def _dashboard_create(api: Any, project: str, watches: str, kind: str,
                      params: dict[str, Any]) -> dict[str, Any]:
    """Press the New rule form's Create button, as the browser posts it."""
    deps = api.get("/dashboard/_dash-dependencies").json()
    dep = next(d for d in deps if "rule-create-msg.children" in d["output"])
    values = {"rule-project": project, "rule-watches": watches, "rule-kind": kind,
              "rule-create": 1, "rules-changed": 0}

    def item(i: dict[str, Any]) -> Any:
        if str(i["id"]).startswith("{"):  # the parameter boxes (pattern-matching states)
            return [{"id": {"type": "rule-param", "name": name}, "property": i["property"],
                     "value": {"type": "rule-param", "name": name} if i["property"] == "id"
                     else value} for name, value in params.items()]
        return {**i, "value": values.get(i["id"])}

    body = {"output": dep["output"],
            "outputs": [{"id": "rule-create-msg", "property": "children"},
                        {"id": "rules-changed", "property": "data"}],
            "inputs": [item(i) for i in dep["inputs"]], "state": [item(i) for i in dep["state"]],
            "changedPropIds": ["rule-create.n_clicks"]}
    r = api.post("/dashboard/_dash-update-component", json=body)
    assert r.status_code == 200, r.text
    return r.json()["response"]["rule-create-msg"]["children"]["props"]


def test_a_bad_rule_gets_the_same_error_from_the_dashboard_as_from_the_api(api) -> None:  # noqa: ANN001
    """Both write through ``rule_service.create_rule``: the same field, the same words."""
    own = api.post("/api/v1/runs", json={"project": "p", "name": "r"}).json()["id"]
    other = api.post("/api/v1/runs", json={"project": "q", "name": "r"}).json()["id"]
    cases = [  # (watches, kind, params) as the form sends them, and as the API takes them
        ("every", "below_baseline", {"baseline_run_id": 999999}, {}),
        (f"run:{other}", "stalled", {"minutes": 5}, {"run_id": other}),
        ("group:g", "below_baseline", {"baseline_run_id": own}, {"group": "g"}),
        ("every", "seed_off_curve", {}, {}),
        ("every", "stalled", {"minutes": -1}, {}),
    ]
    for watches, kind, params, target in cases:
        r = api.post("/api/v1/alert-rules",
                     json={"project": "p", "kind": kind, "params": params, **target})
        assert r.status_code == 422, r.text
        (error,) = r.json()["errors"]
        said = _dashboard_create(api, "p", watches, kind, params)
        assert said["id"] == "rule-create-bad", said
        assert said["children"] == f"{error['loc']}: {error['msg']}", (said, error)
    assert api.get("/api/v1/alert-rules").json()["total"] == 0  # neither wrote anything
    ok = _dashboard_create(api, "p", f"run:{own}", "stalled", {"minutes": 5})
    assert ok["id"] == "rule-create-ok", ok
    assert api.get("/api/v1/alert-rules").json()["rules"][0]["run_id"] == own
