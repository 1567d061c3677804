"""The shapes and rules the whole service shares: a run, a project, a token, what the fitter
needs to know about a run, and which metric a run's fit follows.

Frozen pydantic models, so one definition serves the store (which returns them), the services
and the dashboard (which read them) and the REST API (whose response models derive from them).
This package imports nothing of the service's own (no api, store, db or dashboard): everyone
may import it (tests/test_import_direction.py).
"""
