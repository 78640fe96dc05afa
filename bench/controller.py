"""How fast the controller decides, how soon it releases a group, and how much memory it holds.

`run(nodes=(500, 2000, 5000), bound_pods=50_000, waiting_groups=500, latency_groups=50)` builds,
for each node count, 8-GPU nodes in 4 zones and racks of 16 with bound pods spread over them
(running gangs of 8 and lone CPU pods, never beyond a node's allocatable; `bound_pods` at the
largest size, proportionally fewer on smaller clusters: the same 10 pods per node), and measures:
  - the index rebuilt from every pod (what a restart or a consistency check costs);
  - a restart pass: every group decided once (the running gangs and the waiting ones);
  - a full planning pass: `waiting_groups` complete, gated groups of 1–64 members, re-planned
    with nothing changed — what every pass costs while they wait;
  - release latency, with nothing else queued, over `latency_groups` groups of 1–32 members:
    from the change that adds a group's last member being queued to the `Controller` until its
    last release patch has been answered. Included: applying the change to the index, the
    reserve pass, the reservation patches, taking the API's answers into the index, the release
    pass and the release patches (JSON Patch with its `test`s), all through `Controller`,
    `reconcile` and `Executor` against an in-memory API that applies patches as the API server
    does. Not included: the network and API server, watch delivery, the loop's debounce (10 ms
    by default) and the Events and Gang status written after the release patches;
  - memory: in a fresh process, RSS after `bound_pods` realistic pods (about 5 KB of JSON each:
    env, volumes, managed fields, statuses) went, page by page as the informer lists them,
    through JSON parsing, the informer transform (`pod_facts`), the informer cache and the index.
Everything is seeded: two runs plan the same thing.
"""

import copy
import multiprocessing
import random
import time
from statistics import median

import jsonpatch
import orjson

from bench.planner import _ms, _timed
from gangkeeper import names
from gangkeeper.audit import AuditLog
from gangkeeper.controller import kube
from gangkeeper.controller.groups import pod_facts
from gangkeeper.controller.index import NODES, PODS, ClusterIndex
from gangkeeper.controller.informer import Cache, object_key
from gangkeeper.controller.metrics import Metrics
from gangkeeper.controller.model import node_from_api
from gangkeeper.controller.reconciler import Memory, Release, Report, Settings, reconcile
from gangkeeper.controller.runner import Controller

GPU = "nvidia.com/gpu"
NS = "bench"
PODS_PER_NODE = 10
GANG_SIZE = 8
WAITING_SHAPES = ((1, 1, 2, 4, 8, 16, 64), (1, 4, 8, 8))  # members, GPUs per member
LATENCY_SIZES = (1, 2, 4, 8, 16, 32)  # members of 4 GPUs: nodes keep about half their GPUs free


def run(nodes: tuple[int, ...] = (500, 2000, 5000), bound_pods: int = 50_000, waiting_groups: int = 500,
        latency_groups: int = 50) -> dict:
    largest = max(nodes)
    return {f"nodes={count}": _scenario(count, bound_pods * count // largest, waiting_groups, latency_groups)
            for count in nodes}


def _scenario(node_count: int, bound_pods: int, waiting_groups: int, latency_groups: int) -> dict:
    rng = random.Random(node_count)
    node_objects = [_node(i) for i in range(node_count)]
    bound = _bound_pods(node_objects, bound_pods, rng)
    waiting = [pod for i in range(waiting_groups) for pod in _waiting_group(i, rng)]
    return {"bound_pods": len(bound), "waiting_groups": waiting_groups,
            **_planning(node_objects, bound, waiting),
            **_latency(node_objects, bound, latency_groups),
            **_in_fresh_process(_memory, bound_pods)}


# --- planning ------------------------------------------------------------------------------

def _planning(node_objects: list[dict], bound: list[dict], waiting: list[dict]) -> dict:
    nodes = [node_from_api(n) for n in node_objects]
    facts = [pod_facts(pod) for pod in bound + waiting]
    rebuilt, index = _timed(lambda: ClusterIndex.build(facts, {}, nodes))
    now, settings = 2_000_000_000.0, Settings()
    restart, first = _timed(lambda: reconcile((), {}, (), Memory(), now, settings, index=index))
    passes = [_timed(lambda: reconcile((), {}, (), first.memory, now + 1, settings, index=index)) for _ in range(3)]
    steady, outcome = sorted(passes, key=lambda p: p[0])[1]
    admitted = sum(1 for a in outcome.actions if isinstance(a, Report) and a.event == "gang.reserved")
    return {"index_rebuild_ms": _ms(rebuilt), "restart_pass_ms": _ms(restart), "planning_pass_ms": _ms(steady),
            "groups": sum(first.phases.values()), "admitted": admitted}


# --- release latency -----------------------------------------------------------------------

class InMemoryAPI:
    """Pods, Gangs and Events in memory, patched as the API server patches them: a merge patch
    naming a stale resourceVersion and a JSON Patch whose `test` fails are Conflicts."""

    def __init__(self, pods: list[dict]):
        self.pods = {object_key(pod): pod for pod in pods}
        self.rv = 10**6
        self.released_at = 0.0

    def patch(self, resource, namespace, name, body, patch_type=None, *, subresource=""):
        if resource is not kube.PODS:
            return {"metadata": {"name": name, "namespace": namespace}}
        pod = self.pods[f"{namespace}/{name}"]
        if patch_type == kube.JSON_PATCH:
            try:
                pod = jsonpatch.apply_patch(pod, body)
            except jsonpatch.JsonPatchException as error:
                raise kube.Conflict(422, {"reason": "Invalid", "message": str(error)}) from None
        else:
            if body["metadata"].get("resourceVersion") != pod["metadata"]["resourceVersion"]:
                raise kube.Conflict(409, {"reason": "Conflict"})
            pod = copy.deepcopy(pod)
            pod["metadata"]["annotations"].update(body["metadata"].get("annotations") or {})
        self.rv += 1
        pod["metadata"]["resourceVersion"] = str(self.rv)
        self.pods[f"{namespace}/{name}"] = pod
        if patch_type == kube.JSON_PATCH:
            self.released_at = time.perf_counter()
        return pod

    def patch_status(self, resource, namespace, name, body, patch_type=None):
        return self.patch(resource, namespace, name, body, patch_type, subresource="status")

    def create(self, resource, namespace, body):
        return body

    def delete(self, resource, namespace, name, **_):
        self.pods.pop(f"{namespace}/{name}", None)


def _latency(node_objects: list[dict], bound: list[dict], groups: int) -> dict:
    """Milliseconds from a group's last member reaching the controller to its last release patch."""
    api = InMemoryAPI([])
    controller = Controller(api, Settings(), AuditLog("controller", _Discard()), Metrics())
    controller.apply_changes()
    controller.index.apply([(NODES, n["metadata"]["name"], node_from_api(n)) for n in node_objects])
    controller.index.apply([(PODS, object_key(p), pod_facts(p)) for p in bound])
    controller.settle_memory()  # as the loop does once the caches have synced
    controller.reconcile_once()
    samples = []
    sizes = [size for size in LATENCY_SIZES if size <= len(node_objects) // 4] or [1]  # room on tiny clusters
    for number in range(groups):
        size = sizes[number % len(sizes)]
        members = [_member(f"late-{number}-{i}", f"late-{number}", 4, size) for i in range(size)]
        api.pods.update((object_key(pod), pod) for pod in members)
        for pod in members[:-1]:
            controller._queue(PODS, object_key(pod), pod_facts(pod))
        controller.reconcile_once()
        controller._queue(PODS, object_key(members[-1]), pod_facts(members[-1]))
        started = time.perf_counter()
        outcomes = [controller.reconcile_once() for _ in range(2)]
        assert any(isinstance(a, Release) for a in outcomes[1].actions), "the group was released"
        samples.append(api.released_at - started)
        for pod in members:  # the group finishes: its capacity is free for the next one
            controller._queue(PODS, object_key(pod), None)
            del api.pods[object_key(pod)]
        controller.reconcile_once()
    samples.sort()
    return {"release_p50_ms": _ms(median(samples)), "release_p99_ms": _ms(samples[min(len(samples) - 1,
                                                                                     int(len(samples) * 0.99))]),
            "release_max_ms": _ms(samples[-1])}


class _Discard:
    def write_line(self, line: str) -> None:
        return None


# --- memory --------------------------------------------------------------------------------

def _memory(bound_pods: int) -> dict:
    """RSS of this (fresh) process before and after `bound_pods` pods went through the informer path."""
    before = _rss_mib()
    cache, index = Cache(), ClusterIndex()
    nodes = [_node(i) for i in range(bound_pods // PODS_PER_NODE)]
    index.apply([(NODES, n["metadata"]["name"], node_from_api(n)) for n in nodes])
    loaded, page_bytes = 0.0, 0
    for start in range(0, bound_pods, 500):
        listed = range(start, min(bound_pods, start + 500))
        page = orjson.dumps({"items": [_realistic_pod(i, len(nodes)) for i in listed]})
        page_bytes = max(page_bytes, len(page))
        started = time.perf_counter()  # what the informer and the index do with a listed page
        changes = []
        for pod in orjson.loads(page)["items"]:
            facts = pod_facts(pod)
            cache.put(object_key(pod), facts)
            changes.append((PODS, object_key(pod), facts))
        index.apply(changes)
        loaded += time.perf_counter() - started
        del page, changes
    Controller.settle_memory()
    after = _rss_mib()
    return {"rss_before_mib": before, "rss_after_mib": after, "rss_pods_mib": round(after - before, 1),
            "sync_seconds": round(loaded, 2), "pod_json_kib": round(page_bytes / 500 / 1024, 1)}


def _in_fresh_process(function, *args) -> dict:
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply(function, args)


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


# --- the cluster ---------------------------------------------------------------------------

def _node(index: int) -> dict:
    labels = {"topology.kubernetes.io/zone": f"zone-{index % 4}", "example.com/rack": f"rack-{index // 64}",
              "kubernetes.io/hostname": f"node-{index:05d}"}
    return {"metadata": {"name": f"node-{index:05d}", "labels": labels},
            "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110", GPU: "8"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _member(name: str, group: str, gpus: int, size: int, node: str | None = None, lone: bool = False) -> dict:
    requests = {"cpu": "4", "memory": "32Gi", **({GPU: str(gpus)} if gpus else {})}
    spec: dict = {"containers": [{"name": "main", "resources": {"requests": requests, "limits": requests}}]}
    if node:
        spec["nodeName"] = node
    else:
        spec["schedulingGates"] = [{"name": names.SCHEDULING_GATE}]
    metadata = {"name": name, "namespace": NS, "uid": f"uid-{name}", "resourceVersion": "1",
                "creationTimestamp": "2027-01-01T00:00:00Z", "labels": {names.GROUP_LABEL: group},
                "annotations": {names.GROUP_SOURCE_ANNOTATION: names.SOURCE_EXPLICIT,
                                names.MIN_COUNT_ANNOTATION: str(size)}}
    if lone:
        metadata["labels"], metadata["annotations"] = {}, {}
    return {"metadata": metadata, "spec": spec, "status": {"phase": "Running" if node else "Pending"}}


def _bound_pods(node_objects: list[dict], count: int, rng: random.Random) -> list[dict]:
    """Running gangs of 8 spread over consecutive nodes, 0 or 1 GPU a member (about half of each
    node's GPUs taken, no node over its allocatable), 10 pods to a node; a gang of CPU pods is
    lone pods, in no group."""
    node_names = [n["metadata"]["name"] for n in node_objects]
    free = dict.fromkeys(node_names, 8)
    pods: list[dict] = []
    for first in range(0, count, GANG_SIZE):
        gpus = rng.choice((0, 0, 0, 1, 1))
        group = f"run-{first}"
        for i in range(first, min(count, first + GANG_SIZE)):
            node = node_names[i % len(node_names)]
            taken = gpus if free[node] >= gpus else 0
            free[node] -= taken
            pods.append(_member(f"{group}-{i - first}", group, taken, GANG_SIZE, node=node, lone=not gpus))
    return pods


def _waiting_group(index: int, rng: random.Random) -> list[dict]:
    size, gpus = rng.choice(WAITING_SHAPES[0]), rng.choice(WAITING_SHAPES[1])
    return [_member(f"wait-{index}-{i}", f"wait-{index}", gpus, size) for i in range(size)]


def _realistic_pod(index: int, node_count: int) -> dict:
    """A bound training pod as a real API server returns it, managed fields and all (about 5 KB)."""
    name = f"train-{index // 8}-worker-{index % 8}"
    env = [{"name": f"VAR_{k}", "value": f"value-{k}-{index}"} for k in range(24)]
    mounts = [{"name": f"vol-{k}", "mountPath": f"/mnt/{k}"} for k in range(4)]
    requests = {"cpu": "8", "memory": "64Gi", GPU: "1"}
    return {
        "metadata": {"name": name, "namespace": f"team-{index % 20}", "uid": f"0000-{index:012d}",
                     "resourceVersion": str(index + 1), "creationTimestamp": "2027-01-01T00:00:00Z",
                     "labels": {names.GROUP_LABEL: f"train-{index // 8}", "app": "trainer", "replica": str(index % 8)},
                     "annotations": {names.GROUP_SOURCE_ANNOTATION: names.SOURCE_EXPLICIT,
                                     names.MIN_COUNT_ANNOTATION: "8", names.RESERVED_NODE_ANNOTATION:
                                     f"node-{index % node_count:05d}", "prometheus.io/scrape": "true"},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": f"train-{index // 8}",
                                          "uid": f"job-{index // 8}", "controller": True}],
                     "managedFields": [{"manager": manager, "operation": "Update", "fieldsType": "FieldsV1",
                                        "time": "2027-01-01T00:00:10Z",
                                        "fieldsV1": {f"f:{manager}-field-{k}": {} for k in range(30)}}
                                       for manager in ("kube-controller-manager", "kubelet", "gangkeeper")]},
        "spec": {"nodeName": f"node-{index % node_count:05d}", "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "registry.example/train:1.0", "env": env,
                                 "volumeMounts": mounts, "resources": {"requests": requests, "limits": requests}}],
                 "volumes": [{"name": f"vol-{k}", "emptyDir": {}} for k in range(4)],
                 "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1", "startTime": "2027-01-01T00:00:10Z",
                   "conditions": [{"type": t, "status": "True", "lastTransitionTime": "2027-01-01T00:00:10Z"}
                                  for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
                   "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0, "image": "train:1.0",
                                          "state": {"running": {"startedAt": "2027-01-01T00:00:10Z"}}}]},
    }


def markdown(figures: dict) -> str:
    header = ("| nodes | bound pods | index rebuild ms | restart pass ms | planning pass ms (500 waiting) "
              "| release p50 / p99 / max ms | RSS MiB (start → with pods) | sync s |")
    lines = [header, "|" + "---|" * 8]
    for label, row in figures.items():
        lines.append(
            f"| {label.split('=')[1]} | {row['bound_pods']:,} | {row['index_rebuild_ms']} | {row['restart_pass_ms']} "
            f"| {row['planning_pass_ms']} | {row['release_p50_ms']} / {row['release_p99_ms']} / "
            f"{row['release_max_ms']} | {row['rss_before_mib']} → {row['rss_after_mib']} | {row['sync_seconds']} |")
    return ("## Controller: planning pass, release latency and memory\n\n"
            "`bench/controller.py` (see its docstring for exactly what each figure includes). 8-GPU "
            "nodes, 10 bound pods per node (50,000 at 5,000 nodes; proportionally fewer on the smaller clusters), "
            "500 waiting gangs of 1–64 members. Targets at 5,000 nodes: planning pass ≤ 1 s, release p99 ≤ 50 ms "
            "(in process, nothing else queued), RSS ≤ 500 MB.\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
