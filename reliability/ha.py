"""High availability (issue 6 §3), with the real processes on the live cluster emulation.

Controller: two replicas (`gangkeeper controller`, each with its own identity and API front end).
The leader is killed with SIGKILL (it hands nothing back); the follower, which watches the Lease,
takes over once the last renewal it saw is a lease duration old (15 s, the controller's): within
the lease duration of the kill. Takeover is measured from the kill, and from the dead leader's last
renewal, to the moment the API server commits the Lease with the follower as holder. The kill comes
at a random moment of the leader's renewal cycle, once the follower has watched two renewals (a
follower started a moment before counts from its first read, which may lag the last renewal). The
killed replica is started again and becomes the follower, so that every failover is of a leader
with a live follower. Afterwards the audit logs (one file
per replica; the controller writes `leader.started` / `leader.stopped` lines naming its identity)
must show that two replicas never acted at once: `acting_overlaps` is that check.

Webhook: gunicorn with two worker processes; while pods are created in a steady stream, one
worker is killed with SIGKILL; admissions must keep succeeding (the master starts a new worker,
the other serves meanwhile).
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import yaml

from gangkeeper import names
from reliability.stack import NAMESPACE, Stack, children, wait_for
from sim import spec as sim_spec
from sim.api import APIError

LEASE_DURATION = 15.0  # the controller's (controller/leader.py); no flag changes it
RETRY_PERIOD = 2.0
DECISIONS_ARE_NOT = ("leader.started", "leader.stopped")


# --- the audit check (pure) -------------------------------------------------------------------

def _moment(line: dict) -> float:
    return datetime.fromisoformat(line["ts"].replace("Z", "+00:00")).timestamp()


def acting_intervals(lines: list[dict]) -> tuple[list[tuple[float, float]], list[dict]]:
    """One replica's acting intervals from its audit lines, in order: each from a `leader.started`
    to its last decision before the next `leader.stopped` or start (a killed leader writes no stop).
    Also the decision lines written while the replica was not leading (none may be)."""
    intervals: list[list[float]] = []
    outside: list[dict] = []
    leading = False
    for line in lines:
        event, at = line.get("event"), _moment(line)
        if event == "leader.started":
            intervals.append([at, at])
            leading = True
        elif event == "leader.stopped":
            leading = False
        elif leading:
            intervals[-1][1] = at
        else:
            outside.append(line)
    return [(start, end) for start, end in intervals], outside


def acting_overlaps(logs: dict[str, list[dict]]) -> list[str]:
    """Where two replicas acted at once, or a replica acted without leading; empty when never."""
    problems = []
    spans = []
    for replica, lines in logs.items():
        intervals, outside = acting_intervals(lines)
        problems += [f"{replica} wrote {line['event']} at {line['ts']} while not leading" for line in outside]
        spans += [(start, end, replica) for start, end in intervals]
    spans.sort()
    for (start_a, end_a, a), (start_b, end_b, b) in zip(spans, spans[1:]):
        if a != b and start_b <= end_a:
            problems.append(f"{a} acted until {end_a:.3f} but {b} started acting at {start_b:.3f}")
    return problems


def read_audit(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


# --- the run ----------------------------------------------------------------------------------

@dataclass
class Result:
    failovers: int = 0
    takeover_seconds: list[float] = field(default_factory=list)
    since_renewal_seconds: list[float] = field(default_factory=list)
    lease_duration: float = LEASE_DURATION
    overlaps: list[str] = field(default_factory=list)
    decisions: dict[str, int] = field(default_factory=dict)
    jobs: int = 0
    jobs_completed: int = 0
    admissions_ok: int = 0
    admissions_failed: int = 0
    admissions_after_kill_ok: int = 0
    failures: list[str] = field(default_factory=list)
    worker_replaced_seconds: float | None = None
    failures_after_replacement: int = 0
    workers_before: list[int] = field(default_factory=list)
    workers_after: list[int] = field(default_factory=list)


def _job(name: str) -> tuple[str, dict]:
    document = {"nodes": [{"count": 1, "gpusPerNode": 8}],
                "workloads": [{"kind": "PyTorchJob", "name": name, "namespace": NAMESPACE, "size": 2,
                               "gpusPerPod": 1, "durationSeconds": 1}]}
    submission = sim_spec.submissions(sim_spec.load(yaml.safe_dump(document)))[0]
    return submission.resource, submission.manifest


def _succeeded(stack: Stack, name: str) -> bool:
    try:
        job = stack.api.get("pytorchjobs", name, namespace=NAMESPACE)
    except APIError:
        return False
    return any(c.get("type") == "Succeeded" and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or ())


class Admissions:
    """Creates a pod every `interval` seconds in the enforced namespace and counts the outcomes."""

    def __init__(self, stack: Stack, interval: float = 0.05):
        self.stack, self.interval = stack, interval
        self.ok = self.failed = 0
        self.failures: list[str] = []
        self.failed_at: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="admissions", daemon=True)
        self.count = 0

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            self.count += 1
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": f"probe-{self.count}", "namespace": NAMESPACE},
                   "spec": {"containers": [{"name": "c", "image": "busybox",
                                            "resources": {"requests": {"cpu": "10m"}}}]}}
            try:
                created = self.stack.api.create("pods", pod, namespace=NAMESPACE)
                self.stack.api.delete("pods", created["metadata"]["name"], namespace=NAMESPACE,
                                      grace_period_seconds=0)
                self.ok += 1
            except APIError as error:
                self.failed += 1
                self.failed_at.append(time.monotonic())
                self.failures.append(str(error)[:300])


def run(workdir: Path, *, failovers: int = 1, seed: int = 20261130, progress=lambda message: None) -> Result:
    result = Result()
    stack = Stack(workdir, real_webhook=True, webhook_workers=2)
    holders: list[tuple[float, str]] = []
    renewed: dict[str, float] = {}  # holder → when the API server last committed its Lease
    renewals: dict[str, int] = {}

    def lease_changed(event) -> None:
        if event.resource == "leases" and event.object["metadata"]["name"] == names.CONTROLLER_LEASE:
            holder = (event.object.get("spec") or {}).get("holderIdentity") or ""
            renewed[holder] = time.monotonic()
            renewals[holder] = renewals.get(holder, 0) + 1
            if not holders or holders[-1][1] != holder:
                holders.append((time.monotonic(), holder))

    unsubscribe = stack.api.subscribe(lease_changed)
    admissions = Admissions(stack)
    try:
        spec = sim_spec.load(yaml.safe_dump({"nodes": [{"count": 4, "gpusPerNode": 8, "namePrefix": "node"}]}))
        stack.start_cluster(spec)
        leader = stack.controller("replica-a", identity="replica-a", bind_timeout=60)
        leader.wait_ready()
        wait_for(lambda: holders and holders[-1][1] == leader.identity, 30, "replica-a leads")
        follower = stack.controller("replica-b", identity="replica-b", bind_timeout=60)
        follower.wait_ready()
        admissions.thread.start()

        def run_job(name: str) -> None:
            resource, manifest = _job(name)
            stack.api.create(resource, manifest, namespace=NAMESPACE)
            result.jobs += 1
            wait_for(lambda: _succeeded(stack, name), 60 + LEASE_DURATION, f"{name} succeeded")
            result.jobs_completed += 1

        run_job("before-failover")
        moments = random.Random(seed)
        for round_ in range(failovers):
            seen = renewals[leader.identity]
            wait_for(lambda: renewals[leader.identity] >= seen + 2, 3 * LEASE_DURATION, "two renewals")
            time.sleep(moments.uniform(0, RETRY_PERIOD))
            leader.kill()
            killed = time.monotonic()
            # A deadline, not a measurement: the measured takeover is reported, compared with the lease.
            wait_for(lambda: holders[-1][1] == follower.identity, 3 * LEASE_DURATION, f"{follower.name} leads")
            taken = next(at for at, holder in reversed(holders) if holder == follower.identity)
            result.takeover_seconds.append(taken - killed)
            result.since_renewal_seconds.append(taken - renewed[leader.identity])
            result.failovers += 1
            progress(f"ha: failover {round_ + 1}: {follower.name} took over {taken - killed:.1f} s after the kill")
            run_job(f"after-failover-{round_ + 1}")
            leader.restart()  # the killed replica comes back as the follower
            leader.wait_ready()
            leader, follower = follower, leader

        workers = children(stack.webhook.popen.pid)
        result.workers_before = workers
        ok_before = admissions.ok
        os.kill(workers[0], signal.SIGKILL)
        killed = time.monotonic()
        wait_for(lambda: len([w for w in children(stack.webhook.popen.pid) if w != workers[0]]) == 2, 60,
                 "gunicorn started a new worker")
        replaced = time.monotonic()
        result.worker_replaced_seconds = replaced - killed
        result.workers_after = children(stack.webhook.popen.pid)
        wait_for(lambda: admissions.ok >= ok_before + 40, 60, "40 admissions after the worker was killed")
        result.admissions_after_kill_ok = admissions.ok - ok_before
        result.failures_after_replacement = sum(1 for at in admissions.failed_at if at > replaced)
    finally:
        admissions.stop.set()
        if admissions.thread.is_alive():
            admissions.thread.join(10)
        unsubscribe()
        stack.close()
    result.admissions_ok, result.admissions_failed = admissions.ok, admissions.failed
    result.failures = admissions.failures[:5]
    logs = {process.name: read_audit(process.audit_path) for process in stack.controllers}
    result.decisions = {name: sum(1 for line in lines if line["event"] not in DECISIONS_ARE_NOT)
                        for name, lines in logs.items()}
    result.overlaps = acting_overlaps(logs)
    return result
