"""Hostile input over HTTPS to real gunicorn: every answer keeps its contract, and no worker
dies on the way (a worker that crashed is replaced by the master with a new PID)."""

import logging
import os
import signal
import time

import pytest

from bench import fuzz
from demo.processes import issue_for_loopback
from tests.webhook.servers import WebhookProcess, client_context, publish

pytestmark = pytest.mark.e2e
WORKERS = 2


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    cert_dir, log_dir = tmp_path_factory.mktemp("tls"), tmp_path_factory.mktemp("logs")
    issued = issue_for_loopback()
    publish(cert_dir, issued)
    webhook = WebhookProcess(cert_dir, log_dir, "--audit-file", str(log_dir / "audit.log"), workers=WORKERS)
    try:
        webhook.wait_ready(client_context(issued.ca_crt))
        yield webhook, issued.ca_crt
    finally:
        webhook.stop()


@pytest.fixture(autouse=True)
def quiet_logs():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def test_hostile_requests_over_tls_crash_no_worker(server):
    webhook, ca_pem = server
    before = fuzz.wait_for_workers(webhook.popen.pid, WORKERS)
    assert len(before) == WORKERS
    figures = fuzz.explore(fuzz.tls_sender(webhook.port, ca_pem), examples=120, max_body_bytes=3 * 2**20)
    assert figures["violations"] == []
    assert figures["total"] == 120
    assert fuzz.worker_pids(webhook.popen.pid) == before
    assert webhook.popen.poll() is None


def test_the_worker_check_sees_a_dead_worker(server):
    """The control for the check above: a killed worker comes back with another PID."""
    webhook, _ = server
    before = fuzz.wait_for_workers(webhook.popen.pid, WORKERS)
    os.kill(min(before), signal.SIGKILL)
    deadline = time.monotonic() + 20
    while min(before) in (after := fuzz.wait_for_workers(webhook.popen.pid, WORKERS)) \
            and time.monotonic() < deadline:  # the master reaps the dead one, then forks the next
        time.sleep(0.05)
    assert after != before and min(before) not in after and len(after) == WORKERS
