"""The real gangkeeper processes the demo runs: the webhook (gunicorn over TLS) and the controller.

Both are started exactly as a user would start them (`python -m gangkeeper.cli webhook ...`),
with certificates issued by `certs.issue` for 127.0.0.1 and localhost; their logs go to files in
the demo's work directory, so that the terminal shows the scenario and the files show the rest.
"""

import datetime
import http.client
import ipaddress
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gangkeeper import names
from gangkeeper.certs.issue import IssuedCerts, issue
from sim.deployed import REPOSITORY

LOOPBACK = "127.0.0.1"


class ProcessError(RuntimeError):
    """A gangkeeper process did not start; the message ends with the tail of its log."""


@dataclass(frozen=True)
class WebhookCerts:
    directory: Path
    ca_pem: bytes


def issue_for_loopback() -> IssuedCerts:
    """A fresh CA and a serving certificate for the webhook Service, localhost and 127.0.0.1."""
    return issue(names.WEBHOOK_SERVICE, names.DEFAULT_NAMESPACE, datetime.datetime.now(datetime.UTC), 1,
                 ("localhost",), (ipaddress.ip_address(LOOPBACK),))


def issue_loopback_certs(directory: Path) -> WebhookCerts:
    """`issue_for_loopback`, written flat into `directory` for the webhook's --cert-dir."""
    issued = issue_for_loopback()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tls.crt").write_bytes(issued.tls_crt)
    (directory / "tls.key").write_bytes(issued.tls_key)
    (directory / "tls.key").chmod(0o600)
    (directory / "ca.crt").write_bytes(issued.ca_crt)
    return WebhookCerts(directory, issued.ca_crt)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


class Process:
    """One child process, its output in `log_path`, stopped with SIGTERM (then SIGKILL).

    `process_group` 0 starts it in a process group of its own (a subclass or instance sets it before
    starting): a Ctrl-C in the terminal then reaches only the parent, which stops it with SIGTERM."""

    process_group: int | None = None

    def __init__(self, name: str, command: list[str], log_path: Path):
        self.name, self.command, self.log_path = name, command, log_path
        with open(log_path, "wb") as log:
            self.popen = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                          cwd=REPOSITORY, process_group=self.process_group)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def failed(self, why: str) -> ProcessError:
        return ProcessError(f"{self.name}: {why} (log {self.log_path}):\n{self.log_tail()}")

    def check_running(self) -> None:
        if not self.alive():
            raise self.failed(f"exited with code {self.popen.returncode}")

    def wait_until_ready(self, connect: Callable[[], http.client.HTTPConnection], timeout: float) -> None:
        """GET /readyz on fresh connections until it answers 200; fail at once if the process exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_running()
            try:
                connection = connect()
                connection.request("GET", "/readyz")
                if connection.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise self.failed(f"not ready after {timeout:g} s")

    def stop(self, timeout: float = 10.0) -> None:
        if not self.alive():
            return
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def stop_all(processes: list[Process]) -> None:
    """SIGTERM to every process at once, then wait for each (SIGKILL after 10 s), so stopping takes the
    longest one's time, not the sum: gunicorn alone takes seconds while an API server keeps idle
    connections to it open."""
    for process in processes:
        if process.alive():
            process.popen.send_signal(signal.SIGTERM)
    for process in processes:
        process.stop()


class WebhookProcess(Process):
    """`gangkeeper webhook` on a loopback port: a free one, or `port` (to start it again where it was)."""

    def __init__(self, certs: WebhookCerts, workdir: Path, *, workers: int = 2, port: int | None = None):
        self.port = port or free_port()
        self.certs = certs
        self.audit_path = workdir / "webhook-audit.jsonl"
        super().__init__("webhook", [
            sys.executable, "-m", "gangkeeper.cli", "webhook", "--bind", LOOPBACK, "--port", str(self.port),
            "--cert-dir", str(certs.directory), "--workers", str(workers), "--audit-file", str(self.audit_path),
        ], workdir / "webhook.log")

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def wait_ready(self, timeout: float = 30.0, *, server_hostname: str | None = None) -> None:
        """Poll /readyz over TLS, verifying the certificate against our CA, as the API server does:
        for 127.0.0.1, or for `server_hostname` (the Service's name, which a certificate from
        `gangkeeper certs install` names instead of a loopback address)."""
        context = ssl.create_default_context(cadata=self.certs.ca_pem.decode())
        self.wait_until_ready(lambda: _HTTPSConnection(LOOPBACK, self.port, context, server_hostname or LOOPBACK),
                              timeout)


class _HTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to HOST:PORT, verifying the certificate for `server_hostname` (SNI and name check)."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext, server_hostname: str, timeout: float = 1):
        super().__init__(host, port, context=context, timeout=timeout)
        self._server_hostname = server_hostname

    def connect(self) -> None:
        raw = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self._server_hostname)


class ControllerProcess(Process):
    """`gangkeeper controller --kubeconfig K`, talking to the API server the kubeconfig names;
    managing groups in `namespace` only, or in every namespace when it is None."""

    def __init__(self, kubeconfig: Path, workdir: Path, *, namespace: str | None, identity: str | None = None):
        self.health_port, self.metrics_port = free_port(), free_port()
        self.audit_path = workdir / "controller-audit.jsonl"
        scope = ["--namespace", namespace] if namespace else []
        named = ["--identity", identity] if identity else []
        super().__init__("controller", [
            sys.executable, "-m", "gangkeeper.cli", "controller", "--kubeconfig", str(kubeconfig), *scope, *named,
            "--health-port", str(self.health_port), "--metrics-port", str(self.metrics_port),
            "--audit-file", str(self.audit_path),
        ], workdir / "controller.log")

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Poll /readyz: ready once its caches have synced from the API server."""
        self.wait_until_ready(lambda: http.client.HTTPConnection(LOOPBACK, self.health_port, timeout=1), timeout)
