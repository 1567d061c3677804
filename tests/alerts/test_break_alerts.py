"""`asymptote_drop` on the engine's break test, refitting after every evaluation as the server
does (without the HTTP round trips, as ``bench/alerts.py`` replays runs): persistent noise
raises no alarm, a clean break is caught within a few evaluations (issue 34 item 3)."""

from __future__ import annotations

import numpy as np

from scalewatch.server.alerts.evaluate import a_interval, asymptote_drop
from scalewatch.server.fitting import FitOptions, FitResult, fit_curve
from scalewatch.server.fitting.breaks import Z_BREAK, as_normal_z, effective_dof
from scalewatch.server.fitting.synth import make_run

C_MID, END = 2542.0, 8 * 2542.0  # Table 1's ScaleRL run, 8 x C_mid long
FIRST = 15  # the first refit sees this many evaluations


def _opened(c: np.ndarray, y: np.ndarray) -> list[int]:
    """The evaluation counts at which an `asymptote_drop` alert (delta 0.02) opens."""
    opened: list[int] = []
    active, best, previous = False, None, None
    for n in range(FIRST, c.size + 1):
        res: FitResult = fit_curve(c[:n], y[:n], FitOptions(target_compute=END),
                                   previous=previous)
        previous = res if res.status != "insufficient_data" else None
        fit = res.to_dict()
        verdict = asymptote_drop({"delta": 0.02}, fit, best, active)
        if verdict.fire is True and not active:
            opened.append(n)
            active = True
        elif verdict.fire is False:
            active = False
        cur, top = a_interval(fit), a_interval(best)
        if cur is not None and (top is None or cur[1] > top[1]):
            best = fit
    return opened


def test_a_departure_on_a_persistent_noise_scale_is_read_through_student_t() -> None:
    """Few effective degrees of freedom (40 prefix residuals with rho 0.8 vary like 8
    independent ones): a z just past the threshold is noise, a large one is still a break;
    with many degrees of freedom the z is unchanged."""
    dof = effective_dof(40, 3, 0.8)
    assert 7 <= dof <= 9
    assert as_normal_z(-3.6, dof) > -Z_BREAK
    assert as_normal_z(-8.0, dof) < -Z_BREAK
    assert effective_dof(40, 3, 0.0) == 37
    assert abs(as_normal_z(-3.6, effective_dof(100_000, 3, 0.0)) + 3.6) < 0.01
    assert as_normal_z(2.0, 3.0) == 2.0  # only falls are read


def test_a_stable_run_with_noisy_persistent_evaluations_raises_no_alert() -> None:
    """AR(1) noise with sd 0.02 and rho 0.9: long stretches below the curve are the noise's
    own; refitted after every one of 80 evaluations, the run raises no alert."""
    rng = np.random.default_rng(11)
    c, y, _ = make_run(0.61, 1.92, C_MID, END, rng, n_evals=80, sigma=0.02, rho=0.9,
                       c_lin=1e-9)
    assert _opened(c, y) == []


def test_a_clean_break_is_detected_within_a_few_evaluations() -> None:
    """From half its compute (50 evaluations in) the run falls by 0.10 at once (noise sd 0.01,
    rho 0.5): the alert opens once, within 6 evaluations of the fall (measured: 3-4; an
    oracle that knows the curve and the noise needs 3 at 0.35% false alarms a run)."""
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        c, y, _ = make_run(0.61, 1.92, C_MID, END, rng, n_evals=100, rho=0.5, c_lin=1e-9)
        start = int(np.searchsorted(c, END / 2))
        y = y - 0.10 * (np.arange(c.size) > start)
        opened = _opened(c[: start + 12], y[: start + 12])
        assert len(opened) == 1 and start < opened[0] <= start + 6, (seed, start, opened)
