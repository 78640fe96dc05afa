"""The emulated kubelets of every node, and the containers they run.

A pod bound to a node starts `start_delay` seconds later (phase Running, Ready, container
running). A pod marked for deletion (the API server's graceful deletion of a bound pod) has its
containers stopped `stop_delay` seconds later, capped by its grace period, and the kubelet then
removes it for good (DELETE with grace period 0), as the real kubelet's status manager does.

What the containers do is the training model of `sim.training`: a run advances only while all
its pods run, and when its progress reaches its duration every pod of the run then running exits 0
(phase Succeeded); the workload's pods yet to start, and those that come later, are its next
stage, which finishes in turn. A pod that runs to completion and whose run length nothing says
runs for `run_seconds` when it is given (`sim serve --run-seconds`); pods without a duration run
until deleted. Probes, restarts and failures are not modelled.

Statuses have the real kubelet's shape, with containerd as the container runtime: every container
status with its fully qualified `image`, an `imageID` at a digest, a `containerID`,
`ready`, `started`, `restartCount`, `state` and an empty `lastState`; the pod's `hostIP(s)`,
`podIP(s)` and `startTime`; conditions keep their `lastTransitionTime` while their status does not
change, as the kubelet's status manager keeps it. The kubelet has no image registry to ask: an
image named without a digest gets one derived from its name, the same for every pod that runs it.
Host IPs are handed out in the order nodes first run a pod, pod IPs from one cluster-wide range
(there is no per-node pod CIDR).
"""

import hashlib
import heapq
import ipaddress

from sim.api import KUBELET, APIError, ClusterAPI, WatchEvent
from sim.clock import rfc3339
from sim.names import PODS
from sim.training import Runs

DEFAULT_START_DELAY = 2.0
DEFAULT_STOP_DELAY = 1.0
CONDITION_TYPES = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
CONTAINER_RUNTIME = "containerd"
DEFAULT_REGISTRY = "docker.io"
HOST_NETWORK = ipaddress.IPv4Network("172.16.0.0/12")
POD_NETWORK = ipaddress.IPv4Network("10.0.0.0/8")
FIRST_ADDRESS = 2  # .0 is the network, .1 the gateway
POD_ADDRESSES = POD_NETWORK.num_addresses - FIRST_ADDRESS - 1  # the last is the broadcast address


def pod_key(pod: dict) -> str:
    return f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def qualified_name(name: str) -> str:
    """An image name with its registry, as containerd normalises it: `busybox` →
    `docker.io/library/busybox`, `team/app` → `docker.io/team/app`, `registry.example/app` unchanged."""
    first, slash, rest = name.partition("/")
    if not slash or not ("." in first or ":" in first or first == "localhost"):
        first, rest = DEFAULT_REGISTRY, name
    if first == DEFAULT_REGISTRY and "/" not in rest:
        rest = f"library/{rest}"
    return f"{first}/{rest}"


def image_status(image: str) -> tuple[str, str]:
    """(`image`, `imageID`) of a container status: the reference fully qualified, tag `latest` when
    it names neither tag nor digest, and the repository at the image's digest."""
    if not image:
        return "", ""
    name, _, digest = image.partition("@")
    repository, colon, tag = qualified_name(name).rpartition(":")
    if not colon or "/" in tag:
        repository, tag = qualified_name(name), ""
    if not digest:
        tag = tag or "latest"
        digest = f"sha256:{_digest(f'{repository}:{tag}')}"
    return (f"{repository}:{tag}" if tag else f"{repository}@{digest}"), f"{repository}@{digest}"


def container_id(pod: dict, container: dict) -> str:
    return f"{CONTAINER_RUNTIME}://{_digest(pod['metadata'].get('uid', '') + '/' + container['name'])}"


def container_status(pod: dict, container: dict, running: bool, state: dict) -> dict:
    image, image_id = image_status(container.get("image", ""))
    return {"name": container["name"], "state": state, "lastState": {}, "ready": running, "restartCount": 0,
            "image": image, "imageID": image_id, "containerID": container_id(pod, container), "started": running}


def kubelet_conditions(pod: dict, statuses: dict[str, tuple[str, str]], moment: str) -> list[dict]:
    """The conditions the kubelet owns, from their (status, reason) by type; a condition whose status
    does not change keeps the pod's transition time, as the kubelet's status manager keeps it."""
    before = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or ()}
    conditions = []
    for kind in CONDITION_TYPES:
        status, reason = statuses[kind]
        old = before.get(kind) or {}
        since = old.get("lastTransitionTime", moment) if old.get("status") == status else moment
        condition = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": since}
        if reason:
            condition["reason"] = reason
        conditions.append(condition)
    return conditions


def running_status(pod: dict, now: float, host_ip: str, pod_ip: str) -> dict:
    moment = rfc3339(now)
    conditions = kubelet_conditions(pod, dict.fromkeys(CONDITION_TYPES, ("True", "")), moment)
    containers = [container_status(pod, c, True, {"running": {"startedAt": moment}})
                  for c in pod["spec"].get("containers") or ()]
    return {"phase": "Running", "conditions": conditions, "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
            "podIP": pod_ip, "podIPs": [{"ip": pod_ip}], "startTime": moment, "containerStatuses": containers}


def succeeded_status(pod: dict, now: float) -> dict:
    """All containers exited 0; Ready and ContainersReady turn False with reason PodCompleted, and
    PodReadyToStartContainers False once the sandbox is gone."""
    moment = rfc3339(now)
    started = (pod.get("status") or {}).get("startTime", moment)
    conditions = kubelet_conditions(pod, {
        "PodReadyToStartContainers": ("False", ""), "Initialized": ("True", ""), "Ready": ("False", "PodCompleted"),
        "ContainersReady": ("False", "PodCompleted"), "PodScheduled": ("True", "")}, moment)
    containers = []
    for c in pod["spec"].get("containers") or ():
        terminated = {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": moment,
                      "containerID": container_id(pod, c)}
        containers.append(container_status(pod, c, False, {"terminated": terminated}))
    return {"phase": "Succeeded", "conditions": conditions, "containerStatuses": containers}


class Addresses:
    """Host IPs by node, in the order nodes first run a pod, and pod IPs from one range, in turn
    (after the last address, the first again)."""

    def __init__(self):
        self.hosts: dict[str, str] = {}
        self.pods = 0

    def host(self, node: str) -> str:
        if node not in self.hosts:
            self.hosts[node] = str(HOST_NETWORK[FIRST_ADDRESS + len(self.hosts)])
        return self.hosts[node]

    def pod(self) -> str:
        address = POD_NETWORK[FIRST_ADDRESS + self.pods % POD_ADDRESSES]
        self.pods += 1
        return str(address)


class Kubelet:
    resources = (PODS,)

    def __init__(self, api: ClusterAPI, *, start_delay: float = DEFAULT_START_DELAY,
                 stop_delay: float = DEFAULT_STOP_DELAY, run_seconds: float | None = None):
        self.api = api
        self.start_delay = start_delay
        self.stop_delay = stop_delay
        self.stops: list[tuple[float, str]] = []
        self.stopping: dict[str, float] = {}  # pod marked for deletion → when it is removed
        self.bound: dict[str, dict] = {}  # non-terminal pods on a node, latest version
        self.starts: list[tuple[float, str]] = []
        self.starting: dict[str, float] = {}  # pod → when it starts
        self.runs = Runs(run_seconds)
        self.addresses = Addresses()

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
        """Remove stopped pods, finish the runs that are due, then start pods. Finishing first writes
        a run's end before a pod that starts at the same moment runs, so the accounting, which
        learns both from the watch in that order, also has that pod start the run's next stage."""
        wrote = self._remove_stopped(now)
        for run in self.runs.due(now):
            for key in list(run.members):
                pod = self.bound.get(key)
                if pod is not None and (pod.get("status") or {}).get("phase") == "Running":
                    wrote |= self._write_status(pod, succeeded_status(pod, now))
        while self.starts and self.starts[0][0] <= now:
            moment, key = heapq.heappop(self.starts)
            if self.starting.get(key) == moment:
                del self.starting[key]
                pod = self.bound[key]
                status = running_status(pod, now, self.addresses.host(pod["spec"]["nodeName"]), self.addresses.pod())
                wrote |= self._write_status(pod, status)
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
