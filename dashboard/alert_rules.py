"""The Alerts page's "Rules" panel: what is being watched, switched on or off, deleted, added.

It shows every alert rule (what it watches, its kind and parameters, where it posts) and,
with a write token, enables, disables or deletes the one selected and creates new ones.  Every
write goes through the functions ``POST``/``PATCH``/``DELETE /api/v1/alert-rules`` call
(``server/alerts/rule_service.py``), so a rule is checked as the API checks it and refused with
the same error. The kinds offered, their parameters and descriptions are the kind registry's
(``server/alerts/kinds.py``).
"""

from __future__ import annotations

from typing import Any

from dash import ALL, Dash, Input, Output, State, callback_context, dcc, html, no_update
from dash.exceptions import PreventUpdate

from scalewatch.dashboard.components import (
    DashContext,
    column,
    empty_state,
    table,
    write_denied,
)
from scalewatch.dashboard.data import group_link, md_text, utc_text
from scalewatch.dashboard.figures import plural
from scalewatch.server.alerts import rule_service
from scalewatch.server.alerts.checks import InvalidRule
from scalewatch.server.alerts.kinds import ALERT_KINDS, KINDS, AlertKind, spec_of
from scalewatch.server.alerts.rule_service import RuleDraft
from scalewatch.server.domain.alerts import AlertRule
from scalewatch.server.domain.checks import parse_id
from scalewatch.server.scopes import webhook_host_only
from scalewatch.server.store.base import NotFound, RunQuery, Store

COLUMNS = [
    column("on", "enabled"),
    column("watches", "watches", presentation="markdown"),
    column("project", "project"),
    column("kind", "kind"),
    column("parameters", "params"),
    column("webhook", "webhook"),
    column("created (UTC)", "created_at"),
]
EVERY_RUN = "every"  # the "watches" choice of a project-wide rule
MAX_RUN_CHOICES = 500


def _watches(rule: AlertRule, run_names: dict[int, str]) -> str:
    """Markdown: the run (linked), the group (linked) or every run of the project."""
    if rule.run_id is not None:
        rid = rule.run_id
        return f"[{md_text(run_names.get(rid, f'run {rid}'))}](/dashboard/run/{rid})"
    if rule.group:
        return "group " + group_link(rule.project, rule.group)
    return "every run of the project"


def _params_text(params: dict[str, Any] | None) -> str:
    return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in (params or {}).items()) or "—"


def rule_rows(rules: list[AlertRule], run_names: dict[int, str], scope: str
              ) -> list[dict[str, Any]]:
    """Table rows for ``rules`` as a token of ``scope`` may see them: below admin a webhook
    shows its host only (a Slack URL is a secret), as ``GET /alert-rules`` returns it."""
    rows = []
    for r in rules:
        url = r.webhook_url
        shown = url if scope == "admin" else webhook_host_only(url)
        rows.append({
            "id": r.id,
            "enabled": "on" if r.enabled else "off",
            "watches": _watches(r, run_names),
            "project": r.project,
            "kind": r.kind.value,
            "params": _params_text(r.params),
            "webhook": (shown or "—") + (" (signed)" if url and r.has_secret else ""),
            "created_at": utc_text(r.created_at),
        })
    return rows


def param_inputs(kind: str | None) -> list[Any]:
    """One number box per parameter of ``kind``, its default as placeholder."""
    if kind not in ALERT_KINDS:
        return []
    spec = spec_of(kind).params
    if not spec:
        return [html.Span("no parameters", className="note")]
    boxes: list[Any] = []
    for name, param in spec.items():
        boxes += [
            html.Label(name, htmlFor=f"rule-param-{name}", className="meta"),
            dcc.Input(id={"type": "rule-param", "name": name}, type="number",
                      step="any" if param.type is float else 1,
                      placeholder="required" if param.default is None else f"{param.default:g}",
                      style={"width": 160}),
        ]
    return boxes


def kind_help(kind: str | None) -> str:
    """What a kind watches and what fires it, from its registry entry."""
    if kind not in ALERT_KINDS:
        return ""
    spec = spec_of(kind)
    return f"Watches {' and '.join(spec.watches)}: {spec.help}"


def panel() -> html.Div:
    """The Rules section: a table of rules, its actions, and the New rule form."""
    kinds = [{"label": spec.name, "value": spec.name} for spec in KINDS.values()]
    return html.Div(style={"marginTop": 24}, children=[
        html.Div(className="toolbar", children=[
            html.H3("Rules", style={"margin": 0}),
            html.Span(id="rules-count", className="meta"),
            html.Span(style={"flex": 1}),
            html.Button("Enable / disable", id="rules-toggle", className="secondary",
                        disabled=True),
            html.Button("Delete", id="rules-delete", className="secondary", disabled=True),
        ]),
        html.Div("What is being watched. Select a rule to switch it on or off or delete it "
                 "(deleting a rule deletes its alerts and their delivery history).",
                 className="note"),
        html.Div(id="rules-msg"),
        html.Div(id="rules-empty"),
        table("rules-table", COLUMNS, data=[], row_selectable="single", selected_row_ids=[],
              sort_action="native", page_size=10),
        dcc.ConfirmDialog(id="rules-confirm"),
        html.Details(id="rules-new", style={"marginTop": 10}, children=[
            html.Summary("New rule", className="meta"),
            html.Div(className="toolbar", children=[
                dcc.Dropdown(id="rule-project", placeholder="project", style={"width": 240}),
                dcc.Dropdown(id="rule-watches", placeholder="watches", clearable=False,
                             style={"width": 320}),
                dcc.Dropdown(id="rule-kind", options=kinds, value=AlertKind.asymptote_drop.value,
                             clearable=False, style={"width": 220}),
            ]),
            html.Div(id="rule-kind-help", className="note"),
            html.Div(id="rule-params", className="toolbar"),
            html.Div(className="toolbar", children=[
                dcc.Input(id="rule-webhook", type="url", debounce=False,
                          placeholder="webhook URL (optional), e.g. a Slack incoming webhook",
                          style={"width": 480}),
                dcc.Input(id="rule-secret", type="password",
                          placeholder="signing secret (optional)", style={"width": 220}),
                html.Button("Create rule", id="rule-create"),
            ]),
            html.Div(id="rule-create-msg"),
        ]),
        dcc.Store(id="rules-changed", data=0),
    ])


def _run_names(store: Store, rules: list[AlertRule]) -> dict[int, str]:
    names: dict[int, str] = {}
    for rid in {r.run_id for r in rules if r.run_id is not None}:
        try:
            names[rid] = store.get_run(rid).name
        except LookupError:
            continue
    return names


def _watch_options(store: Store, project: str) -> list[dict[str, str]]:
    runs, _ = store.list_runs(RunQuery(project=project, limit=MAX_RUN_CHOICES))
    try:
        groups = store.list_groups(project)
    except NotFound:  # a project deleted since the list was shown, or a hand-made request
        groups = []
    return ([{"label": "every run of the project", "value": EVERY_RUN}]
            + [{"label": f"group {g.name}", "value": f"group:{g.name}"} for g in groups]
            + [{"label": f"run {r.name}", "value": f"run:{r.id}"} for r in runs])


def new_rule(project: str | None, watches: str | None, kind: str | None,
             values: dict[str, Any], webhook: str | None, secret: str | None) -> RuleDraft:
    """The form's fields as a rule to create (``rule_service.create_rule`` checks it as the
    API does); raises InvalidRule for what only the form can get wrong."""
    for field, value in (("project", project), ("watches", watches), ("kind", kind),
                         ("webhook_url", webhook), ("webhook_secret", secret)):
        if value is not None and not isinstance(value, str):  # a hand-made callback request
            raise InvalidRule(field, f"must be text, got {type(value).__name__}")
    if not project:
        raise InvalidRule("project", "pick a project")
    if kind not in ALERT_KINDS:
        raise InvalidRule("kind", f"pick a kind: {', '.join(ALERT_KINDS)}")
    run_id, group = None, None
    if watches and watches.startswith("run:"):
        # ASCII digits within the ids' range (int() took "1_0" as 10, and 10**22 reached the
        # database as an integer it cannot hold: a 500)
        run_id = parse_id(watches[4:])
        if run_id is None:
            raise InvalidRule("run_id", f"not a run: {watches[4:][:40]!r}")
    elif watches and watches.startswith("group:"):
        group = watches[6:]
    return RuleDraft(project, kind, {k: v for k, v in values.items() if v is not None},
                     run_id=run_id, group=group, webhook_url=webhook or None,
                     webhook_secret=secret or None)


def register_callbacks(app: Dash, ctx: DashContext) -> None:
    @app.callback(
        Output("rules-table", "data"),
        Output("rules-count", "children"),
        Output("rules-empty", "children"),
        Input("rules-changed", "data"),
        Input("alerts-tick", "n_intervals"),
    )
    def refresh(_changed: int, _tick: int | None) -> tuple[Any, ...]:
        rules = ctx.store.list_alert_rules()
        rows = rule_rows(rules, _run_names(ctx.store, rules), ctx.scope())
        empty = (empty_state("No alert rules yet: add one under New rule, or with "
                             "POST /api/v1/alert-rules.") if not rows else None)
        return rows, plural(len(rows), "rule"), empty

    @app.callback(
        Output("rules-toggle", "disabled"),
        Output("rules-delete", "disabled"),
        Input("rules-table", "selected_row_ids"),
    )
    def selected(ids: list[int] | None) -> tuple[Any, ...]:
        return not ids, not ids

    @app.callback(
        Output("rules-confirm", "displayed"),
        Output("rules-confirm", "message"),
        Input("rules-delete", "n_clicks"),
        State("rules-table", "selected_row_ids"),
        prevent_initial_call=True,
    )
    def ask(_n: int, ids: list[int] | None) -> tuple[Any, ...]:
        if not ids:
            raise PreventUpdate
        return True, (f"Delete alert rule {ids[0]}, with its alerts and their delivery "
                      "history?")

    @app.callback(
        Output("rules-msg", "children"),
        Output("rules-changed", "data"),
        Input("rules-toggle", "n_clicks"),
        Input("rules-confirm", "submit_n_clicks"),
        State("rules-table", "selected_row_ids"),
        State("rules-changed", "data"),
        prevent_initial_call=True,
    )
    def act(toggle: int | None, confirmed: int | None, ids: list[int] | None,
            changed: int) -> tuple[Any, ...]:
        if not ids:
            raise PreventUpdate
        deleting = callback_context.triggered_id == "rules-confirm"
        if not ctx.can("write"):
            what = "Deleting a rule" if deleting else "Switching a rule on or off"
            return write_denied(what, "rules-denied"), no_update
        try:
            if deleting:
                rule_service.delete_rule(ctx.store, ids[0])
                said = f"Rule {ids[0]} deleted."
            else:
                was = ctx.store.get_alert_rule(ids[0]).enabled
                rule_service.set_rule_enabled(ctx.store, ids[0], not was,
                                              ctx.state.settings.webhook_allow_private,
                                              ctx.state.settings.base_url)
                said = f"Rule {ids[0]} {'disabled' if was else 'enabled'}."
        except InvalidRule as exc:
            return html.Div(f"{exc.field}: {exc}", className="msg-err"), (changed or 0) + 1
        except LookupError as exc:
            return html.Div(str(exc), className="msg-err"), (changed or 0) + 1
        return html.Div(said, className="msg-ok", id="rules-ok"), (changed or 0) + 1

    @app.callback(
        Output("rule-project", "options"),
        Input("rules-new", "open"),
    )
    def projects(_open: bool | None) -> list[str]:
        return ctx.store.list_projects()

    @app.callback(
        Output("rule-watches", "options"),
        Output("rule-watches", "value"),
        Input("rule-project", "value"),
    )
    def watch_options(project: str | None) -> tuple[Any, ...]:
        if not project:
            return [], None
        return _watch_options(ctx.store, project), EVERY_RUN

    @app.callback(
        Output("rule-params", "children"),
        Output("rule-kind-help", "children"),
        Input("rule-kind", "value"),
    )
    def kind_form(kind: str | None) -> tuple[Any, ...]:
        return param_inputs(kind), kind_help(kind)

    @app.callback(
        Output("rule-create-msg", "children"),
        Output("rules-changed", "data", allow_duplicate=True),
        Input("rule-create", "n_clicks"),
        State("rule-project", "value"),
        State("rule-watches", "value"),
        State("rule-kind", "value"),
        State({"type": "rule-param", "name": ALL}, "id"),
        State({"type": "rule-param", "name": ALL}, "value"),
        State("rule-webhook", "value"),
        State("rule-secret", "value"),
        State("rules-changed", "data"),
        prevent_initial_call=True,
    )
    def create(_n: int, project: str | None, watches: str | None, kind: str | None,
               ids: list[dict[str, str]], values: list[Any], webhook: str | None,
               secret: str | None, changed: int) -> tuple[Any, ...]:
        if not ctx.can("write"):
            return write_denied("Creating a rule", "rule-create-denied"), no_update
        try:
            if len(ids) != len(values):  # a hand-made request: the browser sends pairs
                raise InvalidRule("params", "each parameter needs one value")
            draft = new_rule(project, watches, kind,
                             {i["name"]: v for i, v in zip(ids, values, strict=True)},
                             webhook, secret)
            created = rule_service.create_rule(ctx.store, draft,
                                               ctx.state.settings.webhook_allow_private)
        except InvalidRule as exc:
            return (html.Div(f"{exc.field}: {exc}", className="msg-err", id="rule-create-bad"),
                    no_update)
        except LookupError as exc:  # a project this session's token is not limited to
            return html.Div(str(exc), className="msg-err", id="rule-create-bad"), no_update
        return (html.Div(f"Rule {created.id} created: {created.kind.value} "
                         f"({_params_text(created.params)}).",
                         className="msg-ok", id="rule-create-ok"), (changed or 0) + 1)
