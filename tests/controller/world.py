"""A small stand-in for the API server and the scheduler, to drive `reconcile()` pass after pass.

Pods are raw objects with resourceVersions; the reconciler's actions are applied the way the API
applies them (a stale Reserve or a Release whose `test` fails is a conflict and changes nothing;
a Gang's status is merged, as a merge patch is);
`bind()` plays the scheduler, binding each released member to the node it is pinned to. A pass
decides on `index()`, the world as a fresh index holds it (every group decided, as after a
restart). Every change is also recorded as an informer would report it, so that the same run can
feed a `ClusterIndex` incrementally and be compared with full rebuilds.
"""

import copy
from datetime import datetime, timezone
from typing import NamedTuple

import jsonpatch

from gangkeeper import names
from gangkeeper.controller.cache.asked import PROVISIONING_REQUESTS
from gangkeeper.controller.cache.groups import GANGS
from gangkeeper.controller.cache.index import NODES, PODS, Change, ClusterIndex
from gangkeeper.controller.deciding.capabilities import ApiCapabilities
from gangkeeper.controller.deciding.decisions import (
    CreateObject,
    DeleteGang,
    DeleteObject,
    DeletePod,
    Release,
    Report,
    Reserve,
    ReserveGroup,
    SaveGang,
)
from gangkeeper.controller.deciding.memory import Memory
from gangkeeper.controller.deciding.reconciler import reconcile
from gangkeeper.controller.deciding.settings import Settings
from gangkeeper.controller.reading.capacity import capacity_request_from_api
from gangkeeper.controller.reading.nodes import node_from_api
from gangkeeper.controller.reading.pods import pod_facts
from gangkeeper.controller.reading.workloads import workload_from_api
from gangkeeper.names import DEFAULT_ACCELERATORS
from tests.controller.builders import node_object, pod_object

NS = "team"


class Booking(NamedTuple):
    group: tuple[str, str]
    pod: str
    node: str


def booked(outcome, group=None) -> list[Booking]:
    """The reservations a pass wrote, on a Gang or on each pod, in the pass's order."""
    found = []
    for action in outcome.actions:
        if isinstance(action, Reserve):
            found.append(Booking(action.group, action.pod, action.node))
        elif isinstance(action, ReserveGroup):
            found += [Booking(action.group, pod, entry["node"]) for pod, entry in action.reservations.items()
                      if entry is not None]
    return [booking for booking in found if group is None or booking.group[1] == group]


def member_object(name, group="g", *, min_count=None, source=names.SOURCE_EXPLICIT, namespace=NS, owner=None,
                  timeout=None, **pod_kwargs):
    """A gated member as the webhook leaves it: group label, source annotation, gate."""
    pod = pod_object(name, namespace=namespace, **pod_kwargs)
    pod["metadata"]["labels"] = {names.GROUP_LABEL: group}
    annotations = pod["metadata"]["annotations"]
    annotations[names.GROUP_SOURCE_ANNOTATION] = source
    if min_count is not None:
        annotations[names.MIN_COUNT_ANNOTATION] = str(min_count)
    if timeout is not None:
        annotations[names.SCHEDULE_TIMEOUT_ANNOTATION] = str(timeout)
    if owner is not None:
        kind, owner_name = owner
        pod["metadata"]["ownerReferences"] = [{"apiVersion": "x/v1", "kind": kind, "name": owner_name,
                                               "uid": f"uid-{owner_name}", "controller": True}]
    return pod


class World:
    def __init__(self, nodes=(), workloads=()):
        self.rv = 0
        self.pods: dict[str, dict] = {}
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        self.workloads: dict[tuple, dict] = {}
        self.changes: list[Change] = [(NODES, name, node_from_api(n)) for name, n in self.nodes.items()]
        self.conflicts = 0
        self.asked: dict[tuple[str, str], dict] = {}  # (resource, namespace/name) → ProvisioningRequest, PodTemplate
        self.created = "2025-01-01T00:00:00Z"  # the creationTimestamp of what the controller creates
        for resource, obj in workloads:
            self.put_workload(resource, obj)

    # --- objects ---------------------------------------------------------------------------------

    def add(self, pod: dict) -> dict:
        pod = copy.deepcopy(pod)
        self._store(pod)
        return pod

    def node(self, name: str, **kwargs) -> None:
        self.nodes[name] = node_object(name, **kwargs)
        self.changes.append((NODES, name, node_from_api(self.nodes[name])))

    def put_workload(self, resource: str, obj: dict) -> None:
        obj = copy.deepcopy(obj)
        metadata = obj.setdefault("metadata", {})
        metadata.setdefault("namespace", NS)
        metadata.setdefault("uid", f"uid-{metadata['name']}")
        key = (resource, metadata["namespace"], metadata["name"])
        self.workloads[key] = obj
        self.changes.append((resource, key, workload_from_api(resource, obj)))

    def delete(self, key: str) -> None:
        del self.pods[key]
        self.changes.append((PODS, key, None))

    def finish(self, key: str, phase: str = "Succeeded") -> None:
        self.pods[key]["status"]["phase"] = phase
        self._store(self.pods[key])

    def _store(self, pod: dict) -> None:
        self.rv += 1
        pod["metadata"]["resourceVersion"] = str(self.rv)
        key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        self.pods[key] = pod
        self.changes.append((PODS, key, pod_facts(pod)))

    # --- views -------------------------------------------------------------------------------------

    def facts(self) -> list:
        return [f for f in map(pod_facts, self.pods.values()) if f is not None]

    def node_list(self) -> list:
        return [node_from_api(n) for n in self.nodes.values()]

    def workload_index(self) -> dict:
        return {key: workload_from_api(key[0], obj) for key, obj in self.workloads.items()}

    def index(self, accelerator_patterns=DEFAULT_ACCELERATORS) -> ClusterIndex:
        requests = [(PROVISIONING_REQUESTS, key, capacity_request_from_api(obj))
                    for (resource, key), obj in self.asked.items() if resource == PROVISIONING_REQUESTS]
        return ClusterIndex.build(self.facts(), self.workload_index(), self.node_list(), accelerator_patterns,
                                  objects=requests)

    def put_request(self, request: dict) -> None:
        """A ProvisioningRequest as the autoscaler leaves it (its status written)."""
        key = f"{request['metadata']['namespace']}/{request['metadata']['name']}"
        self.asked[PROVISIONING_REQUESTS, key] = request
        self.changes.append((PROVISIONING_REQUESTS, key, capacity_request_from_api(request)))

    def requests(self) -> list[dict]:
        return [obj for (resource, _), obj in self.asked.items() if resource == PROVISIONING_REQUESTS]

    def templates(self) -> list[dict]:
        return [obj for (resource, _), obj in self.asked.items() if resource == "podtemplates"]

    def take_changes(self) -> list[Change]:
        changes, self.changes = self.changes, []
        return changes

    def reserved_node(self, name: str, namespace: str = NS) -> str | None:
        """The node booked for a pod: its own reservation or pin, or the one a Gang holds for it."""
        pod = self.pods[f"{namespace}/{name}"]
        own = pod_facts(pod).member.reserved_node
        if own is not None:
            return own
        uid = pod["metadata"]["uid"]
        return next((entry["node"] for key, gang in self.workloads.items() if key[0] == GANGS and key[1] == namespace
                     for pod_name, entry in ((gang.get("status") or {}).get("reservations") or {}).items()
                     if pod_name == name and entry["uid"] == uid), None)

    def gang(self, name: str, namespace: str = NS) -> dict | None:
        return self.workloads.get((GANGS, namespace, name))

    # --- the API's side of actions, and the scheduler ---------------------------------------------

    def apply(self, actions) -> None:
        for action in actions:
            key = f"{action.group[0]}/{getattr(action, 'pod', '')}"
            if isinstance(action, Reserve):
                pod = self.pods.get(key)
                if pod is None or pod["metadata"]["resourceVersion"] != action.resource_version:
                    self.conflicts += 1
                    continue
                pod["metadata"]["annotations"][names.RESERVED_NODE_ANNOTATION] = action.node
                self._store(pod)
            elif isinstance(action, Release):
                try:
                    self._store(jsonpatch.apply_patch(self.pods[key], list(action.patch)))
                except (KeyError, jsonpatch.JsonPatchException):
                    self.conflicts += 1
            elif isinstance(action, DeletePod):
                if key in self.pods:
                    self.delete(key)
            elif isinstance(action, ReserveGroup):
                self._reserve_on_gang(action)
            elif isinstance(action, SaveGang):
                self._save_gang(action)
            elif isinstance(action, CreateObject):
                self._create(action)
            elif isinstance(action, DeleteObject):
                self._delete(action)
            elif isinstance(action, DeleteGang):
                key = (GANGS, action.group[0], action.name)
                if self.workloads.pop(key, None) is not None:
                    self.changes.append((GANGS, key, None))  # as the Gangs informer reports it

    def _create(self, action: CreateObject) -> None:
        body = copy.deepcopy(dict(action.body))
        metadata = body["metadata"]
        key = f"{metadata['namespace']}/{metadata['name']}"
        metadata.setdefault("uid", f"uid-{metadata['name']}")
        metadata.setdefault("creationTimestamp", self.created)
        if action.resource.plural == "pods":
            if key not in self.pods:
                body.setdefault("status", {"phase": "Pending"})
                self._store(body)
        elif (action.resource.name, key) not in self.asked:
            if action.resource.name == PROVISIONING_REQUESTS:
                self.put_request(body)
            else:
                self.asked[action.resource.name, key] = body

    def _delete(self, action: DeleteObject) -> None:
        key = f"{action.group[0]}/{action.name}"
        if action.resource.plural == "pods":
            if key in self.pods:
                self.delete(key)
        elif self.asked.pop((action.resource.name, key), None) is not None and action.resource.name == PROVISIONING_REQUESTS:
            self.changes.append((PROVISIONING_REQUESTS, key, None))

    def _save_gang(self, action: SaveGang) -> None:
        self._merge_status(action.group[0], action.name, action.create, action.status)

    def _reserve_on_gang(self, action: ReserveGroup) -> None:
        current = self.gang(action.name, action.group[0]) or action.create or {}
        reservations = {**(current.get("status") or {}).get("reservations", {}), **action.reservations}
        self._merge_status(action.group[0], action.name, action.create,
                           {"reservations": {name: entry for name, entry in reservations.items() if entry is not None}})

    def _merge_status(self, namespace: str, name: str, create, status) -> None:
        """The Gang's status merged with `status` (a key set to None is removed), as a merge patch does."""
        current = self.gang(name, namespace)
        body = copy.deepcopy(dict(create)) if current is None else current
        merged = {**(body.get("status") or {}), **status}
        body["status"] = {key: value for key, value in merged.items() if value is not None}
        self.put_workload(GANGS, body)

    def bind(self) -> list[str]:
        """Bind every released, unbound member to its pinned node; return their keys."""
        bound = []
        for key, pod in self.pods.items():
            spec = pod["spec"]
            if spec.get("schedulingGates") or spec.get("nodeName") or pod["status"]["phase"] != "Pending":
                continue
            facts = pod_facts(pod)
            if facts is None or facts.member.reserved_node is None:
                continue
            spec["nodeName"] = facts.member.reserved_node
            pod["status"]["phase"] = "Running"
            bound.append(key)
        for key in bound:
            self._store(self.pods[key])
        return bound


# --- passes, one at a time ---------------------------------------------------------------------

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def rfc3339(moment: float) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
CREATED = "2027-01-15T08:00:00Z"  # NOW


class Run:
    """A world and the controller's memory, advanced one pass at a time; with `jobs` (a stand-in
    owner's controller), it syncs before each pass."""

    def __init__(self, world: World, settings: Settings = Settings(), jobs=None,
                 capabilities: ApiCapabilities = ApiCapabilities()):
        self.world, self.settings, self.jobs, self.capabilities = world, settings, jobs, capabilities
        self.memory, self.now = Memory(), NOW

    def step(self, seconds: float = 1.0, bind: bool = False):
        if self.jobs is not None:
            self.jobs.sync()
        outcome = reconcile(self.world.index(self.settings.accelerator_patterns), self.memory, self.now,
                            self.settings, self.capabilities)
        self.memory = outcome.memory
        self.world.created = rfc3339(self.now)  # what the pass creates, it creates now
        self.world.apply(outcome.actions)
        if bind:
            self.world.bind()
        self.now += seconds
        return outcome


def nodes(count, gpus=8):
    return [node_object(f"n{i}", gpus=gpus) for i in range(count)]


def add_group(world, group, size, gpus=8, created=CREATED, **kwargs):
    for i in range(size):
        world.add(member_object(f"{group}-{i}", group=group, min_count=kwargs.pop("min_count", size), gpus=gpus,
                                created=created, **kwargs))


def of(outcome, kind, group=None):
    return [a for a in outcome.actions if isinstance(a, kind) and (group is None or a.group[1] == group)]


def reports(outcome, event):
    return [a for a in of(outcome, Report) if a.event == event]
