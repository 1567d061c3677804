"""``scalewatch fit FILE.csv``: fit one curve from a CSV file.

    python -m scalewatch.server.fitting.cli FILE.csv [--compute COL] [--value COL] [--r0 X]
        [--warmup C] [--fit-until C] [--target C] [--method default|paper] [--range LO HI] [--json]
        [--plot out.png]

Exit codes: 0 fitted (whatever the status), 2 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import numpy as np

from . import predict, predict_band
from .b_prior import check_b_prior
from .fit import fit_curve
from .model import value_range_problem
from .noise_prior import check_rho_prior
from .result import FitOptions, FitResult


class InputError(Exception):
    """A problem with the user's file or arguments (reported in one line, exit 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line + exit 2, like every other input error
        raise InputError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="scalewatch fit", description="Fit the ScaleRL sigmoid to a CSV curve.")
    p.add_argument("file", help="CSV with a header row")
    p.add_argument("--compute", default="compute", help="compute column (default: compute)")
    p.add_argument("--value", default="value", help="metric column (default: value)")
    p.add_argument("--r0", type=float, help="fix R0 (default: value at compute 0, else fitted)")
    p.add_argument("--warmup", type=float, default=0.0, help="exclude compute below this")
    p.add_argument("--fit-until", type=float, help="fit only compute <= this")
    p.add_argument("--target", type=float, help="extrapolate to this compute (default: max)")
    p.add_argument("--method", choices=("default", "paper"), default="default")
    p.add_argument("--range", nargs=2, type=float, metavar=("LO", "HI"), default=(0.0, 1.0),
                   help="value range of the metric, bounds A (default: 0 1)")
    p.add_argument("--noise-prior", nargs=2, type=float, metavar=("MEAN", "SD"),
                   help="prior on the evaluation noise's AR(1) coefficient rho, e.g. the "
                        "noise_rho of a finished run on the same evaluation set")
    p.add_argument("--b-prior", nargs=2, type=float, metavar=("CENTRE", "SCALE"),
                   help="Student-t prior on ln B (4 degrees of freedom), e.g. the mean and "
                        "spread of ln B over a project's finished runs")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--plot", metavar="OUT.png", help="write a plot of the fit")
    return p


def read_csv(path: str, ccol: str, vcol: str) -> tuple[np.ndarray, np.ndarray]:
    """Read two numeric columns; empty cells and NaN are allowed (skipped by the fitter)."""
    f = Path(path)
    if not f.is_file():
        raise InputError(f"{path}: no such file")
    try:
        with f.open(newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise InputError(f"{path}: cannot read CSV ({e})") from None
    if not rows or not any(h.strip() for h in rows[0]):
        raise InputError(f"{path}: empty file or no header row")
    header = [h.strip() for h in rows[0]]
    for col in (ccol, vcol):
        if col not in header:
            raise InputError(f"{path}: no column {col!r} (columns: {', '.join(header)})")
    ic, iv = header.index(ccol), header.index(vcol)
    cs, vs = [], []
    for lineno, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        try:
            c = row[ic].strip() if ic < len(row) else ""
            v = row[iv].strip() if iv < len(row) else ""
            cs.append(float(c) if c else math.nan)
            vs.append(float(v) if v else math.nan)
        except ValueError:
            raise InputError(f"{path}:{lineno}: non-numeric value in {ccol!r}/{vcol!r}") from None
    if not cs:
        raise InputError(f"{path}: no data rows")
    return np.array(cs), np.array(vs)


def _fmt(v: float | None, spec: str = ".4g") -> str:
    return "-" if v is None or not math.isfinite(v) else format(v, spec)


def _checked_prior(values: list[float] | None, check: Callable[[float, float], None],
                   flag: str) -> tuple[float, float] | None:
    """A prior's two numbers from the command line, refused (exit 2, naming ``flag``) by the
    same range check the API uses; None when the flag is absent."""
    if not values:
        return None
    try:
        check(values[0], values[1])
    except ValueError as e:
        raise InputError(f"{flag}: {e}") from None
    return values[0], values[1]


def _check_bounds(args: argparse.Namespace) -> None:
    """The bounds POST /api/v1/fit puts on the same fields (`FitRequest`): finite, warm-up not
    negative, fit-until and target positive. Outside them a fit forecast at compute -5, a NaN
    warm-up dropped every point and a NaN R0 broke the engine."""
    for flag, value, least in (("--r0", args.r0, None), ("--warmup", args.warmup, "ge"),
                               ("--fit-until", args.fit_until, "gt"),
                               ("--target", args.target, "gt")):
        if value is None:
            continue
        if not math.isfinite(value):
            raise InputError(f"{flag} must be a finite number, got {value}")
        if least == "ge" and value < 0:
            raise InputError(f"{flag} must not be negative, got {value:g}")
        if least == "gt" and value <= 0:
            raise InputError(f"{flag} must be positive, got {value:g}")
    if not all(math.isfinite(v) for v in args.range):
        lo, hi = args.range
        raise InputError(f"--range LO HI must be finite numbers, got {lo} {hi}")


def _iv(p: tuple[float, float] | None, spec: str = ".4g") -> str:
    return "" if p is None else f"  [{_fmt(p[0], spec)}, {_fmt(p[1], spec)}]"


def table(res: FitResult) -> str:
    ci = res.ci or {}
    rho_prior = (res.prior or {}).get("rho")
    rows = [
        ("status", res.status + (f"  ({res.message})" if res.message else "")),
        ("method", res.method),
        ("A", _fmt(res.A, ".4f") + _iv(ci.get("A"), ".4f")
         + ("" if res.A is not None or res.A_lower_bound is None
            else f"  (A >= {res.A_lower_bound:.4f})")),
        ("B", _fmt(res.B, ".3f") + _iv(ci.get("B"), ".3f")),
        ("C_mid", _fmt(res.C_mid) + _iv(ci.get("C_mid"))),
        ("R0", f"{_fmt(res.R0, '.4f')}  ({res.r0_source})"),
        ("points", str(res.n_points)),
        ("fit range", "-" if res.fit_range is None
         else f"{_fmt(res.fit_range[0])} .. {_fmt(res.fit_range[1])}"),
        ("target", _fmt(res.target_compute)),
        ("predicted", _fmt(res.predicted_at_target, ".4f")
         + _iv(res.predicted_interval, ".4f")),
        ("rmse", _fmt(res.rmse, ".4g")),
        ("noise rho", "-" if res.rho is None else f"{res.rho[0]:.3f} (sd {res.rho[1]:.3f})"
         + ("" if rho_prior is None else
            f"  (prior {rho_prior['mean']:.3f}, sd {rho_prior['sd']:.3f})")),
    ]
    if (b_prior := (res.prior or {}).get("B")) is not None:
        rows.append(("B prior", f"median {b_prior['median']:.3f}, ln-scale "
                                f"{b_prior['log_sd']:.3f} (t, {b_prior['dof']:g} dof)"))
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)


def plot(res: FitResult, c: np.ndarray, y: np.ndarray, opts: FitOptions, out: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--plot needs matplotlib (pip install matplotlib)") from None
    ok = np.isfinite(c) & np.isfinite(y) & (c > 0)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(c[ok], y[ok], "*", ms=5, color="tab:blue", label="evaluations")
    if res.fit_range is not None and res.params is not None:
        lo, hi = res.fit_range
        end = max(res.target_compute or hi, hi, float(np.nanmax(c[ok])) if ok.any() else hi)
        fit_c = np.geomspace(lo, hi, 200)
        ax.plot(fit_c, predict(res, fit_c), "-", color="tab:red", label="fit")
        if end > hi:
            ext = np.geomspace(hi, end, 200)
            ax.plot(ext, predict(res, ext), "--", color="tab:red", label="extrapolation")
            blo, bhi = predict_band(res, ext)
            if np.isfinite(blo).any():
                ax.fill_between(ext, blo, bhi, color="tab:red", alpha=0.15, label="95% band")
    if opts.warmup > 0 and ok.any():
        ax.axvspan(float(np.nanmin(c[ok])), opts.warmup, color="grey", alpha=0.15,
                   label="warm-up (excluded)")
    ax.set_xscale("log")
    ax.set_xlabel("compute")
    ax.set_ylabel("metric")
    a = "-" if res.A is None else f"{res.A:.3f}"
    ax.set_title(f"{res.status}: A={a}  B={_fmt(res.B, '.2f')}  C_mid={_fmt(res.C_mid)}")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(out, dpi=110)
    except OSError as e:
        raise InputError(f"cannot write {out}: {e}") from None
    finally:
        plt.close(fig)


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
        _check_bounds(args)
        c, y = read_csv(args.file, args.compute, args.value)
        lo, hi = args.range
        if not lo < hi:
            raise InputError("--range LO HI needs LO < HI")
        problem = value_range_problem((lo, hi))
        if problem:
            raise InputError(f"--range LO HI: {problem}")
        prior = _checked_prior(args.noise_prior, check_rho_prior, "--noise-prior MEAN SD")
        b_prior = _checked_prior(args.b_prior, check_b_prior, "--b-prior CENTRE SCALE")
        opts = FitOptions(r0=args.r0, warmup=args.warmup, fit_until=args.fit_until,
                          target_compute=args.target, value_range=(lo, hi), method=args.method,
                          noise_prior=prior, b_prior=b_prior)
        try:
            res = fit_curve(c, y, opts)
        except Exception as e:  # noqa: BLE001 - as the API's 422: values at float's ends
            raise InputError(f"these points cannot be fitted ({type(e).__name__}: {e})") from None
        if args.plot:
            plot(res, c, y, opts, args.plot)
    except InputError as e:
        print(f"scalewatch fit: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(res.to_dict(), indent=2))
    else:
        print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
