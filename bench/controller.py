"""How fast the controller decides, how soon it releases a group, and how much memory it holds.

`run(nodes=(500, 2000, 5000), bound_pods=50_000, waiting_groups=500, latency_groups=50)` builds,
for each node count, 8-GPU nodes in 4 zones and racks of 16 with bound pods spread over them
(running gangs of 8 and lone CPU pods, never beyond a node's allocatable; `bound_pods` at the
largest size, proportionally fewer on smaller clusters: the same 10 pods per node), and
`waiting_groups` complete, gated groups of 1–64 members (the same number at every size, or by
node count: `SCALE` has 500 up to 5,000 nodes and 2,000 at 15,000, the issue's sizes), and measures:
  - the index rebuilt from every pod's facts (`ClusterIndex.build`: what a consistency check
    costs), then, as the controller does after one, the survivors moved out of the garbage
    collector's way (`Controller.settle_memory`, not timed here);
  - a restart pass: the first pass on that index, every group decided once (the running gangs
    and the waiting ones);
  - a full planning pass with nothing changed since the last one: what every pass costs while
    the groups wait (the reservations the passes decide are not written, so the same groups
    are admitted again each pass);
  - release latency, with nothing else queued, over `latency_groups` groups of 1–32 members:
    from the change that adds a group's last member being queued to the `Controller` until its
    last release patch has been answered. Included: applying the change to the index, the
    reserve pass, the reservation patches, taking the API's answers into the index, the release
    pass and the release patches (JSON Patch with its `test`s), all through `Controller`,
    `reconcile` and `Executor` against an in-memory API that applies patches as the API server
    does. Not included: the network and API server, watch delivery, the loop's debounce (2 ms
    by default) and the Events and Gang status written after the release patches. Then the same
    for 5 groups of 256 members of 1 GPU (where the cluster has room): the controller's own share
    of a large group's release, which the binding benchmark measures through an API server;
  - a restart, in a fresh process, as the controller restarts: the nodes, then every pod (bound
    and waiting, each padded to about 5 KB of JSON as a real API server returns it: env,
    volumes, managed fields, statuses) relisted by the controller's `Informer`s (pages of 500
    read as they arrive through the pod's and the node's shapes, `controller.reading.shapes`, then
    `pod_facts`, the caches), the changes they queue applied to a new index in one batch, as
    the loop's first turn does; then `settle_memory` (the runner's, once the caches have
    synced); then the first pass. `restart_ms` is the sum of the three. Not included: making
    the pages' JSON (the API server's work), the network, watches, the Gang and workload lists
    (none here), the pass's writes, and importing the controller. RSS is measured at the
    process's start and after the first pass, the caches and the index alive. Then, in the
    same process, the same relist reading every object whole (`relist_whole_ms`), as the
    informers did before `controller.reading.shapes`, for the ratio.
`telling(waiting_pods=10_000)` measures what telling gated members why they wait costs
(`controller.deciding.telling`): 500 nodes and their 5,000 bound pods, and `waiting_pods` gated
pods in groups of 8 that all wait, half short of a member (min count 9), half asking 16 GPUs a
member of 8-GPU nodes (no fit). From a fresh memory (a restart), pass after pass on the same
index, each pass is run twice, with the default `--pod-events-per-pass` and with 0 (nobody told),
each with its own memory: the Events each pass decides to write (its `TellPod` actions), and the
median pass time with and without, over the passes that tell someone and over those that follow,
once everyone was told. Not included: writing the Events (the executor's, in the background) and
the Gang writes, which the passes decide alike (they are not applied, so each pass decides them
again).
Everything is seeded: two runs plan the same thing.
"""

import copy
import multiprocessing
import random
import time
from collections.abc import Iterator, Mapping
from itertools import chain, islice
from statistics import median

import jsonpatch
import orjson

from bench.planner import _ms, _timed
from gangkeeper import names
from gangkeeper.audit import AuditLog
from gangkeeper.controller.cache.index import NODES, PODS, ClusterIndex
from gangkeeper.controller.deciding.decisions import Release, Report, TellPod
from gangkeeper.controller.deciding.memory import Memory
from gangkeeper.controller.deciding.reconciler import reconcile
from gangkeeper.controller.deciding.settings import Settings
from gangkeeper.controller.metrics import Metrics
from gangkeeper.controller.reading import kube, shapes
from gangkeeper.controller.reading.informer import Informer, object_key
from gangkeeper.controller.reading.nodes import node_from_api
from gangkeeper.controller.reading.pods import pod_facts
from gangkeeper.controller.runner import Controller
from sim.patching import apply_merge_patch

GPU = "nvidia.com/gpu"
NS = "bench"
PODS_PER_NODE = 10
GANG_SIZE = 8
WAITING_SHAPES = ((1, 1, 2, 4, 8, 16, 64), (1, 4, 8, 8))  # members, GPUs per member
LATENCY_SIZES = (1, 2, 4, 8, 16, 32)  # members of 4 GPUs: nodes keep about half their GPUs free
LARGE_GROUP, LARGE_GROUPS = 256, 5  # and a few groups of 256 members of 1 GPU, where the cluster has room


# The scale: 15,000 nodes of 8 GPUs, 150,000 bound pods, 2,000 waiting groups; 500
# groups up to 5,000 nodes, as the figures before it.
SCALE = {"nodes": (500, 5_000, 15_000), "bound_pods": 150_000, "waiting_groups": {500: 500, 5_000: 500, 15_000: 2_000}}
# The largest clusters (issue 27): 65,000 nodes, 650,000 bound pods, 5,000 waiting groups. Minutes
# and about 2 GiB: `gangkeeper bench controller-large`, which `bench all` leaves out. The restart is
# measured without the relist of whole objects beside it.
LARGE = {"nodes": (65_000,), "bound_pods": 650_000, "waiting_groups": 5_000, "compare_whole": False}


def run(nodes: tuple[int, ...] = (500, 2000, 5000), bound_pods: int = 50_000,
        waiting_groups: int | Mapping[int, int] = 500, latency_groups: int = 50, compare_whole: bool = True) -> dict:
    """`waiting_groups`: the same number at every size, or by node count (`SCALE`); `compare_whole`:
    whether the restart's relist is measured again reading whole objects (`relist_whole_ms`)."""
    largest = max(nodes)
    return {f"nodes={count}": _scenario(count, bound_pods * count // largest, _groups_at(waiting_groups, count),
                                        latency_groups, compare_whole)
            for count in nodes}


def _groups_at(waiting_groups: int | Mapping[int, int], node_count: int) -> int:
    return waiting_groups if isinstance(waiting_groups, int) else waiting_groups[node_count]


def _scenario(node_count: int, bound_pods: int, waiting_groups: int, latency_groups: int,
              compare_whole: bool = True) -> dict:
    return {"bound_pods": bound_pods, "waiting_groups": waiting_groups,
            **_planning(*_cluster(node_count, bound_pods, waiting_groups, lazily=True)),
            **_latency(*_cluster(node_count, bound_pods, 0, lazily=True)[:2], latency_groups),
            **_in_fresh_process(_restart, node_count, bound_pods, waiting_groups, compare_whole)}


def _cluster(node_count: int, bound_pods: int, waiting_groups: int, lazily: bool = False) -> tuple[list[dict], ...]:
    """The nodes, the bound pods and the waiting groups' pods, the same for the same sizes;
    `lazily`, the pods as iterators, made as they are read (the waiting ones after the bound ones)."""
    rng = random.Random(node_count)
    node_objects = [_node(i) for i in range(node_count)]
    bound = _bound_pods(node_objects, bound_pods, rng)
    waiting = (pod for i in range(waiting_groups) for pod in _waiting_group(i, rng))
    return (node_objects, bound, waiting) if lazily else (node_objects, list(bound), list(waiting))


# --- planning ------------------------------------------------------------------------------

def _planning(node_objects: list[dict], bound: Iterator[dict], waiting: Iterator[dict]) -> dict:
    nodes = [node_from_api(n) for n in node_objects]
    facts = [pod_facts(pod) for pod in chain(bound, waiting)]
    rebuilt, index = _timed(lambda: ClusterIndex.build(facts, {}, nodes))
    Controller.settle_memory()  # as the controller does after a rebuild
    now, settings = 2_000_000_000.0, Settings()
    restart, first = _timed(lambda: reconcile(index, Memory(), now, settings))
    passes = [_timed(lambda: reconcile(index, first.memory, now + 1, settings)) for _ in range(3)]
    steady, outcome = sorted(passes, key=lambda p: p[0])[1]
    admitted = sum(1 for a in outcome.actions if isinstance(a, Report) and a.event == "gang.reserved")
    return {"index_rebuild_ms": _ms(rebuilt), "restart_pass_ms": _ms(restart), "planning_pass_ms": _ms(steady),
            "groups": sum(first.phases.values()), "admitted": admitted}


# --- telling waiting pods why ------------------------------------------------------------

TELLING_NODES = 500
STEADY_PASSES = 5  # passes timed once everyone was told


def telling(waiting_pods: int = 10_000, nodes: int = TELLING_NODES) -> dict:
    """Events a pass writes on `waiting_pods` waiting pods, and the pass time with and without (module docstring)."""
    node_objects, bound, _ = _cluster(nodes, nodes * PODS_PER_NODE, 0)
    waiting = [_member(f"told-{number}-{i}", f"told-{number}", 16 if number % 2 else 8,
                       GANG_SIZE if number % 2 else GANG_SIZE + 1)  # no fit, or one member short
               for number in range(waiting_pods // GANG_SIZE) for i in range(GANG_SIZE)]
    index = ClusterIndex.build([pod_facts(pod) for pod in bound + waiting], {},
                               [node_from_api(n) for n in node_objects])
    Controller.settle_memory()
    now, told, silent = 2_000_000_000.0, Settings(), Settings(pod_events_per_pass=0)
    memories = [Memory(), Memory()]  # telling's, and telling nobody's
    rounds: list[tuple[int, float, float]] = []  # (Events decided, seconds telling, seconds telling nobody)
    while sum(1 for events, _, _ in rounds if not events) < STEADY_PASSES:
        seconds, events = [0.0, 0.0], 0
        for which in (0, 1) if len(rounds) % 2 else (1, 0):  # each goes first every other pass
            seconds[which], outcome = _timed(lambda: reconcile(index, memories[which], now, (told, silent)[which]))
            memories[which] = outcome.memory
            if which == 0:
                events = sum(1 for action in outcome.actions if isinstance(action, TellPod))
        rounds.append((events, *seconds))
        now += 1.0
    telling_rounds, after = [r for r in rounds if r[0]], [r for r in rounds if not r[0]]
    return {"nodes": nodes, "waiting_pods": len(waiting), "per_pass": told.pod_events_per_pass,
            "events": [r[0] for r in rounds],
            "telling_ms": _ms(median(r[1] for r in telling_rounds)),
            "silent_ms": _ms(median(r[2] for r in telling_rounds)),
            "told_ms": _ms(median(r[1] for r in after)), "after_silent_ms": _ms(median(r[2] for r in after))}


# --- release latency -----------------------------------------------------------------------

class InMemoryAPI:
    """Pods, Gangs and Events in memory, patched as the API server patches them: a merge patch
    naming a stale resourceVersion and a JSON Patch whose `test` fails are Conflicts."""

    def __init__(self, pods: list[dict]):
        self.pods = {object_key(pod): pod for pod in pods}
        self.gangs: dict[str, dict] = {}
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

    def resource_versions(self, resource, namespace, label_selector):
        label = label_selector.partition("=")[2]
        return {pod["metadata"]["name"]: pod["metadata"]["resourceVersion"] for pod in self.pods.values()
                if pod["metadata"].get("namespace") == namespace
                and (pod["metadata"].get("labels") or {}).get(names.GROUP_LABEL) == label}

    def patch_status(self, resource, namespace, name, body, patch_type=None):
        """A Gang's status, merged (its reservations too) into the Gang as the API server merges it."""
        if resource is not kube.GANGS:
            return self.patch(resource, namespace, name, body, patch_type, subresource="status")
        key = f"{namespace}/{name}"
        gang = self.gangs.get(key) or {"apiVersion": f"{names.GANG_GROUP}/{names.GANG_VERSION}",
                                       "kind": names.GANG_KIND, "metadata": {"name": name, "namespace": namespace}}
        self.rv += 1
        gang = {**gang, "metadata": {**gang["metadata"], "resourceVersion": str(self.rv)},
                "status": apply_merge_patch(gang.get("status") or {}, body["status"])}
        self.gangs[key] = gang
        return gang

    def create(self, resource, namespace, body):
        if resource is kube.GANGS:
            self.gangs.setdefault(f"{namespace}/{body['metadata']['name']}", dict(body))
        return body

    def delete(self, resource, namespace, name, **_):
        self.pods.pop(f"{namespace}/{name}", None)


def _latency(node_objects: list[dict], bound: Iterator[dict], groups: int) -> dict:
    """Milliseconds from a group's last member reaching the controller to its last release patch;
    then, on clusters with room for it, the same for `LARGE_GROUPS` groups of `LARGE_GROUP` members of
    1 GPU each (`release_large_p50_ms`, `release_large_max_ms`): the controller's own share of
    releasing a large group, the API answering at once."""
    api = InMemoryAPI([])
    controller = Controller(api, Settings(), AuditLog("controller", _Discard()), Metrics())
    controller.apply_changes()
    controller.index.apply([(NODES, n["metadata"]["name"], node_from_api(n)) for n in node_objects])
    controller.index.apply([(PODS, object_key(p), pod_facts(p)) for p in bound])
    controller.settle_memory(collect=False)  # as the loop does once the caches have synced
    controller.reconcile_once()
    sizes = [size for size in LATENCY_SIZES if size <= len(node_objects) // 4] or [1]  # room on tiny clusters
    samples = sorted(_released(controller, api, f"late-{number}", sizes[number % len(sizes)], 4)
                     for number in range(groups))
    large = sorted(_released(controller, api, f"large-{number}", LARGE_GROUP, 1) for number in range(LARGE_GROUPS)
                   if len(node_objects) * 2 >= LARGE_GROUP)  # about half of each node's 8 GPUs are free
    return {"release_p50_ms": _ms(median(samples)), "release_p99_ms": _ms(samples[min(len(samples) - 1,
                                                                                     int(len(samples) * 0.99))]),
            "release_max_ms": _ms(samples[-1]), "release_large_p50_ms": _ms(median(large)) if large else None,
            "release_large_max_ms": _ms(large[-1]) if large else None}


def _released(controller: Controller, api: InMemoryAPI, group: str, size: int, gpus: int) -> float:
    """Seconds from the group's last member queued to its last release patch answered; the group then finishes."""
    members = [_member(f"{group}-{i}", group, gpus, size) for i in range(size)]
    api.pods.update((object_key(pod), pod) for pod in members)
    for pod in members[:-1]:
        controller._queue(PODS, object_key(pod), pod_facts(pod))
    controller.reconcile_once()
    controller._queue(PODS, object_key(members[-1]), pod_facts(members[-1]))
    started = time.perf_counter()
    outcomes = [controller.reconcile_once() for _ in range(2)]
    assert any(isinstance(a, Release) for a in outcomes[1].actions), "the group was released"
    released = api.released_at - started
    for pod in members:  # the group finishes: its capacity is free for the next one
        controller._queue(PODS, object_key(pod), None)
        del api.pods[object_key(pod)]
    controller.reconcile_once()
    return released


class _Discard:
    def write_line(self, line: str) -> None:
        return None


# --- restart -------------------------------------------------------------------------------

class _ListingAPI:
    """Lists nodes and pods, 500 a page, as `kube.Kube.list` reads them: each page parsed and
    transformed as it arrives. Making a page's JSON is the API server's work: timed apart (`serving`)."""

    PAGE = 500

    def __init__(self, nodes: list[dict], pods: Iterator[dict]):
        self.items = {kube.NODES.name: iter(nodes), kube.PODS.name: pods}
        self.serving, self.page_bytes = 0.0, 0

    def served(self, group: str, version: str, plural: str) -> bool:
        return True

    def list(self, resource, namespace=None, label_selector="", field_selector="", *, transform, reading=None):
        items, source = [], self.items[resource.name]
        decode = orjson.loads if reading is None else reading.page
        while True:
            started = time.perf_counter()
            page = orjson.dumps({"items": list(islice(source, self.PAGE))})
            self.serving += time.perf_counter() - started
            self.page_bytes = max(self.page_bytes, len(page))
            listed = decode(page)["items"]
            if not listed:
                return items, "1"
            items.extend(kept for kept in map(transform, listed) if kept is not None)


def _restart(node_count: int, bound_pods: int, waiting_groups: int, compare_whole: bool = True,
             check: bool = False) -> dict:
    """A restart in this (fresh) process: relist, settle, first pass (module docstring); RSS around
    it, the informers' caches alive as in the controller, and the most it reached (`rss_peak_mib`).
    Given `check`, then a consistency check as the controller makes one (a fresh index from the
    caches beside the one it replaces, settled, and a pass on it): the most RSS meanwhile and
    RSS after it (`rss_check_peak_mib`, `rss_after_check_mib`). Then, given `compare_whole`, the
    same relist reading whole objects beside it (`relist_whole_ms`), as before `controller.reading.shapes`."""
    before = _rss_mib()
    index = ClusterIndex()
    relisted, api, informers = _relisted(node_count, bound_pods, waiting_groups, index, (shapes.NODES, shapes.PODS))
    settled, _ = _timed(lambda: Controller.settle_memory(collect=False))  # as the loop does once synced
    first, outcome = _timed(lambda: reconcile(index, Memory(), 2_000_000_000.0, Settings()))
    after, peak = _rss_mib(), _rss_mib("VmHWM")
    checked: dict = {}
    if check:
        nodes, pods = (informer.cache.snapshot().values() for informer in informers)
        fresh = index.rebuilt_from(pods, [], nodes)[0]
        del index
        Controller.settle_memory()
        reconcile(fresh, outcome.memory, 2_000_000_001.0, Settings())
        checked = {"rss_check_peak_mib": _rss_mib("VmHWM"), "rss_after_check_mib": _rss_mib()}
        index = fresh
    del informers
    whole = _relisted(node_count, bound_pods, waiting_groups, ClusterIndex(), (None, None))[0] if compare_whole else None
    return {"relist_ms": _ms(relisted), "settle_ms": _ms(settled), "first_pass_ms": _ms(first),
            "restart_ms": _ms(relisted + settled + first), "restart_groups": sum(outcome.phases.values()),
            "pods_listed": len(index.pods), "rss_before_mib": before, "rss_after_mib": after, "rss_peak_mib": peak,
            "rss_pods_mib": round(after - before, 1), "sync_seconds": round(relisted, 2),
            "pod_json_kib": round(api.page_bytes / max(1, api.PAGE) / 1024, 1),
            "relist_whole_ms": None if whole is None else _ms(whole), **checked}


def memory(nodes: tuple[int, ...] = (5_000, 65_000), bound_pods: int = 650_000, waiting_groups: int = 5_000) -> dict:
    """What the controller holds after a restart, per node and per pod: RSS after a restart (as
    `_restart`, each in a fresh process) of the nodes alone at each size, and of the largest with
    `bound_pods` and `waiting_groups`, then through a consistency check; the nodes' slope from the
    first two, the pods' from the last two, and what is left at no node (the interpreter and the
    controller's modules)."""
    smallest, largest = min(nodes), max(nodes)
    alone = {count: _in_fresh_process(_restart, count, 0, 0, False) for count in (smallest, largest)}
    full = _in_fresh_process(_restart, largest, bound_pods, waiting_groups, False, True)
    per_node = (alone[largest]["rss_after_mib"] - alone[smallest]["rss_after_mib"]) / (largest - smallest)
    per_pod = (full["rss_after_mib"] - alone[largest]["rss_after_mib"]) / full["pods_listed"]
    return {"rows": [(count, 0, alone[count]) for count in (smallest, largest)] + [(largest, full["pods_listed"], full)],
            "mib_per_1000_nodes": round(per_node * 1000, 2), "mib_per_10000_pods": round(per_pod * 10_000, 2),
            "mib_at_none": round(alone[smallest]["rss_after_mib"] - per_node * smallest, 1)}


def _relisted(node_count: int, bound_pods: int, waiting_groups: int, index: ClusterIndex,
              readings: tuple) -> tuple[float, _ListingAPI, list[Informer]]:
    """Seconds to relist every node and pod into `index` (`readings`: the nodes' and the pods'), serving not
    counted; and the informers, whose caches the controller keeps beside the index."""
    node_objects, bound, waiting = _cluster(node_count, bound_pods, waiting_groups, lazily=True)
    api = _ListingAPI(node_objects, (_as_listed(pod, number) for number, pod in enumerate(chain(bound, waiting))))
    changes: list = []
    informers = [Informer(api, resource, transform, reading=read, on_object=lambda key, value, name=resource.name:
                          changes.append((name, key, value)))
                 for resource, transform, read in ((kube.NODES, node_from_api, readings[0]),
                                                   (kube.PODS, pod_facts, readings[1]))]
    started = time.perf_counter()
    for informer in informers:  # each informer lists on its own thread; here one after the other
        informer._relist()
    index.apply(changes)  # the loop's first turn applies what the informers queued
    return time.perf_counter() - started - api.serving, api, informers


def _in_fresh_process(function, *args) -> dict:
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply(function, args)


def _rss_mib(field: str = "VmRSS") -> float:
    """The process's resident memory now (or, for `VmHWM`, the most it has had), in MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
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


def _bound_pods(node_objects: list[dict], count: int, rng: random.Random) -> Iterator[dict]:
    """Running gangs of 8 spread over consecutive nodes, 0 or 1 GPU a member (about half of each
    node's GPUs taken, no node over its allocatable), 10 pods to a node; a gang of CPU pods is
    lone pods, in no group."""
    node_names = [n["metadata"]["name"] for n in node_objects]
    free = dict.fromkeys(node_names, 8)
    for first in range(0, count, GANG_SIZE):
        gpus = rng.choice((0, 0, 0, 1, 1))
        group = f"run-{first}"
        for i in range(first, min(count, first + GANG_SIZE)):
            node = node_names[i % len(node_names)]
            taken = gpus if free[node] >= gpus else 0
            free[node] -= taken
            yield _member(f"{group}-{i - first}", group, taken, GANG_SIZE, node=node, lone=not gpus)


def _waiting_group(index: int, rng: random.Random) -> list[dict]:
    size, gpus = rng.choice(WAITING_SHAPES[0]), rng.choice(WAITING_SHAPES[1])
    return [_member(f"wait-{index}-{i}", f"wait-{index}", gpus, size) for i in range(size)]


def _as_listed(pod: dict, number: int) -> dict:
    """The pod as a real API server lists it (about 5 KB): env, volumes, managed fields and, once
    bound, statuses, none of which the controller reads, around the same spec and metadata."""
    env = [{"name": f"VAR_{k}", "value": f"value-{k}-{number}"} for k in range(24)]
    container = {**pod["spec"]["containers"][0], "image": "registry.example/train:1.0", "env": env,
                 "volumeMounts": [{"name": f"vol-{k}", "mountPath": f"/mnt/{k}"} for k in range(4)]}
    metadata = {**pod["metadata"], "managedFields": [
        {"manager": manager, "operation": "Update", "fieldsType": "FieldsV1", "time": "2027-01-01T00:00:10Z",
         "fieldsV1": {f"f:{manager}-field-{k}": {} for k in range(30)}}
        for manager in ("kube-controller-manager", "kubelet", "gangkeeper")]}
    spec = {**pod["spec"], "containers": [container], "restartPolicy": "Never",
            "volumes": [{"name": f"vol-{k}", "emptyDir": {}} for k in range(4)]}
    status = dict(pod["status"])
    if "nodeName" in spec:
        status.update(podIP="10.0.0.1", startTime="2027-01-01T00:00:10Z",
                      conditions=[{"type": t, "status": "True", "lastTransitionTime": "2027-01-01T00:00:10Z"}
                                  for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
                      containerStatuses=[{"name": "main", "ready": True, "restartCount": 0, "image": "train:1.0",
                                          "state": {"running": {"startedAt": "2027-01-01T00:00:10Z"}}}])
    return {"metadata": metadata, "spec": spec, "status": status}


def markdown(figures: dict, told: dict) -> str:
    return ("## Controller: planning pass, restart, release latency and memory\n\n"
            "`bench/controller.py` (see its docstring for exactly what each figure includes). 8-GPU "
            "nodes, 10 bound pods per node, waiting gangs of 1–64 members. Targets at 15,000 nodes, 150,000 bound "
            "pods and 2,000 waiting groups: planning pass ≤ 1 s, restart ≤ 5 s, RSS ≤ 1 GiB; at 5,000 nodes the "
            "restart pass ≤ 1 s; release p99 ≤ 50 ms (in process, nothing else queued).\n\n"
            + _table(figures) + "\n\n" + _telling_markdown(told))


def _telling_markdown(told: dict) -> str:
    """What telling waiting pods why costs (`telling`)."""
    events = told["events"]
    telling = [count for count in events if count]
    said = ", then ".join(f"{count:,} × {sum(1 for c in telling if c == count)}" for count in dict.fromkeys(telling))
    return ("### Telling waiting pods why\n\n"
            f"`telling()` (see the module docstring): {told['nodes']} nodes with {told['nodes'] * PODS_PER_NODE:,} "
            f"bound pods and {told['waiting_pods']:,} waiting pods (groups of 8, half short of a member, half that do "
            f"not fit), from a restart; each pass run with `--pod-events-per-pass {told['per_pass']}` (the default) "
            "and with 0 (nobody told), median pass times side by side.\n\n"
            "| waiting pods | Events a pass writes | passes until every pod is told | pass ms while telling: with / "
            "without (ratio) | pass ms once every pod is told: with / without (ratio) |\n"
            "|---|---|---|---|---|\n"
            f"| {told['waiting_pods']:,} | {said}, then 0 | {len(telling)} "
            f"| {told['telling_ms']} / {told['silent_ms']} "
            f"({told['telling_ms'] / told['silent_ms']:.2f}) | {told['told_ms']} / {told['after_silent_ms']} "
            f"({told['told_ms'] / told['after_silent_ms']:.2f}) |\n")


def large_markdown(figures: dict, held: dict) -> str:
    """The largest clusters (`LARGE`), and what memory the controller holds per node and per pod (`memory`)."""
    rows = ["| nodes | pods kept | RSS after the restart MiB | most RSS MiB | most during a consistency check MiB "
            "| RSS after it MiB |", "|---|---|---|---|---|---|"]
    rows += [f"| {count:,} | {pods:,} | {row['rss_after_mib']} | {row['rss_peak_mib']} "
             f"| {row.get('rss_check_peak_mib', '—')} | {row.get('rss_after_check_mib', '—')} |"
             for count, pods, row in held["rows"]]
    return ("## Controller at 65,000 nodes: planning pass, restart and memory\n\n"
            "`bench/controller.py` (`LARGE`, `memory`): as the controller section, at 65,000 nodes with 650,000 bound "
            "pods and 5,000 waiting groups, the restart's relist not repeated reading whole objects. Targets: planning "
            "pass ≤ 1 s, restart (relist, settle, first pass) ≤ 10 s, RSS ≤ 2 GiB.\n\n" + _table(figures)
            + "\n\nMemory after a restart (relist, settle, first pass), each in a fresh process, the informers' caches "
            "alive as in the controller: the nodes alone, then with every pod (bound and waiting), and that one then "
            "through a consistency check (a second index built from the caches beside the first, which it "
            "replaces). The most RSS is the process's high-water mark (`VmHWM`).\n\n"
            + "\n".join(rows)
            + f"\n\nAbout **{held['mib_at_none']} MiB + {held['mib_per_1000_nodes']} MiB per 1,000 nodes + "
            f"{held['mib_per_10000_pods']} MiB per 10,000 pods** (the nodes' slope from the two node-only rows, the "
            "pods' from the last two).\n")


def _table(figures: dict) -> str:
    header = ("| nodes | bound pods | waiting groups | index rebuild ms | restart pass ms | planning pass ms "
              "| restart ms (relist + settle + first pass) | relist reading whole objects ms (relist ratio) "
              "| release p50 / p99 / max ms; 256 members p50 / max ms | RSS MiB (start → after restart; most) |")
    lines = [header, "|" + "---|" * 10]
    for label, row in figures.items():
        whole = (f"{row['relist_whole_ms']} ({row['relist_ms'] / row['relist_whole_ms']:.2f})"
                 if row["relist_whole_ms"] else "—")
        lines.append(
            f"| {label.split('=')[1]} | {row['bound_pods']:,} | {row['waiting_groups']:,} | {row['index_rebuild_ms']} "
            f"| {row['restart_pass_ms']} | {row['planning_pass_ms']} | {row['restart_ms']} ({row['relist_ms']} + "
            f"{row['settle_ms']} + {row['first_pass_ms']}) | {whole} | {row['release_p50_ms']} / "
            f"{row['release_p99_ms']} / {row['release_max_ms']}; {row['release_large_p50_ms'] or '—'} / "
            f"{row['release_large_max_ms'] or '—'} | {row['rss_before_mib']} → {row['rss_after_mib']}; "
            f"{row['rss_peak_mib']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run(**SCALE) if sys.argv[1:] == ["scale"] else run(**LARGE) if sys.argv[1:] == ["large"] else run(),
                     indent=2))
