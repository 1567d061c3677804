"""Records as the store returns them, for tests of code that reads them (table rows, figures):
every field the shape requires, with plain defaults, and the ones a test cares about given."""

from __future__ import annotations

from typing import Any

from scalewatch.server.domain.runs import GroupSummary, Run

_RUN: dict[str, Any] = {
    "id": 1, "project": "p", "name": "r", "status": "running", "config": {}, "tags": [],
    "notes": "", "compute_unit": "gpu_hours", "target_compute": None,
    "fit_metric": "val_pass_rate", "fit_settings": {}, "group": None, "created_at": None,
    "last_seen_at": None, "last_step": None, "last_compute": None, "latest": {}, "fit": None,
}


def a_run(**fields: Any) -> Run:
    return Run.model_validate({**_RUN, **fields})


def a_group(**fields: Any) -> GroupSummary:
    return GroupSummary.model_validate({"name": "g", "n_runs": 0, "runs": [], "metric": None,
                                        "fit": None, **fields})
