"""What makes an alert rule valid, checked in one place for every way one is written.

The REST API (``POST``/``PATCH /alert-rules``; its request model checks the webhook URL with
``url_problem``, its other text fields with validators of the same rules) and the Alerts page's
"New rule" form (``check_fields`` for the text fields) both call these, so a rule the
dashboard accepts is one the API would have accepted; each maps ``InvalidRule`` to its own
error (a 422 naming the field, a message under the form).
"""

from __future__ import annotations

from typing import Any

from scalewatch.server.alerts.kinds import GROUP_KINDS, GROUP_ONLY_KINDS, spec_of
from scalewatch.server.alerts.rules import RuleError, normalize_params
from scalewatch.server.alerts.targets import UnsafeTarget, check_url
from scalewatch.server.limits import MAX_GROUP_LENGTH, MAX_NAME_LENGTH
from scalewatch.server.store.base import NotFound, RunStore

MAX_URL = 2000
MAX_SECRET = 500


class InvalidRule(ValueError):
    """A rule that cannot work: ``field`` is the rule's field at fault, the message says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def text_problem(value: str) -> str | None:
    """Why a piece of text cannot be stored, or None: NUL (PostgreSQL text cannot hold it) or
    a lone surrogate (it would make every later response that shows it fail as UTF-8)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid UTF-8 text (no lone surrogates)"
    return "must not contain NUL characters" if "\x00" in value else None


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a webhook URL, or None (where it points is ``check_webhook``'s)."""
    if len(url) > MAX_URL:
        return f"webhook_url is longer than {MAX_URL} characters"
    problem = text_problem(url)
    if problem is None and not url.lower().startswith(("http://", "https://")):
        problem = "webhook_url must be an http:// or https:// URL"
    return problem


def check_fields(project: str, group: str | None, webhook_url: str | None,
                 webhook_secret: str | None) -> None:
    """The free-text fields of a rule that the API's request model checks (``RuleCreate``),
    for a caller without that model (the dashboard's form)."""
    for field, value, most in (("project", project, MAX_NAME_LENGTH),
                               ("group", group, MAX_GROUP_LENGTH),
                               ("webhook_secret", webhook_secret, MAX_SECRET)):
        if value is None:
            continue
        if not 1 <= len(value) <= most:
            raise InvalidRule(field, f"must have 1 to {most} characters")
        problem = text_problem(value)
        if problem:
            raise InvalidRule(field, problem)
    if webhook_url is not None:
        problem = url_problem(webhook_url)
        if problem:
            raise InvalidRule("webhook_url", problem)


def check_webhook(url: str | None, allow_private: bool) -> None:
    """A webhook must resolve to public addresses only (unless the server allows private
    ones): a rule must not turn the server into a probe of its own network."""
    if url is None:
        return
    try:
        check_url(url, allow_private)
    except UnsafeTarget as exc:
        raise InvalidRule("webhook_url", str(exc)) from exc


def validated_params(
    store: RunStore,
    project: str,
    run_id: int | None,
    kind: str,
    params: dict[str, Any] | None,
    group: str | None = None,
) -> dict[str, Any]:
    """The rule's params with defaults filled in, once its kind, params and what it watches
    (a run of ``project``, a group, or every run of the project) fit together."""
    try:
        clean = normalize_params(kind, params)
    except RuleError as exc:
        raise InvalidRule("params", str(exc)) from exc
    if group is not None and run_id is not None:
        raise InvalidRule("group", "a rule watches a run (run_id) or a group (group), not both")
    if group is not None and kind not in GROUP_KINDS:
        raise InvalidRule("kind", f"a group rule may be {', '.join(GROUP_KINDS)}, not {kind}")
    if group is None and kind in GROUP_ONLY_KINDS:
        raise InvalidRule("group", f"{kind} watches the seeds of a group: give its group")
    if run_id is not None:
        try:
            run = store.get_run(run_id)
        except NotFound as exc:
            raise InvalidRule("run_id", f"run {run_id} does not exist") from exc
        if run.project != project:
            raise InvalidRule(
                "run_id", f"run {run_id} belongs to project {run.project!r}, not {project!r}"
            )
    check = spec_of(kind).check
    problem = None if check is None else check(store, clean)
    if problem:
        raise InvalidRule("params", problem)
    return clean
