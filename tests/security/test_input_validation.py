"""Items 1 and 7: text that is not UTF-8 and numbers beyond float range are 4xx, never stored
and never a 500; deeply nested bodies are 400."""

from __future__ import annotations

import gzip
import json

import pytest

BAD = "\udfff"  # a lone surrogate: JSON can carry it ("\\udfff"), UTF-8 cannot


def _json(obj: object) -> bytes:
    return json.dumps(obj).encode()  # ensure_ascii: the surrogate travels as an escape


def test_lone_surrogates_are_refused_everywhere_and_lists_stay_readable(authed_db) -> None:
    c, w = authed_db.client, authed_db.h("write")
    hj = {**w, "Content-Type": "application/json"}
    bodies = [
        {"project": "p", "name": "r", "config": {"k": BAD}},
        {"project": "p", "name": "r", "config": {BAD: 1}},
        {"project": "p", "name": "r", "config": {"nested": [{"x": BAD}]}},
        {"project": "p", "name": "r" + BAD},
        {"project": BAD, "name": "r"},
        {"project": "p", "name": "r", "tags": ["t" + BAD]},
        {"project": "p", "name": "r", "notes": BAD},
        {"project": "p", "name": "r", "fit_metric": BAD},
    ]
    for body in bodies:
        r = c.post("/api/v1/runs", content=_json(body), headers=hj)
        assert r.status_code == 422, (body, r.status_code, r.text)
    run = c.post("/api/v1/runs", json={"project": "p", "name": "ok"}, headers=w).json()
    for patch in ({"notes": BAD}, {"tags": [BAD]}):
        r = c.patch(f"/api/v1/runs/{run['id']}", content=_json(patch), headers=hj)
        assert r.status_code == 422, (patch, r.text)
    r = c.post(
        f"/api/v1/runs/{run['id']}/points",
        content=_json({"points": [{"step": 1, "compute": 1.0, "metrics": {BAD: 0.5}}]}),
        headers=hj,
    )
    assert r.status_code == 422, r.text
    rule = {"project": "p", "kind": "asymptote_drop", "params": {BAD: 1}}
    r = c.post("/api/v1/alert-rules", content=_json(rule), headers=hj)
    assert r.status_code == 422, r.text
    r = c.post(
        "/api/v1/tokens",
        content=_json({"name": BAD}),
        headers={**authed_db.h("admin"), "Content-Type": "application/json"},
    )
    assert r.status_code == 422, r.text
    # Nothing broke the reads.
    rd = authed_db.h("read")
    assert c.get("/api/v1/runs", headers=rd).status_code == 200
    assert c.get(f"/api/v1/runs/{run['id']}", headers=rd).status_code == 200
    assert c.get("/api/v1/alert-rules", headers=rd).status_code == 200


def test_valid_non_ascii_text_is_still_accepted(authed) -> None:
    c, w = authed.client, authed.h("write")
    r = c.post(
        "/api/v1/runs",
        json={"project": "p", "name": "ряд-😀", "config": {"κ": "✓ 😀"}, "tags": ["ü"]},
        headers=w,
    )
    assert r.status_code == 201, r.text
    assert r.json()["config"] == {"κ": "✓ 😀"}


HUGE = 10**400


@pytest.mark.parametrize(
    "point",
    [
        {"step": 1, "compute": 1.0, "metrics": {"m": HUGE}},
        {"step": 1, "compute": HUGE, "metrics": {"m": 0.5}},
        {"step": 1, "compute": 1.0, "metrics": {"m": 0.5}, "time": HUGE},
        {"step": HUGE, "compute": 1.0, "metrics": {"m": 0.5}},
    ],
)
def test_integers_beyond_float_range_are_422(authed, point) -> None:
    c, w = authed.client, authed.h("write")
    rid = c.post("/api/v1/runs", json={"project": "p", "name": "r"}, headers=w).json()["id"]
    raw = json.dumps({"points": [point]}).encode()
    for body, enc in ((raw, None), (gzip.compress(raw), "gzip")):
        headers = {**w, "Content-Type": "application/json"}
        if enc:
            headers["Content-Encoding"] = enc
        r = c.post(f"/api/v1/runs/{rid}/points", content=body, headers=headers)
        assert r.status_code == 422, r.text
        assert r.json()["errors"], r.text


@pytest.mark.parametrize(
    "kind,params",
    [
        ("asymptote_below", {"threshold": HUGE}),
        ("off_curve", {"n": HUGE}),
        ("stalled", {"minutes": -HUGE}),
    ],
)
def test_rule_parameters_beyond_float_range_are_422(authed, kind, params) -> None:
    body = json.dumps({"project": "p", "kind": kind, "params": params}).encode()
    r = authed.client.post(
        "/api/v1/alert-rules",
        content=body,
        headers={**authed.h("write"), "Content-Type": "application/json"},
    )
    assert r.status_code == 422, r.text


def test_fit_request_beyond_float_range_is_422(authed) -> None:
    body = json.dumps({"compute": [1, 2, HUGE], "values": [0.1, 0.2, 0.3]}).encode()
    r = authed.client.post(
        "/api/v1/fit",
        content=body,
        headers={**authed.h("read"), "Content-Type": "application/json"},
    )
    assert r.status_code == 422, r.text


@pytest.mark.parametrize(
    "path", ["/api/v1/runs", "/api/v1/runs/1/points", "/api/v1/fit", "/api/v1/alert-rules"]
)
def test_deeply_nested_bodies_are_400(authed, path) -> None:
    c = authed.client
    c.post("/api/v1/runs", json={"project": "p", "name": "r"}, headers=authed.h("write"))
    body = b"[" * 100_000 + b"]" * 100_000
    r = c.post(
        path, content=body, headers={**authed.h("admin"), "Content-Type": "application/json"}
    )
    assert 400 <= r.status_code < 500, (path, r.status_code, r.text[:200])
