"""Installing from the repository as the README says: the client wheel into a fresh venv (offline),
scripts/run installing once and restarting offline, the `plot` extra for `fit --plot`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import tomllib

from tests.support.net import free_port
from tests.test_readme import shell_commands

ROOT = Path(__file__).resolve().parents[2]
# What a wheel is built from; copying it keeps the build (build/, *.egg-info) out of the tree.
SOURCES = ("pyproject.toml", "README.md", "trainer_client", "server", "dashboard", "migrations")


def _copy_sources(dest: Path) -> Path:
    dest.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)
    return dest


def _run(cmd: list[str] | str, **kw: object) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240, **kw)  # type: ignore[call-overload]
    assert out.returncode == 0, (cmd, out.stdout[-3000:], out.stderr[-3000:])
    return out


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_client_wheel_installs_offline_into_a_fresh_venv(tmp_path: Path) -> None:
    """The README's wheel commands, offline: the trainer gets `trainer_client` and no
    third-party package at all (none of the server's dependencies come along)."""
    src = _copy_sources(tmp_path / "scalewatch")
    [build] = [c for c in shell_commands("python -m pip wheel")]
    [install] = [c for c in shell_commands("pip install --no-index dist/")]
    # The README's command, with this checkout's copy, this interpreter, and no index: the
    # build uses the setuptools already installed (the dev extra pins a recent one).
    build = build.replace("/path/to/scalewatch", str(src)).replace("python ", f"{sys.executable} ")
    _run(f"{build} --no-build-isolation --no-index", shell=True, cwd=tmp_path)
    [wheel] = (tmp_path / "dist").glob("scalewatch-*.whl")
    assert wheel.name == re.search(r"dist/(\S+\.whl)", install).group(1)  # type: ignore[union-attr]

    venv = tmp_path / "trainer-env"
    _run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    before = set(_run([str(py), "-m", "pip", "list", "--format=freeze"]).stdout.split())
    _run(f"{venv}/bin/{install}", shell=True, cwd=tmp_path)
    after = set(_run([str(py), "-m", "pip", "list", "--format=freeze"]).stdout.split())
    assert {p.split("==")[0] for p in after - before} == {"scalewatch"}

    code = (
        "import importlib.util as u, trainer_client as sw; "
        "assert callable(sw.init) and callable(sw.flops); "
        "print([m for m in ('fastapi', 'sqlalchemy', 'numpy', 'scipy', 'dash', 'pydantic') "
        "if u.find_spec(m)])"
    )
    out = _run([str(py), "-c", code], cwd=tmp_path)  # not the checkout: only the wheel counts
    assert out.stdout.strip() == "[]"
    # The command is there; server commands say how to get the server.
    help_ = _run([str(venv / "bin" / "scalewatch"), "--help"], cwd=tmp_path)
    assert "sync" in help_.stdout and "serve" in help_.stdout
    serve = subprocess.run([str(venv / "bin" / "scalewatch"), "serve"], capture_output=True,
                           text=True, timeout=60, cwd=tmp_path)
    assert serve.returncode == 2 and "scalewatch[server]" in serve.stderr


def test_plot_extra_is_what_fit_plot_needs() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    plot = meta["optional-dependencies"]["plot"]
    assert any(d.startswith("matplotlib") for d in plot)
    assert not meta["dependencies"]  # the client stays dependency-free
    run = (ROOT / "scripts" / "run").read_text()
    assert re.search(r'extras="server,plot"', run)
    # `--plot` is what the README's fit example uses, and the extra the README names.
    assert any("--plot" in c for c in shell_commands(".venv/bin/scalewatch fit"))
    import matplotlib  # installed by the dev extra through the plot extra

    assert matplotlib.__version__


def _serve_once(env: dict[str, str], timeout: float) -> str:
    """Start scripts/run, wait until it is ready, stop it; its output."""
    port = free_port()
    proc = subprocess.Popen(
        [str(ROOT / "scripts" / "run"), "--no-auth"],
        env={**env, "SCALEWATCH_PORT": str(port)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        ready = proc.poll() is None and time.monotonic() < deadline
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 15)
        out, _ = proc.communicate(timeout=30)
    assert ready, f"scripts/run did not serve within {timeout} s:\n{out[-3000:]}"
    return out


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_scripts_run_installs_once_and_restarts_offline(tmp_path: Path) -> None:
    env = {**os.environ, "SCALEWATCH_HOME": str(tmp_path / "home")}
    _serve_once(env, 240)  # installs if pyproject.toml changed since the last install
    stamps = list((ROOT / ".venv").glob(".scalewatch-installed-server*"))
    assert stamps, "scripts/run left no install stamp"
    # Offline: no index reachable. A second start must not run pip at all.
    offline = {**env, "PIP_NO_INDEX": "1", "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
               "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"}
    out = _serve_once(offline, 120)
    assert "installing" not in out, out
    assert "serving on http://127.0.0.1:" in out
