"""The ``scalewatch fit`` CLI, run as ``python -m scalewatch.server.fitting.cli`` (a subprocess)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scalewatch.server.fitting.result import PUBLIC_KEYS

from .helpers import table1_run

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scalewatch.server.fitting.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def curve_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    c, y, _ = table1_run("ScaleRL", 32000, 1)
    path = tmp_path_factory.mktemp("cli") / "run.csv"
    lines = ["step,gpu_hours,reward"] + [f"{i * 100},{a},{b}" for i, (a, b) in
                                          enumerate(zip(c, y, strict=True))]
    lines.insert(5, "400,,")  # an empty cell is skipped, not an error
    path.write_text("\n".join(lines) + "\n")
    return path


def test_json(curve_csv: Path) -> None:
    p = run_cli(str(curve_csv), "--compute", "gpu_hours", "--value", "reward", "--warmup",
                "1500", "--fit-until", "16000", "--target", "32000", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert tuple(d) == PUBLIC_KEYS
    assert d["target_compute"] == 32000 and d["fit_range"][1] <= 16000
    assert d["status"] in ("ok", "unidentified")


def test_table_and_options(curve_csv: Path) -> None:
    p = run_cli(str(curve_csv), "--compute", "gpu_hours", "--value", "reward", "--warmup",
                "1500", "--r0", "0.3", "--range", "0", "1")
    assert p.returncode == 0, p.stderr
    for word in ("status", "A", "B", "C_mid", "R0", "0.3000  (given)", "predicted"):
        assert word in p.stdout


def test_b_prior_is_used_and_named(curve_csv: Path) -> None:
    args = (str(curve_csv), "--compute", "gpu_hours", "--value", "reward", "--warmup", "1500",
            "--fit-until", "8000", "--b-prior", "0.65", "0.2")
    p = run_cli(*args, "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["prior"]["B"] == {"median": 1.9155, "log_sd": 0.2, "dof": 4.0}
    p = run_cli(*args)
    assert p.returncode == 0, p.stderr
    assert re.search(r"\nB prior +median 1\.91\d, ln-scale 0\.200 \(t, 4 dof\)\n", p.stdout)


def test_paper_method(curve_csv: Path) -> None:
    p = run_cli(str(curve_csv), "--compute", "gpu_hours", "--value", "reward", "--warmup",
                "1500", "--method", "paper", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["method"] == "paper" and abs(d["A"] - 0.61) <= 0.03


def test_plot_written(curve_csv: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "fit.png"
    p = run_cli(str(curve_csv), "--compute", "gpu_hours", "--value", "reward", "--warmup",
                "1500", "--fit-until", "16000", "--plot", str(out))
    assert p.returncode == 0, p.stderr
    assert out.stat().st_size > 5000
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("content", "args", "needle"),
    [
        (None, (), "no such file"),
        ("", (), "empty"),
        ("compute,value\n1,0.1\n2,abc\n", (), "non-numeric"),
        ("compute,reward\n1,0.1\n", (), "no column 'value'"),
        ("compute,value\n", (), "no data"),
        ("compute,value\n1,0.1\n", ("--range", "1", "0"), "LO < HI"),
        ("compute,value\n1,0.1\n", ("--method", "nope"), "invalid choice"),
        # The same range check, in the same words, as the API's noise_prior fields.
        ("compute,value\n1,0.1\n", ("--noise-prior", "1.5", "0.1"),
         "mean 1.5 must lie in [0, 0.98]"),
        ("compute,value\n1,0.1\n", ("--noise-prior", "0.5", "0"), "sd 0.0 must lie in (0, 1]"),
        ("compute,value\n1,0.1\n", ("--b-prior", "0.6", "-1"), "sd -1.0 (of ln B) must lie"),
    ],
)
def test_bad_input_exits_2(tmp_path: Path, content: str | None, args: tuple, needle: str) -> None:
    f = tmp_path / "bad.csv"
    if content is not None:
        f.write_text(content)
    p = run_cli(str(f), *args)
    assert p.returncode == 2
    assert needle in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert p.stdout == ""


def test_insufficient_data_is_not_an_error(tmp_path: Path) -> None:
    f = tmp_path / "short.csv"
    f.write_text("compute,value\n0,0.3\n100,0.31\n200,0.33\n")
    p = run_cli(str(f), "--json")
    assert p.returncode == 0
    assert json.loads(p.stdout)["status"] == "insufficient_data"


def test_main_in_process(curve_csv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from scalewatch.server.fitting.cli import main

    assert main([str(curve_csv), "--compute", "gpu_hours", "--value", "reward", "--json"]) == 0
    # the point at compute 0 gives R0, it is not a fit point
    assert json.loads(capsys.readouterr().out)["n_points"] == 120
    assert main(["/nonexistent.csv"]) == 2


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--target", "-5"), "--target"),  # was "predicted 0.3094" at compute -5
        (("--target", "0"), "--target"),
        (("--target", "nan"), "--target"),
        (("--target", "inf"), "--target"),
        (("--warmup", "nan"), "--warmup"),  # was every point dropped, no word why
        (("--warmup", "-1"), "--warmup"),
        (("--fit-until", "-1"), "--fit-until"),
        (("--r0", "nan"), "--r0"),  # was a LinAlgError traceback
        (("--range", "nan", "1"), "--range"),
        (("--range", "0", "inf"), "--range"),
    ],
)
def test_options_out_of_the_apis_bounds_exit_2(
    curve_csv: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], needle: str
) -> None:
    """The options take the bounds of POST /api/v1/fit's fields (finite; warmup >= 0; fit-until
    and target > 0): the CLI took any float, printed a forecast at a negative target, dropped
    every point for a NaN warm-up and raised a traceback for a NaN R0."""
    from scalewatch.server.fitting.cli import main

    assert main([str(curve_csv), "--compute", "gpu_hours", "--value", "reward", *args]) == 2
    out = capsys.readouterr()
    assert out.out == "" and needle in out.err and len(out.err.strip().splitlines()) == 1, out


def test_points_the_engine_cannot_fit_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Values at the ends of float range break the engine: the API answers 422 "these points
    cannot be fitted"; the CLI raised a traceback. Now one line and exit 2."""
    from scalewatch.server.fitting.cli import main

    f = tmp_path / "extreme.csv"
    f.write_text("compute,value\n" + "".join(
        f"{i},{-1e308 if i % 2 else 1e308}\n" for i in range(1, 49)))
    assert main([str(f)]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "cannot be fitted" in out.err, out
    assert len(out.err.strip().splitlines()) == 1
