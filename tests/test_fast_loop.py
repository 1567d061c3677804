"""`scripts/test -m "not slow"` is the fast loop: no live server, browser or CLI subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _collected(marker: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:dash", "--collect-only", "-q", "-m", marker],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return [line for line in out.stdout.splitlines() if "::" in line]


@pytest.mark.slow  # collects the suite twice
def test_live_server_tests_are_slow_and_the_rest_is_not() -> None:
    fast, slow = _collected("not slow"), _collected("slow")
    assert len(fast) > 200 and len(slow) > 30
    for node in fast:
        path = node.split("::")[0]
        assert not path.startswith(("tests/dashboard/test_browser.py",
                                    "tests/demo/test_demo_e2e.py",
                                    "tests/demo/test_simulate_cli.py")), node
        assert path != "tests/server/test_live_http.py", node
        assert not node.startswith("tests/test_readme.py::test_readme_curl"), node
        assert "test_simulate" not in node and "e2e" not in node, node
    # The in-process API tests stay in the fast loop.
    assert any(n.startswith("tests/server/test_runs_api.py") for n in fast)
    assert any(n.startswith("tests/fitting/test_fit.py") for n in fast)
    readme = (ROOT / "README.md").read_text()
    assert 'scripts/test -m "not slow"' in readme
