"""The emulated kubelets of every node, and the containers they run.

A pod bound to a node starts `start_delay` seconds later (phase Running, Ready, container
running). A pod marked for deletion (the API server's graceful deletion of a bound pod) has its
containers stopped `stop_delay` seconds later, capped by its grace period, and the kubelet then
removes it for good (DELETE with grace period 0), as the real kubelet's status manager does.

What the containers do is the training model of `sim.training`: a run advances only while all
its pods run, and when its progress reaches its duration every pod of the run exits 0 (phase
Succeeded). Pods without a duration run until deleted. Probes, restarts and failures are not
modelled.
"""

import heapq

from sim.api import KUBELET, APIError, ClusterAPI, WatchEvent
from sim.clock import rfc3339
from sim.names import PODS
from sim.training import Runs

DEFAULT_START_DELAY = 2.0
DEFAULT_STOP_DELAY = 1.0
CONDITION_TYPES = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")


def pod_key(pod: dict) -> str:
    return f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"


def running_status(pod: dict, now: float) -> dict:
    moment = rfc3339(now)
    conditions = [{"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": moment}
                  for kind in CONDITION_TYPES]
    containers = [{"name": c["name"], "image": c.get("image", ""), "ready": True, "started": True,
                   "restartCount": 0, "state": {"running": {"startedAt": moment}}}
                  for c in pod["spec"].get("containers") or ()]
    return {"phase": "Running", "startTime": moment, "conditions": conditions, "containerStatuses": containers}


def succeeded_status(pod: dict, now: float) -> dict:
    """All containers exited 0; Ready and ContainersReady turn False with reason PodCompleted."""
    moment = rfc3339(now)
    status = pod.get("status") or {}
    started = status.get("startTime", moment)
    conditions = []
    for condition in status.get("conditions") or ():
        if condition.get("type") in ("Ready", "ContainersReady"):
            condition = {**condition, "status": "False", "reason": "PodCompleted", "lastTransitionTime": moment}
        conditions.append(condition)
    containers = [{"name": c["name"], "image": c.get("image", ""), "ready": False, "started": False,
                   "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                                               "startedAt": started, "finishedAt": moment}}}
                  for c in pod["spec"].get("containers") or ()]
    return {"phase": "Succeeded", "conditions": conditions, "containerStatuses": containers}


class Kubelet:
    resources = (PODS,)

    def __init__(self, api: ClusterAPI, *, start_delay: float = DEFAULT_START_DELAY,
                 stop_delay: float = DEFAULT_STOP_DELAY):
        self.api = api
        self.start_delay = start_delay
        self.stop_delay = stop_delay
        self.stops: list[tuple[float, str]] = []
        self.stopping: dict[str, float] = {}  # pod marked for deletion → when it is removed
        self.bound: dict[str, dict] = {}  # non-terminal pods on a node, latest version
        self.starts: list[tuple[float, str]] = []
        self.starting: dict[str, float] = {}  # pod → when it starts
        self.runs = Runs()

    def observe(self, event: WatchEvent, now: float) -> None:
        if event.resource != PODS:
            return
        pod = event.object
        key = pod_key(pod)
        deleted = event.type == "DELETED"
        self.runs.observe(pod, deleted, now)
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        if deleted or phase in ("Succeeded", "Failed") or not pod["spec"].get("nodeName"):
            self.bound.pop(key, None)
            self.starting.pop(key, None)
            self.stopping.pop(key, None)
            return
        self.bound[key] = pod
        if pod["metadata"].get("deletionTimestamp"):
            self._stop_later(key, pod, now)
            return
        if phase == "Pending" and key not in self.starting:
            self.starting[key] = now + self.start_delay
            heapq.heappush(self.starts, (self.starting[key], key))

    def _stop_later(self, key: str, pod: dict, now: float) -> None:
        self.starting.pop(key, None)
        if key not in self.stopping:
            grace = pod["metadata"].get("deletionGracePeriodSeconds", 0)
            self.stopping[key] = now + min(self.stop_delay, grace)
            heapq.heappush(self.stops, (self.stopping[key], key))

    def step(self, now: float) -> bool:
        wrote = self._remove_stopped(now)
        while self.starts and self.starts[0][0] <= now:
            moment, key = heapq.heappop(self.starts)
            if self.starting.get(key) == moment:
                del self.starting[key]
                wrote |= self._write_status(self.bound[key], running_status(self.bound[key], now))
        for run in self.runs.due(now):
            for key in list(run.members):
                pod = self.bound.get(key)
                if pod is not None and (pod.get("status") or {}).get("phase") == "Running":
                    wrote |= self._write_status(pod, succeeded_status(pod, now))
        return wrote

    def _remove_stopped(self, now: float) -> bool:
        wrote = False
        while self.stops and self.stops[0][0] <= now:
            moment, key = heapq.heappop(self.stops)
            if self.stopping.get(key) == moment:
                del self.stopping[key]
                pod = self.bound[key]
                try:
                    self.api.delete(PODS, pod["metadata"]["name"], namespace=pod["metadata"].get("namespace"),
                                    user=KUBELET, grace_period_seconds=0)
                    wrote = True
                except APIError:
                    pass  # already gone
        return wrote

    def next_due(self) -> float | None:
        heads = (self.starts[0][0] if self.starts else None, self.stops[0][0] if self.stops else None,
                 self.runs.next_due())
        return min((m for m in heads if m is not None), default=None)

    def _write_status(self, pod: dict, status: dict) -> bool:
        try:
            self.api.patch(PODS, pod["metadata"]["name"], {"status": status},
                           namespace=pod["metadata"].get("namespace"), subresource="status", user=KUBELET)
        except APIError:
            return False
        return True
