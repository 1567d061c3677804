"""Installing from the repository as the README says: the client-only wheel into a fresh venv
(offline), the service's wheel and its import names, scripts/run installing once and restarting
offline, the `plot` extra for `fit --plot`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx
import pytest
import tomllib

from tests.support.net import free_port
from tests.test_readme import shell_commands

ROOT = Path(__file__).resolve().parents[2]
# What the wheels are built from; copying it keeps the build (build/, *.egg-info) out of the tree.
SOURCES = ("pyproject.toml", "README.md", "trainer_client", "server", "dashboard", "migrations",
           "client", "scripts")
# The service's folders and their import names (pyproject.toml, [tool.setuptools]).
SERVICE = ("server", "dashboard", "migrations")
# Lists the top-level import names an interpreter sees (run with -I from an empty directory, so
# neither the working directory nor $PYTHONPATH adds any).
TOP_LEVEL = (
    "import pkgutil, sys; "
    "print(' '.join(sorted({m.name for m in pkgutil.iter_modules()}"
    " - set(sys.builtin_module_names))))"
)


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


def _top_level(py: Path, cwd: Path) -> set[str]:
    return set(_run([str(py), "-I", "-c", TOP_LEVEL], cwd=cwd).stdout.split())


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_client_wheel_installs_offline_into_a_fresh_venv(tmp_path: Path) -> None:
    """The README's client commands, offline: the trainer's environment gains one import name,
    `trainer_client`, and the `scalewatch` command; nothing of the service and no third-party
    package (none of the server's dependencies come along)."""
    src = _copy_sources(tmp_path / "scalewatch")
    [build] = [c for c in shell_commands("/path/to/scalewatch/scripts/build-client")]
    [install] = [c for c in shell_commands("pip install --no-index /path/to/scalewatch/dist/")]
    # The README's commands with this checkout's copy and this interpreter: the build uses the
    # setuptools already installed (the dev extra pins a recent one), so no index is needed.
    build = build.replace("/path/to/scalewatch", str(src))
    offline = {**os.environ, "PYTHON": sys.executable, "PIP_NO_INDEX": "1"}
    _run(build, shell=True, cwd=tmp_path, env=offline)
    [wheel] = (src / "dist").glob("scalewatch_client-*.whl")
    assert wheel.name == re.search(r"dist/(\S+\.whl)", install).group(1)  # type: ignore[union-attr]
    with zipfile.ZipFile(wheel) as zf:
        tops = {n.split("/")[0] for n in zf.namelist()}
    assert tops == {"trainer_client", wheel.name.split("-py3")[0] + ".dist-info"}

    venv = tmp_path / "trainer-env"
    _run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    empty = tmp_path / "empty"
    empty.mkdir()
    before = set(_run([str(py), "-m", "pip", "list", "--format=freeze"]).stdout.split())
    names_before = _top_level(py, empty)
    _run(f"{venv}/bin/{install.replace('/path/to/scalewatch', str(src))}", shell=True,
         cwd=tmp_path)
    after = set(_run([str(py), "-m", "pip", "list", "--format=freeze"]).stdout.split())
    assert {p.split("==")[0] for p in after - before} == {"scalewatch-client"}
    assert _top_level(py, empty) - names_before == {"trainer_client"}

    code = (
        "import importlib.util as u, trainer_client as sw; "
        "assert callable(sw.init) and callable(sw.flops); "
        "print([m for m in ('fastapi', 'sqlalchemy', 'numpy', 'scipy', 'dash', 'pydantic', "
        "'server', 'dashboard', 'migrations', 'scalewatch') if u.find_spec(m)])"
    )
    out = _run([str(py), "-I", "-c", code], cwd=empty)  # not the checkout: only the wheel counts
    assert out.stdout.strip() == "[]"
    # The command is there; server commands say how to get the server.
    help_ = _run([str(venv / "bin" / "scalewatch"), "--help"], cwd=empty)
    assert "sync" in help_.stdout and "serve" in help_.stdout
    serve = subprocess.run([str(venv / "bin" / "scalewatch"), "serve"], capture_output=True,
                           text=True, timeout=60, cwd=empty)
    assert serve.returncode == 2 and "scalewatch[server]" in serve.stderr
    assert "missing module: scalewatch.server" in serve.stderr


def test_client_wheel_follows_the_service_version() -> None:
    service = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    client = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())
    assert client["project"]["version"] == service["version"]
    assert client["project"]["dependencies"] == [] == service["dependencies"]
    assert client["project"]["scripts"] == service["scripts"]
    for extra, deps in client["project"]["optional-dependencies"].items():
        assert deps == service["optional-dependencies"][extra], extra
    assert client["tool"]["setuptools"]["packages"] == ["trainer_client"]


def _package_files(folder: str) -> set[str]:
    """What the wheel must carry of one service folder: every module, and the package data."""
    base = ROOT / folder
    found = set()
    for path in base.rglob("*"):
        rel = path.relative_to(ROOT)
        if path.is_file() and "__pycache__" not in rel.parts and path.suffix != ".pyc":
            found.add(f"scalewatch/{rel.as_posix()}")
    return found


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_service_wheel_claims_scalewatch_and_trainer_client_only(tmp_path: Path) -> None:
    """`pip install '.[server]'` installs the service as `scalewatch.server`,
    `scalewatch.dashboard` and `scalewatch.migrations` (`scalewatch` a namespace package) beside
    `trainer_client`: no generic top-level `server`, `dashboard` or `migrations`. The wheel carries
    every module and data file of the three folders, and works unpacked: the schema upgrades
    from its own migrations."""
    src = _copy_sources(tmp_path / "scalewatch")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
          "-q", "-w", str(tmp_path / "dist"), str(src)], cwd=tmp_path)
    [wheel] = (tmp_path / "dist").glob("scalewatch-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        top_level = zf.read(next(n for n in names if n.endswith(".dist-info/top_level.txt")))
    dist_info = wheel.name.split("-py3")[0] + ".dist-info"
    assert {n.split("/")[0] for n in names} == {"scalewatch", "trainer_client", dist_info}
    assert {n.split("/")[1] for n in names if n.startswith("scalewatch/")} == set(SERVICE)
    assert "scalewatch/__init__.py" not in names  # a PEP 420 namespace: nothing else claims it
    assert set(top_level.decode().split()) <= {"scalewatch", "trainer_client"}
    for folder in SERVICE:
        missing = _package_files(folder) - names
        assert not missing, f"the wheel lacks {sorted(missing)[:10]} (pyproject.toml packages?)"

    # Unpacked, ahead of this checkout's editable install on the path: imports come from the
    # wheel, and `scalewatch db upgrade` finds its Alembic scripts there.
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "SCALEWATCH_HOME": str(tmp_path / "home")}
    code = (
        "import importlib.util as u, scalewatch.server.api.app, scalewatch.dashboard.app, "
        "scalewatch.migrations as m, trainer_client; "
        "print(m.__file__, trainer_client.__file__, scalewatch.dashboard.app.__file__); "
        "print([n for n in ('server', 'dashboard', 'migrations') if u.find_spec(n)])"
    )
    out = _run([sys.executable, "-c", code], cwd=empty, env=env).stdout.splitlines()
    assert all(f.startswith(str(site)) for f in out[0].split()), out
    assert out[1] == "[]"
    db = tmp_path / "wheel.db"
    up = _run([sys.executable, "-m", "trainer_client.cli", "db", "upgrade", "--database-url",
               f"sqlite:///{db}"], cwd=empty, env=env)
    assert "database upgraded" in up.stdout and db.exists()


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
