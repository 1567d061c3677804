"""The shapes and rules the whole service shares: a run, a project, a token, an alert, an alert
rule and a webhook delivery, what the fitter needs to know about a run, and which metric a run's
fit follows.

Frozen pydantic models, so one definition serves the store (which returns them), the services
and the dashboard (which read them) and the REST API (whose response models derive from them).
This package imports nothing of the service's own but the limits its checks need and the fitting
engine's prior checks (no api, store, db or dashboard): everyone may import it
(tests/test_import_direction.py).
"""
