"""The webhook under gunicorn over TLS for the HTTP tests, on `demo.processes.Process`.

What is theirs alone: certificates laid out as the kubelet mounts a Secret (so that rotation is
real), a client context that may trust several CAs or skip the name check, extra CLI flags, and a
launcher with the `webhook` subcommand only.
"""

import http.client
import os
import ssl
import sys
import time
from pathlib import Path

from demo.processes import LOOPBACK, Process, free_port
from gangkeeper.certs.issue import IssuedCerts

# The `gangkeeper webhook` subcommand alone: the test does not depend on the other subcommands.
_LAUNCH = """
import argparse, sys
from gangkeeper.webhook import cli
parser = argparse.ArgumentParser(prog="gangkeeper")
cli.add_parser(parser.add_subparsers())
args = parser.parse_args(sys.argv[1:])
sys.exit(args.run(args))
"""


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


def client_context(*ca_pems: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata="".join(pem.decode() for pem in ca_pems))
    return context


class WebhookProcess(Process):
    """`gangkeeper webhook` on a free loopback port, serving `cert_dir`; its output in `log_dir`."""

    def __init__(self, cert_dir: Path, log_dir: Path, *extra: str, workers: int = 2):
        self.port = free_port()
        super().__init__("webhook", [
            sys.executable, "-c", _LAUNCH, "webhook", "--bind", LOOPBACK, "--port", str(self.port),
            "--cert-dir", str(cert_dir), "--workers", str(workers), *extra,
        ], log_dir / f"webhook-{self.port}.log")

    def connect(self, context: ssl.SSLContext, timeout: float = 5) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(LOOPBACK, self.port, context=context, timeout=timeout)

    def wait_ready(self, context: ssl.SSLContext, timeout: float = 20) -> None:
        """With the test's own context: it may trust several CAs, or not check the certificate's names."""
        self.wait_until_ready(lambda: self.connect(context, timeout=1), timeout)

    def stop(self, timeout: float = 15) -> None:
        """Longer than gunicorn's graceful timeout (10 s): a slow drain ends in an exit, not SIGKILL."""
        super().stop(timeout)
