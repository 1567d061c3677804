"""`scalewatch import mlflow` and `scalewatch import wandb`: finished runs from other trackers.

* ``mlflow SOURCE`` -- SOURCE is a tracking URI (``http://host:5000``, ``file:///mlruns``, a
  scalewatch server); ``--run`` a run id or a run name (in ``--experiment``). Every metric's
  whole history is read with ``MlflowClient.get_metric_history`` (which pages through
  ``metrics/get-history``). Needs the ``mlflow`` (or ``mlflow-skinny``) package.
* ``wandb SOURCE`` -- a run's exported history: the UI's CSV export (``_step`` or ``Step``
  column; ``RUN - metric`` headers and ``__MIN``/``__MAX`` columns handled), the ``history``
  Parquet files (a file or a directory of them; needs ``pyarrow``: the ``wandb`` extra), or
  ``ENTITY/PROJECT/RUN_ID`` through ``wandb.Api().run(...).scan_history()`` (needs ``wandb``
  and a key).

Each reader returns :class:`Imported`: records ``(step, metrics, time)`` sorted by step, where
``time`` is the wall-clock time of the step (seconds since the epoch) when the source has one
(``--compute gpu-hours:N`` needs it). Third-party packages are imported lazily: the base
client stays standard library only.
"""

from __future__ import annotations

import csv
import math
import operator
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer_client.limits import MAX_GROUP_LENGTH, MAX_STEP
from trainer_client.records import BadLines
from trainer_client.validation import metric_name_problem

TimedRecord = tuple[int, dict[str, float], "float | None"]


@dataclass
class Imported:
    records: list[TimedRecord]
    fit_metric: str | None = None  # what the source says to fit (MLflow tag scalewatch.fit_metric)
    group: str | None = None  # the run's group (MLflow tag scalewatch.group, a W&B run's group)
    config: dict[str, Any] = field(default_factory=dict)


class ImportSourceError(Exception):
    """The source cannot be read (missing run, missing package): the message says why."""


def _number(value: Any) -> float | None:
    """``value`` as a finite float (text, numpy scalars too), or None."""
    v = _number_or_nan(value)
    return v if v is not None and math.isfinite(v) else None


def _number_or_nan(value: Any) -> float | None:
    """``value`` as a float, NaN and infinities included (None: not a number at all)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int past float range
        return None


def _step_of(value: Any) -> int | None:
    """A step as the API takes it (a whole number in 0..MAX_STEP). Integers and their text are
    read exactly: through float, steps past 2^53 merged with their neighbours."""
    if isinstance(value, bool):
        return None
    step: int | None = None
    text = value.strip().lstrip("+") if isinstance(value, str) else ""
    if text.isascii() and text.isdigit():  # ASCII: "²".isdigit() is true, int("²") raises
        step = int(value)
    elif not isinstance(value, (str, float)):
        try:
            step = operator.index(value)  # int, numpy integers
        except TypeError:
            step = None
    if step is None:
        v = _number(value)
        if v is None or not v.is_integer():
            return None
        step = int(v)
    return step if 0 <= step <= MAX_STEP else None


STEP_RANGE = "an integer in [0, 2**62]"


def _why_not_a_value(value: Any) -> str:
    return (f"{value!r} is not a finite number" if _number_or_nan(value) is not None
            else f"{str(value)[:60]!r} is not a number")


def _merge(rows: Iterable[TimedRecord]) -> list[TimedRecord]:
    """One record per step (values of the same step merged, the latest wins), by step."""
    by_step: dict[int, dict[str, float]] = {}
    times: dict[int, float] = {}
    for step, metrics, t in rows:
        by_step.setdefault(step, {}).update(metrics)
        if t is not None:
            times[step] = max(t, times.get(step, t))
    return [(s, by_step[s], times.get(s)) for s in sorted(by_step) if by_step[s]]


# --------------------------------------------------------------------------- MLflow


def _mlflow_client(uri: str) -> Any:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError as exc:
        raise ImportSourceError(
            "scalewatch import mlflow needs the mlflow client:\n    pip install mlflow-skinny"
        ) from exc
    return MlflowClient(tracking_uri=uri)


def _find_mlflow_run(client: Any, experiment: str | None, run: str) -> Any:
    from mlflow.exceptions import MlflowException

    if experiment is None:
        try:
            return client.get_run(run)
        except MlflowException:
            pass
    if experiment is not None:
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            raise ImportSourceError(f"no MLflow experiment named {experiment!r}")
        ids = [exp.experiment_id]
    else:
        try:
            ids = [e.experiment_id for e in client.search_experiments()]
        except MlflowException as exc:  # a server without experiments/search (scalewatch's)
            raise ImportSourceError(
                f"{run!r} is no run id here, and this server cannot list its experiments to "
                f"find a run by name ({exc.error_code}): give --experiment NAME") from None
    found = client.search_runs(ids, filter_string=_name_filter(run), max_results=2)
    if not found and experiment is not None:
        try:  # a run id given with its experiment
            return client.get_run(run)
        except MlflowException:
            pass
    if not found:
        where = f" in experiment {experiment!r}" if experiment else ""
        raise ImportSourceError(f"no MLflow run with id or name {run!r}{where}")
    if len(found) > 1:
        raise ImportSourceError(f"several MLflow runs are named {run!r}: give the run id")
    return found[0]


def _name_filter(run: str) -> str:
    """A search filter for the run named ``run``. MLflow's filter parser strips the quotes
    without unescaping what is inside, so a name is quoted with the quote it does not hold
    (a backslash-escaped ' searched for the name with the backslash)."""
    if "'" not in run:
        return f"attributes.run_name = '{run}'"
    if '"' not in run:
        return f'attributes.run_name = "{run}"'
    raise ImportSourceError(f"run name {run!r} holds both quote characters, which MLflow's "
                            "search cannot express: give the run id")


def read_mlflow(uri: str, run: str, experiment: str | None = None,
                bad: BadLines | None = None) -> Imported:
    """Every value of every metric of one MLflow run (each metric's history, all pages); what
    cannot be a point (a NaN, a negative step, a name the server refuses) is told to ``bad``,
    named by metric and step."""
    bad = bad if bad is not None else BadLines()
    client = _mlflow_client(uri)
    r = _find_mlflow_run(client, experiment, run)
    run_id = r.info.run_id
    rows: list[TimedRecord] = []
    for key in sorted(r.data.metrics):
        problem = metric_name_problem(key)
        if problem:
            bad.skip(f"metric {key[:60]!r}", f"the name {problem}")
            continue
        # MlflowClient.get_metric_history pages through metrics/get-history itself.
        history = sorted(client.get_metric_history(run_id, key),
                         key=lambda m: (m.step, m.timestamp))
        for m in history:
            step, value = _step_of(m.step), _number(m.value)
            if step is None:
                bad.skip(f"metric {key!r} step {m.step}", f"the step is not {STEP_RANGE}")
            elif value is None:
                bad.skip(f"metric {key!r} step {m.step}", _why_not_a_value(m.value))
            else:
                rows.append((step, {key: value}, m.timestamp / 1000.0 if m.timestamp else None))
    tags = dict(r.data.tags)
    config: dict[str, Any] = {"mlflow_run_id": run_id}
    return Imported(_merge(rows), fit_metric=tags.get("scalewatch.fit_metric"), config=config,
                    group=_group(tags.get("scalewatch.group")))


def _group(value: Any) -> str | None:
    """A source's group name when scalewatch can keep it (`--group` overrides; else none)."""
    if isinstance(value, str) and value.strip() and len(value) <= MAX_GROUP_LENGTH \
            and "\x00" not in value:
        return value
    return None


# --------------------------------------------------------------------------- W&B


def _flatten_row(row: Mapping[str, Any], prefix: str = "",
                 skip: Any = None) -> Iterator[tuple[str, float]]:
    """(name, value) of a row's scalars, nested dicts named with ``/``; ``skip(name, why)`` is
    told of a number that is not finite and of a name the server refuses (text is no metric)."""
    for key, value in row.items():
        if not isinstance(key, str) or key.startswith("_"):
            continue  # _step, _runtime, _timestamp, _wandb: bookkeeping, not metrics
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            if "_type" not in value:  # media and histograms are not scalars
                yield from _flatten_row(value, name + "/", skip)
            continue
        if isinstance(value, str) or _number_or_nan(value) is None:
            continue
        v, problem = _number(value), metric_name_problem(name)
        if v is not None and not problem:
            yield name, v
        elif skip is not None:
            skip(name, f"the name {problem}" if problem else _why_not_a_value(value))


def wandb_row_records(rows: Iterable[Mapping[str, Any]], step_key: str = "_step",
                      bad: BadLines | None = None, where: str = "row") -> list[TimedRecord]:
    """Records of W&B history rows (``scan_history()`` dicts, Parquet rows): ``_step`` is the
    step, ``_timestamp`` the wall-clock time, nested dicts are flattened with ``/``. A row
    without a step, a value that is not finite and a name the server refuses are told to
    ``bad`` (``where`` and the row's number)."""
    out: list[TimedRecord] = []
    for i, row in enumerate(rows, 1):
        step = _step_of(row.get(step_key))
        if step is None:
            if bad is not None:
                bad.skip(f"{where} {i}", f"{step_key} {row.get(step_key)!r} is not {STEP_RANGE}")
            continue

        def skip(name: str, why: str, at: str = f"{where} {i}") -> None:
            if bad is not None:
                bad.skip(f"{at} {name!r}", why)

        metrics = {k: v for k, v in _flatten_row(row, skip=skip) if k != step_key}
        out.append((step, metrics, _number(row.get("_timestamp"))))
    return _merge(out)


def read_wandb_csv(path: Path, step_key: str | None = None, bad: BadLines | None = None
                   ) -> list[TimedRecord]:
    """The W&B UI's CSV export: a history table (``_step``, metric columns) or a chart export
    (``Step``, ``RUN - metric`` columns with ``__MIN``/``__MAX`` companions). A row without a
    step, a cell that is not a finite number (an empty cell is a metric not logged at that
    step) and a column whose name the server refuses are told to ``bad``."""
    bad = bad if bad is not None else BadLines()
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        header = list(reader.fieldnames or [])
        key = step_key or next((k for k in ("_step", "Step", "step") if k in header), None)
        if key is None:
            raise ImportSourceError(f"{path}: no _step or Step column (use --step-key)")
        columns = [c for c in header if c != key and not c.startswith("_")
                   and not c.endswith(("__MIN", "__MAX"))]
        # A chart export names each column "RUN - metric": keep the metric when one run.
        prefixes = {c.split(" - ", 1)[0] for c in columns if " - " in c}
        strip = len(prefixes) == 1 and all(" - " in c for c in columns)
        names = {c: (c.split(" - ", 1)[1] if strip else c) for c in columns}
        problems = {c: metric_name_problem(names[c]) for c in columns}
        for c, problem in problems.items():
            if problem:
                bad.skip(f"{path} column {names[c][:60]!r}", f"the name {problem}")
        columns = [c for c in columns if not problems[c]]
        rows: list[TimedRecord] = []
        for row in reader:
            where = f"{path}:{reader.line_num}"
            step = _step_of(row.get(key))
            if step is None:
                bad.skip(where, f"{key} {row.get(key)!r} is not {STEP_RANGE}")
                continue
            metrics = {}
            for c in columns:
                cell = row.get(c) or None
                v = _number(cell)
                if v is not None:
                    metrics[names[c]] = v
                elif cell is not None and cell.strip():
                    bad.skip(f"{where} column {names[c]!r}", _why_not_a_value(cell))
            rows.append((step, metrics, _number(row.get("_timestamp") or None)))
    return _merge(rows)


def read_wandb_parquet(path: Path, bad: BadLines | None = None) -> list[TimedRecord]:
    """The run's ``history`` Parquet files (one file, or every ``*.parquet`` under a
    directory)."""
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ImportSourceError(
            "reading W&B Parquet history needs pyarrow:\n    pip install 'scalewatch[wandb]'"
        ) from exc
    files = sorted(path.rglob("*.parquet")) if path.is_dir() else [path]
    if not files:
        raise ImportSourceError(f"no .parquet files under {path}")
    rows: list[TimedRecord] = []
    for f in files:
        rows.extend(wandb_row_records(pq.read_table(f).to_pylist(), bad=bad, where=f"{f} row"))
    return _merge(rows)


def read_wandb_api(run_path: str, bad: BadLines | None = None) -> Imported:
    """``ENTITY/PROJECT/RUN_ID`` through the W&B API: every history row (``scan_history``
    pages through them; ``history()`` would sample)."""
    try:
        import wandb
    except ImportError as exc:
        raise ImportSourceError(
            f"{run_path!r} is not a file; reading it from W&B needs wandb and a key:\n"
            "    pip install wandb && wandb login"
        ) from exc
    run = wandb.Api().run(run_path)
    records = wandb_row_records(run.scan_history(page_size=1000), bad=bad,
                                where=f"{run_path} history row")
    return Imported(records, config={"wandb_run": run_path},
                    group=_group(getattr(run, "group", None)))


def read_wandb(source: str, step_key: str | None = None, bad: BadLines | None = None
               ) -> Imported:
    path = Path(source)
    if path.is_file() and path.suffix.lower() == ".csv":
        return Imported(read_wandb_csv(path, step_key, bad), config={"source": f"wandb:{source}"})
    if path.exists():
        return Imported(read_wandb_parquet(path, bad), config={"source": f"wandb:{source}"})
    if source.count("/") == 2 and not source.startswith(("/", ".")):
        return read_wandb_api(source, bad)
    raise ImportSourceError(f"{source} is neither a CSV/Parquet export nor ENTITY/PROJECT/RUN_ID")
