"""scalewatch trainer client - standard library only.

Log RL training curves to a scalewatch server, which fits the ScaleRL sigmoid
``R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)`` live and alerts on forecasts::

    import trainer_client as sw

    meter = sw.ComputeMeter(gpus=80)                 # GPU-hours from wall-clock time
    run = sw.init(project="math-rl", name="scalerl-8b-seed0", config=cfg,
                  target_compute=16000, compute_unit="gpu_hours", fit_metric="val_pass_rate")
    for step in range(start, steps):
        ...
        run.log({"reward": r}, step=step, compute=meter)
        if step % 100 == 0:
            with meter.paused():                      # eval time does not count
                run.log({"val_pass_rate": evaluate()}, step=step, compute=meter)
    run.fit()      # latest fit from the server (dict) or None
    run.alerts()   # open alerts of the run, [] on any trouble
    run.finish()   # or `with sw.init(...) as run:`; also done at interpreter exit

Guarantees
----------
* ``log()`` never blocks on the network: it validates, appends one line to the run's
  write-ahead journal (a single ``os.write``) and enqueues (a few microseconds). Wrong
  argument types/values (a str metric, a float step, negative compute,
  ``log`` after ``finish``) are programming errors and raise ``TypeError``/``ValueError``/
  ``RuntimeError`` immediately. NaN/inf values are dropped with a rate-limited warning.
* Network or server trouble never raises into the trainer. Every batch is written to an
  on-disk spool (``$SCALEWATCH_HOME/spool/<project>/<name>/``, default ``~/.scalewatch``)
  before it is sent and deleted only once the server acknowledged it, so a crash or SIGKILL
  of the trainer or of the server loses nothing: the next ``init()`` of the same
  project+name, or ``scalewatch sync`` (:func:`replay_spools`), sends the rest.
* ``init()`` with an existing project+name resumes that run; a redone step overwrites the
  earlier value (the server upserts on (run, metric, step)), and spool batches are sent in
  write order so the newest value wins.
* ``init()`` returns at once even when the server is down; the run is registered in the
  background before its first batch is sent.
* ``mode="offline"`` (or ``SCALEWATCH_MODE=offline``) only spools; ``scalewatch sync`` creates
  the run and uploads later.
* SIGKILL of the trainer loses nothing: once ``log()`` returned, the point is in the journal
  (the kernel's page cache), and the next ``init()`` or ``scalewatch sync`` turns the journal of
  the dead process into spool batches. With ``SCALEWATCH_JOURNAL=0`` (``log()`` then does no
  I/O at all) the in-memory queue is spooled every 0.2 s, so a SIGKILL can lose the points
  logged in the last 0.2 s; ``run.flush()`` (call it when you save a checkpoint) returns once
  everything logged so far is in the spool.
* ``finish(timeout=30)`` flushes; points still unacknowledged stay in the spool and a
  ``RuntimeWarning`` gives their count and path.

Compute (the fit's x-axis): pass numbers in the run's ``compute_unit``, a
:class:`ComputeMeter` (GPU-hours from wall-clock, with ``pause()``/``resume()``/``paused()``),
or :func:`flops` (``6·N`` per trained token + ``2·N`` per generated token; an estimate). The
last two carry their unit: without ``compute_unit`` the run takes it from them (``"gpu_hours"``,
``"flops"``); plain numbers are ``"gpu_hours"`` unless ``compute_unit`` says otherwise.

Environment: ``SCALEWATCH_URL`` (default ``http://127.0.0.1:8765``), ``SCALEWATCH_TOKEN``,
``SCALEWATCH_HOME``, ``SCALEWATCH_MODE``, ``SCALEWATCH_HTTP_TIMEOUT`` (socket timeout, 10 s),
``SCALEWATCH_EXIT_TIMEOUT`` (flush at exit, 10 s), ``SCALEWATCH_FSYNC=0`` (skip fsync of spool
batches), ``SCALEWATCH_JOURNAL=0`` (no write-ahead journal). Diagnostics go to the ``logging``
logger ``"scalewatch"``.

Modules: :mod:`~trainer_client.run` (the run's API), :mod:`~trainer_client.worker` (its queue
and threads), :mod:`~trainer_client.validation`
(argument checks), :mod:`~trainer_client.sender` (the HTTP send policy),
:mod:`~trainer_client.limits` (limits shared with the server), :mod:`~trainer_client.journal`,
:mod:`~trainer_client.spool`, :mod:`~trainer_client.sync`.

PipelineRL without code changes: ``scalewatch pipelinerl-sidecar --exp-dir results/x``
(:mod:`trainer_client.pipelinerl`, see ``trainer_client/PIPELINERL.md``).
"""

from __future__ import annotations

from .compute import ComputeMeter, Flops, flops
from .run import DEFAULT_URL, Run, init
from .sync import add_sync_arguments, replay_spools, sync_main

__version__ = "0.1.0"

__all__ = [
    "ComputeMeter",
    "DEFAULT_URL",
    "Flops",
    "Run",
    "add_sync_arguments",
    "flops",
    "init",
    "replay_spools",
    "sync_main",
    "__version__",
]
