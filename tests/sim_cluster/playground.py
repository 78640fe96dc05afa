"""`gangkeeper sim serve`, the playground, started as a user starts it, its output read as printed."""

import json
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
KUBECTL = GANGKEEPER.parent / "kubectl"  # `make install` puts kubectl beside it
SETTLE_SECONDS = 60
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


class PlaygroundUser:
    """A user's kubectl against a served playground: their kubeconfig from KUBECONFIG, and `.venv/bin`
    first on PATH, where kubectl finds the `kubectl-gang` plugin. Jobs and Gangs in `namespace`."""

    def __init__(self, kubeconfig: Path, work: Path, namespace: str = "team"):
        self.kubeconfig, self.work, self.namespace = kubeconfig, work, namespace
        self.env = {**os.environ, "PATH": f"{KUBECTL.parent}{os.pathsep}{os.environ.get('PATH', '')}",
                    "KUBECONFIG": str(kubeconfig)}

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run([str(KUBECTL), *args], input=stdin, env=self.env, cwd=self.work, capture_output=True,
                                text=True, timeout=60)
        assert not check or result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
        return result

    def apply(self, manifest: str) -> None:
        self.kubectl("apply", "-f", "-", stdin=manifest)

    def gang(self, name: str) -> dict | None:
        """The Gang named `name`, or of the Job `name` (its name, then a suffix)."""
        gangs = json.loads(self.kubectl("get", "gangs", "-n", self.namespace, "-o", "json").stdout)["items"]
        return next((g for g in gangs if g["metadata"]["name"] == name
                     or g["metadata"]["name"].startswith(f"{name}-")), None)

    def settled(self, name: str, phase: str) -> str:
        """The name of the Gang of `name` (a Job, or a group label) once it is in `phase`."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while (gang := self.gang(name)) is None or (gang.get("status") or {}).get("phase") != phase:
            assert time.monotonic() < deadline, f"{name} not {phase}: {self.kubectl('get', 'gangs,pods', '-A').stdout}"
            time.sleep(0.5)
        return gang["metadata"]["name"]

    def pods(self, job_name: str) -> dict[str, str]:
        """The Job's pods, each with the node it is bound to ('' for none)."""
        listed = json.loads(self.kubectl("get", "pods", "-n", self.namespace, "-l",
                                         f"batch.kubernetes.io/job-name={job_name}", "-o", "json").stdout)["items"]
        return {pod["metadata"]["name"]: pod["spec"].get("nodeName", "") for pod in listed}
