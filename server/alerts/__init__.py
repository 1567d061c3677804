"""Alerts: rules, evaluation after every refit (and a timer for `stalled`), webhook outbox.

* `rules` — the rule kinds and their parameters (validated, with defaults).
* `evaluate` — pure functions: a rule + fits/points in, a verdict out (fire, clear, no verdict).
* `webhooks` — message bodies, HMAC signatures, the outbox sender thread.
* `service` — wiring: the refit listener, the stalled timer (started by `server.refit_process`).
"""
