"""Faults in the control loop (issue 6 §2), on the live cluster emulation with a real controller process.

A replay of PyTorchJobs (seeded sizes, GPUs per pod, durations and arrivals) runs while:
- the controller is killed with SIGKILL at random moments and restarted (the kubelet restarting
  its container; it keeps its leader-election identity, so it takes its own Lease back at once
  instead of waiting out a lease duration — takeover by another replica is `ha.py`'s subject);
- its API front end answers a share of requests 500 or 429, a share of writes 409 Conflict, cuts
  watch streams after a number of events, and answers watches with 410 Gone in bursts;
- members of running groups, members of waiting groups and nodes under running groups are
  deleted (a deleted node's pods are then force-deleted, as the pod garbage collector does, and
  the node registers again a little later).

`sim.invariants.Checker` watches the API server (`sim.invariants.Watch`) and checks every committed change.
The run ends when every job has succeeded (or at a deadline, which then counts as not completed).
"""

from __future__ import annotations

import faulthandler
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gangkeeper import names
from reliability.stack import NAMESPACE, Stack
from sim import spec as sim_spec
from sim.api import APIError
from sim.faults import Faults
from sim.invariants import Checker, Watch

IDENTITY = "chaos-controller"


@dataclass(frozen=True)
class Campaign:
    jobs: int = 100
    kills: int = 50
    kill_interval: tuple[float, float] = (2.0, 6.0)  # wall seconds between two kills, uniform
    error_rate: float = 0.05  # of requests, answered 500 or 429
    conflict_rate: float = 0.05  # of writes (PATCH, PUT), answered 409
    cut_watch_after: int = 100  # events
    gone_every: float = 10.0  # seconds between bursts of 410 Gone
    gone_for: float = 1.5
    disrupt_every: float = 3.0  # seconds between two deletions (member, waiting member or node, in turn)
    nodes: int = 8
    gpus_per_node: int = 8
    bind_timeout: int = 20
    resync_seconds: int = 2  # the controller's: time-driven decisions (bind timeouts) wait at most this long
    seed: int = 20261206
    deadline: float = 900.0  # wall seconds for every job to complete

    @property
    def replay_seconds(self) -> float:
        """Arrivals spread over the time the kills take, so that every kill lands during the replay."""
        return self.kills * sum(self.kill_interval) / 2


@dataclass
class Result:
    campaign: Campaign
    kills: int = 0
    kills_survived: int = 0
    crashes: int = 0  # controller exits we did not cause
    restart_seconds: list[float] = field(default_factory=list)
    faults: Counter = field(default_factory=Counter)
    jobs_completed: int = 0
    seconds: float = 0.0
    checker: dict = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    tracebacks: int = 0

    @property
    def faults_injected(self) -> int:
        return sum(self.faults.values())


def replay_spec(campaign: Campaign) -> dict:
    """Seeded PyTorchJobs: 1–8 pods of 1–8 GPUs (at most half the cluster), 2–6 s of training each."""
    rng = random.Random(campaign.seed)
    workloads = []
    for index in range(campaign.jobs):
        gpus = rng.choice((1, 1, 2, 4, 8))
        size = rng.choice([s for s in (1, 2, 4, 8) if s * gpus <= campaign.nodes * campaign.gpus_per_node // 2])
        workloads.append({"kind": "PyTorchJob", "name": f"job-{index:03d}", "namespace": NAMESPACE, "size": size,
                          "gpusPerPod": gpus, "durationSeconds": round(rng.uniform(2.0, 6.0), 1),
                          "submitSeconds": round(rng.uniform(0, campaign.replay_seconds), 2)})
    document = {"nodes": [{"count": campaign.nodes, "gpusPerNode": campaign.gpus_per_node, "namePrefix": "node"}],
                "workloads": workloads}
    return sim_spec.load(yaml.safe_dump(document))


def succeeded_jobs(stack: Stack) -> int:
    return sum(1 for job in stack.api.list("pytorchjobs", namespace=NAMESPACE)
               if any(c.get("type") == "Succeeded" and c.get("status") == "True"
                      for c in (job.get("status") or {}).get("conditions") or ()))


class Disrupter:
    """Deletes, in turn, a running member, a waiting member and a node under a running group."""

    def __init__(self, stack: Stack, spec: dict, rng: random.Random, counts: Counter):
        self.stack, self.rng, self.counts = stack, rng, counts
        self.nodes = {n["metadata"]["name"]: n for n in sim_spec.node_manifests(spec)}
        self.turn = 0
        self.returning: list[tuple[float, str]] = []

    def step(self, now: float) -> None:
        for due, node in list(self.returning):
            if due <= now:
                self.returning.remove((due, node))
                self.stack.api.create("nodes", self.nodes[node])
        action = ("delete-running-member", "delete-waiting-member", "delete-node")[self.turn % 3]
        self.turn += 1
        pods = self.stack.api.list("pods", namespace=NAMESPACE)
        running = [p for p in pods if p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") == "Running"]
        if action == "delete-running-member" and running:
            self._delete_pod(self.rng.choice(running))
        elif action == "delete-waiting-member":
            waiting = [p for p in pods if any(g.get("name") == names.SCHEDULING_GATE
                                              for g in p["spec"].get("schedulingGates") or ())]
            if waiting:
                self._delete_pod(self.rng.choice(waiting))
            else:
                return
        elif action == "delete-node" and running and len(self.returning) < 2:
            node = self.rng.choice(running)["spec"]["nodeName"]
            try:
                self.stack.api.delete("nodes", node)
            except APIError:
                return
            # The pod garbage collector force-deletes the pods bound to a node that no longer exists.
            for pod in self.stack.api.list("pods"):
                if pod["spec"].get("nodeName") == node:
                    self._delete_pod(pod, count=False)
            self.returning.append((now + 3.0, node))
        else:
            return
        self.counts[action] += 1

    def _delete_pod(self, pod: dict, count: bool = True) -> None:
        try:
            self.stack.api.delete("pods", pod["metadata"]["name"], namespace=pod["metadata"]["namespace"],
                                  grace_period_seconds=0)
        except APIError:
            pass

    def finish(self) -> None:
        for _, node in self.returning:
            self.stack.api.create("nodes", self.nodes[node])
        self.returning.clear()


def run(workdir: Path, campaign: Campaign = Campaign(), progress=lambda message: None) -> Result:
    rng = random.Random(campaign.seed)
    result = Result(campaign)
    spec = replay_spec(campaign)
    faults = Faults(error_rate=campaign.error_rate, error_codes=(500, 429), conflict_rate=campaign.conflict_rate,
                    cut_watch_after=campaign.cut_watch_after, seed=campaign.seed)
    stack = Stack(workdir, real_webhook=False)
    # A deadline passes at most one resync before a pass sees it, and the pass's deletions take a
    # round trip (retried through the injected faults): that is the checker's reaction allowance.
    invariants = Watch(stack.api, Checker(bind_timeout=campaign.bind_timeout, reaction=campaign.resync_seconds + 1.0))
    stop = threading.Event()
    disruptions: Counter = Counter()

    def background() -> None:
        """Checker ticks, 410 bursts and deletions, until `stop`."""
        disrupter = Disrupter(stack, spec, random.Random(campaign.seed + 1), disruptions)
        next_gone, next_disruption = time.monotonic() + campaign.gone_every, time.monotonic() + campaign.disrupt_every
        try:
            while not stop.wait(0.25):
                now = time.monotonic()
                invariants.tick()
                if now >= next_gone:
                    faults.force_gone = True
                    next_gone = now + campaign.gone_every
                elif faults.force_gone and now >= next_gone - campaign.gone_every + campaign.gone_for:
                    faults.force_gone = False
                if now >= next_disruption:
                    next_disruption = now + campaign.disrupt_every
                    disrupter.step(now)
        finally:
            faults.force_gone = False
            disrupter.finish()

    started = time.monotonic()
    try:
        controller = stack.controller("controller", identity=IDENTITY, bind_timeout=campaign.bind_timeout,
                                      faults=faults, resync_seconds=campaign.resync_seconds)
        controller.wait_ready(120)
        stack.start_cluster(spec)
        thread = threading.Thread(target=background, name="chaos", daemon=True)
        thread.start()
        for kill in range(campaign.kills):
            time.sleep(rng.uniform(*campaign.kill_interval))
            invariants.controller_down()
            if not controller.alive():
                result.crashes += 1
                progress(f"controller exited by itself (code {controller.popen.returncode}):\n{controller.log_tail()}")
            else:
                controller.kill()
                result.kills += 1
            killed = time.monotonic()
            controller.restart()
            controller.wait_ready(120)
            invariants.controller_up()
            result.restart_seconds.append(time.monotonic() - killed)
            result.kills_survived += 1
            if kill % 10 == 9:
                progress(f"chaos: {result.kills} kills, {succeeded_jobs(stack)}/{campaign.jobs} jobs done, "
                         f"{sum(faults.counts.values())} API faults, {dict(disruptions)}")
        stop.set()
        thread.join(10)
        deadline = started + campaign.deadline
        while time.monotonic() < deadline and succeeded_jobs(stack) < campaign.jobs:
            if not controller.alive():
                result.crashes += 1
                controller.restart()
            invariants.tick()
            time.sleep(0.5)
        result.jobs_completed = succeeded_jobs(stack)
        if result.jobs_completed < campaign.jobs:  # every thread's stack, to tell a stuck emulation from a slow one
            with open(workdir / "threads-at-deadline.txt", "w") as dump:
                faulthandler.dump_traceback(dump, all_threads=True)
            progress(f"chaos: {campaign.jobs - result.jobs_completed} jobs not done at the deadline; thread stacks "
                     f"in {workdir / 'threads-at-deadline.txt'}")
        invariants.finish()
    finally:
        stop.set()
        invariants.close()
        stack.close()
    result.seconds = time.monotonic() - started
    result.faults = Counter({f"API {code}": n for code, n in faults.counts.items()}) + disruptions
    result.checker = invariants.checker.summary()
    result.violations = [str(v) for v in invariants.violations()]
    result.tracebacks = controller.log_path.read_text(errors="replace").count("Traceback")
    return result
