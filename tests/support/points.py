"""Reading every point of a metric through the REST API, page by page (`next_since_step`)."""

from __future__ import annotations

from typing import Any


def all_points(client: Any, run_id: int, metric: str) -> list[dict[str, Any]]:
    """Every point of `metric` in step order: raw reads come in pages of at most 10,000."""
    points: list[dict[str, Any]] = []
    params: dict[str, Any] = {"metric": metric}
    while True:
        page = client.get(f"/api/v1/runs/{run_id}/points", params=params).json()
        points += page["points"]
        if page.get("next_since_step") is None:
            return points
        params["since_step"] = page["next_since_step"]
