"""Real webhook servers for tests and the benchmark: certificates on disk, gunicorn in a subprocess."""

import datetime
import http.client
import ipaddress
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

from certs.issue import IssuedCerts, issue

LOOPBACK = "127.0.0.1"
# The `gangkeeper webhook` subcommand alone: the test does not depend on the other subcommands.
_LAUNCH = """
import argparse, sys
from webhook import cli
parser = argparse.ArgumentParser(prog="gangkeeper")
cli.add_parser(parser.add_subparsers())
args = parser.parse_args(sys.argv[1:])
sys.exit(args.run(args))
"""


def issue_for_loopback() -> IssuedCerts:
    return issue("gangkeeper-webhook", "gangkeeper", datetime.datetime.now(datetime.timezone.utc), 1,
                 dns_names=("localhost",), ips=(ipaddress.ip_address(LOOPBACK),))


def publish(cert_dir: Path, issued: IssuedCerts) -> None:
    """Lay the files out as the kubelet mounts a Secret: tls.crt → ..data/tls.crt, and a
    rotation atomically swaps the `..data` symlink to a new timestamped directory."""
    version = cert_dir / f"..{time.time_ns()}"
    version.mkdir(parents=True)
    (version / "tls.crt").write_bytes(issued.tls_crt)
    (version / "tls.key").write_bytes(issued.tls_key)
    (version / "ca.crt").write_bytes(issued.ca_crt)
    staging = cert_dir / "..data_tmp"
    staging.symlink_to(version.name)
    os.replace(staging, cert_dir / "..data")
    for name in ("tls.crt", "tls.key", "ca.crt"):
        if not (cert_dir / name).is_symlink():
            (cert_dir / name).symlink_to(f"..data/{name}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def client_context(*ca_pems: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata="".join(pem.decode() for pem in ca_pems))
    return context


class WebhookProcess:
    """`gangkeeper webhook` on a free loopback port, stopped with SIGTERM."""

    def __init__(self, cert_dir: Path, log_dir: Path, *extra: str, workers: int = 2):
        self.port = free_port()
        self.stderr_path = log_dir / f"webhook-{self.port}.log"
        command = [sys.executable, "-c", _LAUNCH, "webhook", "--bind", LOOPBACK, "--port", str(self.port),
                   "--cert-dir", str(cert_dir), "--workers", str(workers), *extra]
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr,
                                            cwd=Path(__file__).resolve().parents[2])

    def connect(self, context: ssl.SSLContext, timeout: float = 5) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(LOOPBACK, self.port, context=context, timeout=timeout)

    def wait_ready(self, context: ssl.SSLContext, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"webhook exited: {self.stderr_path.read_text()}")
            try:
                connection = self.connect(context, timeout=1)
                connection.request("GET", "/readyz")
                if connection.getresponse().status == 200:
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"webhook not ready after {timeout} s: {self.stderr_path.read_text()}")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
