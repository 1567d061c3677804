"""The real `scalewatch` command in a subprocess, its stderr collected as it is written."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tests.support.polling import wait_for


class CliProcess:
    """``python -m trainer_client.cli ARGS`` with its stderr read by a thread (``.err``)."""

    def __init__(self, *args: str, home: Path) -> None:
        env = dict(os.environ, SCALEWATCH_HOME=str(home), SCALEWATCH_FSYNC="0",
                   PYTHONUNBUFFERED="1")
        env.pop("SCALEWATCH_TOKEN", None)
        env.pop("SCALEWATCH_URL", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "trainer_client.cli", *args], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            errors="backslashreplace")
        self._lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._lines.append(line)

    @property
    def err(self) -> str:
        return "".join(self._lines)

    def wait_err(self, text: str, timeout: float = 60.0) -> None:
        """Until ``text`` appears on stderr (fails, with what it said, if the process ends)."""

        def seen() -> bool:
            if text in self.err:
                return True
            assert self.proc.poll() is None or text in self.err, (
                f"exited {self.proc.returncode} without saying {text!r}:\n{self.err}")
            return False

        wait_for(seen, timeout=timeout)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
        self._reader.join(timeout=10)

    def stop(self, timeout: float = 90.0) -> int:
        """SIGTERM, then its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def wait(self, timeout: float = 90.0) -> int:
        """Its exit code; a process still running after ``timeout`` is killed (and fails)."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"still running after {timeout} s:\n{self.err}") from None
        self._reader.join(timeout=10)
        return code


def run_cli(*args: str, home: Path, timeout: float = 120.0) -> tuple[int, str]:
    """Run the command to its end: (exit code, stderr)."""
    p = CliProcess(*args, home=home)
    return p.wait(timeout), p.err


def user_facing(text: str) -> bool:
    """No traceback and no Python bytes repr in what a person reads."""
    return "Traceback" not in text and not re.search(r"(?<![\w\\])b['\"]", text)
