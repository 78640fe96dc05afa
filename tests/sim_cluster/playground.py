"""`gangkeeper sim serve`, the playground, started as a user starts it, its output read as printed."""

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sim.deployed import REPOSITORY

GANGKEEPER = Path(sys.executable).parent / "gangkeeper"  # the command a user runs
STARTUP_SECONDS = 45


class Served:
    """`gangkeeper sim serve ARGS` with its stdout read line by line on a thread."""

    def __init__(self, tmp_path: Path, *args: str):
        self.stderr_path = tmp_path / "serve.stderr"
        self.process = subprocess.Popen([str(GANGKEEPER), "sim", "serve", *args],
                                        cwd=REPOSITORY, stdout=subprocess.PIPE, stderr=self.stderr_path.open("w"),
                                        text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def banner(self) -> list[str]:
        """Every line up to `Ctrl-C stops it.`"""
        deadline, lines = time.monotonic() + STARTUP_SECONDS, []
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                continue
            assert line is not None, f"sim serve exited: {self.stderr_path.read_text()}"
            lines.append(line)
            if line == "Ctrl-C stops it.":
                return lines
        pytest.fail(f"no banner after {STARTUP_SECONDS} s: {lines}\n{self.stderr_path.read_text()}")

    def stop(self, timeout: float = 20) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise


def line_after(banner: list[str], prefix: str) -> str:
    return next(line for line in banner if line.startswith(prefix)).removeprefix(prefix).strip()
