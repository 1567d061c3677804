"""Call a Dash callback over HTTP the way the browser does, with any client that has `get`/`post`
(httpx, FastAPI's TestClient): used by the tests and bench/dashboard.py. Not imported by the app."""

from __future__ import annotations

from typing import Any

PREFIX = "/dashboard/"


def _outputs(spec: str) -> list[dict[str, str]]:
    if "." not in spec:  # a callback without outputs (hashed id)
        return []
    if not spec.startswith(".."):
        cid, prop = spec.rsplit(".", 1)
        return [{"id": cid, "property": prop}]
    out = []
    for part in spec.strip(".").split("..."):
        cid, prop = part.rsplit(".", 1)
        out.append({"id": cid, "property": prop})
    return out


def dash_call(
    client: Any,
    output_id: str,
    values: dict[str, Any] | None = None,
    changed: list[str] | None = None,
    deps: list[dict[str, Any]] | None = None,
) -> Any:
    """POST `_dash-update-component` for the callback whose outputs include `output_id`.

    `values` maps "component.property" to its value (missing ones are None). Returns the
    httpx response; `.json()["response"]` holds the outputs.
    """
    values = values or {}
    if deps is None:
        deps = client.get(PREFIX + "_dash-dependencies").json()
    dep = next(d for d in deps if any(o["id"] == output_id for o in _outputs(d["output"])))

    def items(kind: str) -> list[dict[str, Any]]:
        return [{**i, "value": values.get(f"{i['id']}.{i['property']}")} for i in dep.get(kind, [])]

    outputs = _outputs(dep["output"])
    body = {
        "output": dep["output"],
        "outputs": outputs if dep["output"].startswith("..") else outputs[0],
        "inputs": items("inputs"),
        "state": items("state"),
        "changedPropIds": changed or [],
    }
    return client.post(PREFIX + "_dash-update-component", json=body)
