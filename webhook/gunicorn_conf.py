"""gunicorn settings of the webhook server: server concerns only (the policy's are Flask config).

Defaults chosen by measurement (bench/webhook.md): gthread workers keep the API server's HTTPS
connections alive, so a request costs no TLS handshake; the sync worker closes the connection
after every request and spends most of its time in handshakes.
"""

import os
from typing import Protocol

from gangkeeper.webhook import certreload, metrics

WORKER_CLASS = "gthread"
THREADS = 4
KEEPALIVE_SECONDS = 30
# The API server gives a webhook call at most 30 s (timeoutSeconds); ours is 5.
TIMEOUT_SECONDS = 30
GRACEFUL_TIMEOUT_SECONDS = 10


def settings(*, bind: str, port: int, workers: int, cert_dir: str, worker_class: str = WORKER_CLASS,
             threads: int = THREADS) -> dict:
    host = f"[{bind}]" if ":" in bind else bind
    return {
        "bind": [f"{host}:{port}"],
        "workers": workers,
        "worker_class": worker_class,
        "threads": threads,
        "certfile": os.path.join(cert_dir, "tls.crt"),
        "keyfile": os.path.join(cert_dir, "tls.key"),
        "ssl_context": certreload.ssl_context,
        "child_exit": child_exit,
        "keepalive": KEEPALIVE_SECONDS,
        "timeout": TIMEOUT_SECONDS,
        "graceful_timeout": GRACEFUL_TIMEOUT_SECONDS,
        # Imported once in the master: workers fork ready, and start in milliseconds.
        "preload_app": True,
        # Every decision is in the audit log already; errors still go to stderr.
        "accesslog": None,
        "errorlog": "-",
        # gunicorn ≥ 25 opens a control socket under $HOME: not wanted on a read-only root file
        # system, and two servers on one host would fight over it.
        "control_socket_disable": True,
        # The heartbeat file: tmpfs, so a slow or read-only disk never makes a worker look dead.
        "worker_tmp_dir": "/dev/shm" if os.path.isdir("/dev/shm") else None,
    }


class _ExitedWorker(Protocol):
    """What `child_exit` reads of gunicorn's worker. When the master calls the hook, `pid` is the
    worker's process id (types-gunicorn declares it str, for the "[booting]" a worker holds
    before it forks)."""

    pid: int


def child_exit(server: object, worker: _ExitedWorker) -> None:
    metrics.mark_worker_dead(worker.pid)
