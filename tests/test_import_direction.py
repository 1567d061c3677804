"""Which package may import which (docs/architecture.md, "Import direction"), checked on the AST.

Every `import` in the project's source counts, including the ones inside functions: a lazy
import is still a dependency. A new package fails here until it is given its place below.

Units are named by folder: `server.store` is the folder server/store/, imported as
`scalewatch.server.store` (the service's folders install under the `scalewatch` namespace; their
folder names are never import names, see test_service_folders_are_imported_under_scalewatch).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OURS = ("server", "dashboard", "trainer_client", "bench", "migrations")
# Folders installed under the `scalewatch` namespace (pyproject.toml, [tool.setuptools]).
NAMESPACED = ("server", "dashboard", "migrations")
SERVER_UNITS = {p.stem for p in (ROOT / "server").iterdir() if p.suffix == ".py" or p.is_dir()}

# unit -> the other units it may import. A unit is a top-level package, or `server.<module>`.
# Third-party imports are not restricted here, except for server.fitting (see below).
ALLOWED: dict[str, set[str]] = {
    "server": set(),  # the package's __init__
    "trainer_client": set(),  # standard library only: it runs inside trainers
    "server.fitting": set(),  # pure numpy/scipy
    "server.scopes": {"server.domain"},
    # The shared shapes and rules (runs, projects, tokens, alerts, the fit-metric table): everyone
    # may import them; they import only the limits their checks need and the fitting engine's
    # prior checks (server.fitting is pure). Added to every unit below by DOMAIN_USERS.
    "server.domain": {"server.limits", "server.fitting"},
    "server.config": {"server.limits"},  # settings whose defaults are request limits
    "server.background": set(),
    "server.limits": {"trainer_client"},  # the limits client and server share
    "server.jsonbounds": {"server.limits"},  # a JSON body's shape, bounded before parsing
    "server.ingest": {"server.limits", "server.jsonbounds"},
    # the ingest decode's fast path
    "server.fastdecode": {"server.ingest", "server.limits", "server.jsonbounds"},
    "server.db": {"server.config", "migrations"},  # migrate.py locates the Alembic scripts
    # server.fitting: the fit's one declaration (FitResult's fields), for the stored record's
    # shape only (fit_records.py, server.fitting.result; see ONLY_IN and NARROW)
    "server.store": {"server.db", "server.ingest", "server.limits", "server.scopes",
                     "server.domain", "server.fitting"},
    "server.services": {"server.store", "server.fitting"},
    "server.refit": {"server.store", "server.services", "server.fitting", "server.background"},
    "server.alerts": {
        "server.store",
        "server.services",
        "server.db",
        "server.fitting",
        "server.background",
        "server.limits",
        "server.domain",
    },
    "server.demo": {
        "trainer_client",  # its public API only (see PRIVATE below)
        "server.config",
        "server.db",
        "server.store",
        "server.fitting",
    },
    # the background work and the nice child process it runs in (`scalewatch serve`)
    "server.refit_process": {"server.refit", "server.alerts", "server.config", "server.db",
                             "server.store"},
    "server.workers": {"server.refit_process", "server.demo", "server.config", "server.refit",
                       "server.store"},
    "server.api": {
        "server.config",
        "server.db",
        "server.scopes",
        "server.limits",
        "server.ingest",
        "server.fastdecode",
        "server.jsonbounds",
        "server.store",
        "server.services",
        "server.fitting",
        "server.alerts",
        "server.workers",
        "server.background",
        "server.domain",
    },
    "server.cli": {"server.config", "server.db", "server.store", "server.demo", "server.api"},
    "dashboard": {
        "server.store",
        "server.services",
        "server.fitting",
        "server.scopes",
        "server.limits",
        "server.alerts",  # the rule kinds, their checks and writes only (NARROW)
        "server.domain",
    },
    "migrations": {"server.db", "server.config"},
    "bench": {"trainer_client", "dashboard", "server.*"},  # anything but tests
}

# Everyone but the domain's own dependencies may import the domain package.
for _unit, _allowed in ALLOWED.items():
    if _unit not in ("server.domain", "server.fitting", "server.limits", "trainer_client"):
        _allowed.add("server.domain")

# (unit, imported unit) -> the only files that may have this edge, and why.
ONLY_IN: dict[tuple[str, str], set[str]] = {
    # The app assembly mounts the dashboard (lazily: API-only processes never load Dash).
    ("server.api", "dashboard"): {"server/api/app.py"},
    # The `scalewatch` command dispatches server subcommands when the server extra is installed.
    ("trainer_client", "server.cli"): {"trainer_client/cli.py"},
    ("trainer_client", "server.fitting"): {"trainer_client/cli.py"},
    ("server.store", "server.fitting"): {"server/store/fit_records.py"},
}
# (unit, imported unit) -> the only modules of it that unit may import: readers of the store
# see its protocol and record types, never the SQL implementation.
NARROW: dict[tuple[str, str], tuple[str, ...]] = {
    ("dashboard", "server.store"): ("server.store.base", "server.store.fit_records",
                                    "server.store.scoped"),  # a token's view of the store
    ("server.services", "server.store"): ("server.store.base", "server.store.fit_records"),
    ("server.refit", "server.store"): ("server.store.base", "server.store.fit_records"),
    ("server.alerts", "server.store"): ("server.store.base", "server.store.fit_records"),
    # The stored fit's shape extends the fit's declaration; the store never fits.
    ("server.store", "server.fitting"): ("server.fitting.result",),
    # The Alerts page: what a rule is (the kind registry), how one is checked and written (the
    # API's own functions), not its evaluation wiring or the webhook sender.
    ("dashboard", "server.alerts"): ("server.alerts.kinds", "server.alerts.rules",
                                     "server.alerts.checks", "server.alerts.rule_service"),
}
# Modules no other package may import (private to their package).
PRIVATE = {"trainer_client._http"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute_imports(path: Path) -> Iterator[str]:
    """Import names as written in `path`'s absolute imports (`from a import b` yields `a`)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.module


def _folder_name(name: str) -> str:
    """`scalewatch.server.store` -> `server.store`, the folder-based name units use."""
    head, _, rest = name.partition(".")
    if head == "scalewatch" and rest.split(".")[0] in NAMESPACED:
        return rest
    return name


def _imports(path: Path) -> Iterator[str]:
    """Full names of everything `path` imports (`from a import b` yields `a.b` and `a`), the
    service's packages by folder (`scalewatch.server.x` is `server.x`)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (_folder_name(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _folder_name(node.module or "")
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            yield base
            yield from (_folder_name(f"{base}.{alias.name}") for alias in node.names)


def _unit(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] not in OURS:
        return None
    if parts[0] == "server":
        if len(parts) == 1 or parts[1] not in SERVER_UNITS:
            return None  # `from server import limits` is counted as server.limits
        return f"server.{parts[1]}"
    return parts[0]


def _sources() -> Iterator[Path]:
    for top in OURS:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "data" not in path.relative_to(ROOT).parts:
                yield path


def test_every_import_goes_the_allowed_way() -> None:
    wrong = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        here = _unit(_module_name(path)) or _module_name(path)  # `server` itself
        assert here in ALLOWED, f"{rel}: unit {here} has no place in ALLOWED yet"
        allowed = ALLOWED[here]
        for name in set(_imports(path)):
            there = _unit(name)
            if there is None or there == here:
                continue
            ok = (
                there in allowed
                or (there.startswith("server.") and "server.*" in allowed)
                or rel in ONLY_IN.get((here, there), set())
            )
            narrow = NARROW.get((here, there))
            if ok and narrow and name != there and not name.startswith(narrow):
                if any(n.startswith(name) for n in narrow):
                    continue  # `from server.store import base` names the package first
                ok = False
            if not ok:
                wrong.append(f"{rel} imports {name if narrow else there}")
            wrong.extend(
                f"{rel} imports the private {p}"
                for p in PRIVATE
                if (name == p or name.startswith(p + ".")) and not p.startswith(here)
            )
    assert not wrong, "imports against the direction in docs/architecture.md:\n" + "\n".join(
        sorted(set(wrong))
    )


def test_service_folders_are_imported_under_scalewatch() -> None:
    """server/, dashboard/ and migrations/ exist only as `scalewatch.server` etc.: an import of
    a bare `server`, `dashboard` or `migrations` works in no install (issue 14)."""
    wrong = []
    for top in (*OURS, "tests"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for name in _absolute_imports(path):
                if name.split(".")[0] in NAMESPACED:
                    wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not wrong, "import these as scalewatch.<name>:\n" + "\n".join(sorted(set(wrong)))


def test_fitting_uses_only_numpy_and_scipy() -> None:
    """server.fitting is the numerical core: standard library, numpy and scipy (matplotlib only
    for the CLI's optional --plot)."""
    allowed = {"numpy", "scipy", "server"} | set(sys.stdlib_module_names)
    wrong = []
    for path in sorted((ROOT / "server" / "fitting").rglob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            if top and top not in allowed and not (path.name == "cli.py" and top == "matplotlib"):
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_domain_is_shapes_only() -> None:
    """server.domain holds the shapes every layer shares: of third-party packages only pydantic,
    and of ours only what ALLOWED lists for it (the limits and the fitting engine's prior checks;
    never the API, the store, the database or the dashboard), so any layer may import it without
    a cycle."""
    allowed = {"pydantic", "typing_extensions", "server"} | set(sys.stdlib_module_names)
    wrong = []
    for path in sorted((ROOT / "server" / "domain").rglob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            if top and top not in allowed:
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not wrong, "\n".join(sorted(set(wrong)))
