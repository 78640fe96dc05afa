"""The emulated default kube-scheduler: a queue of unbound pods, one pod placed at a time.

Like kube-scheduler it keeps its own picture of the cluster from watch events (nodes, and the
requests of every non-terminal pod bound to each node, kept incrementally), pops pods in
priority then creationTimestamp order, skips gated pods, binds through `pods/binding`, and
"assumes" each bind at once so that the next pod sees the capacity it took. A pod that fits
nowhere gets `PodScheduled=False, reason Unschedulable` and is parked until the cluster changes
(a node event, or a bound pod finishing or going away) or the pod itself changes.

Parked pods are grouped by shape (same requests, selector, affinity, tolerations): on a change
only the first pod of each shape is retried, and the next one follows only if it binds. A pod
identical to one that does not fit cannot fit either, so a replay with thousands of pending
pods does not retry them one by one on every event. The placement itself is the pure function
`sim.placement.place`.
"""

import heapq
import json
from dataclasses import dataclass

from gangkeeper.resources import Resources, pod_requests
from sim.api import SCHEDULER, APIError, ClusterAPI, WatchEvent
from sim.clock import rfc3339
from sim.names import DEFAULT_SCHEDULER, NODES, PODS
from sim.placement import (
    Decision,
    NodeFacts,
    NodeUsage,
    Scoring,
    exact,
    exact_resources,
    node_facts,
    place,
    static_reasons,
)

TERMINAL_PHASES = ("Succeeded", "Failed")
GONE_CODES = (404, 409)


@dataclass
class PendingPod:
    pod: dict
    requests: Resources
    shape: str  # constraints only; pods of one shape fit the same nodes
    fit_shape: tuple  # shape plus requests
    order: tuple  # (-priority, creationTimestamp, arrival)
    parked: bool = False


def pod_key(pod: dict) -> str:
    return f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"


def is_terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def is_gated(pod: dict) -> bool:
    return bool((pod.get("spec") or {}).get("schedulingGates"))


def constraints_shape(pod: dict) -> str:
    spec = pod.get("spec") or {}
    return json.dumps([spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations")], sort_keys=True)


def unschedulable_conditions(pod: dict, message: str, now: float) -> list[dict] | None:
    """The pod's conditions with PodScheduled=False/Unschedulable, or None when already so. As
    `podutil.UpdatePodCondition` does, a condition that was False already (SchedulingGated, or
    another reason) keeps its transition time."""
    conditions = list((pod.get("status") or {}).get("conditions") or ())
    current = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
    if current and current.get("reason") == "Unschedulable" and current.get("message") == message:
        return None
    since = current.get("lastTransitionTime") if current and current.get("status") == "False" else None
    condition = {"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                 "lastTransitionTime": since or rfc3339(now), "reason": "Unschedulable", "message": message}
    return [c for c in conditions if c.get("type") != "PodScheduled"] + [condition]


class Scheduler:
    resources = (NODES, PODS)

    def __init__(self, api: ClusterAPI, *, scoring: Scoring = Scoring(), name: str = DEFAULT_SCHEDULER):
        self.api = api
        self.scoring = scoring
        self.name = name
        self.nodes: dict[str, NodeFacts] = {}
        self.usage: dict[str, NodeUsage] = {}
        self.holding: dict[str, tuple[str, Resources]] = {}  # bound pod → (node, requests)
        self.pending: dict[str, PendingPod] = {}
        self.active: list[tuple[tuple, str]] = []
        self.parked: dict[tuple, list[tuple[tuple, str]]] = {}
        self.static_cache: dict[str, dict[str, tuple[str, ...]]] = {}
        self.arrivals = 0

    # --- watch ------------------------------------------------------------------------------
    def observe(self, event: WatchEvent, now: float) -> None:
        if event.resource == NODES:
            self._observe_node(event)
        elif event.resource == PODS:
            self._observe_pod(event)

    def _observe_node(self, event: WatchEvent) -> None:
        name = event.object["metadata"]["name"]
        if event.type == "DELETED":
            self.nodes.pop(name, None)
        else:
            self.nodes[name] = node_facts(event.object)
        self.static_cache.clear()
        self._retry_parked()

    def _observe_pod(self, event: WatchEvent) -> None:
        pod = event.object
        key = pod_key(pod)
        if event.type == "DELETED" or is_terminal(pod):
            self.pending.pop(key, None)
            if self._release(key):
                self._retry_parked()
        elif (pod.get("spec") or {}).get("nodeName"):
            self.pending.pop(key, None)
            if key not in self.holding:
                self._hold(key, pod["spec"]["nodeName"], exact_resources(pod_requests(pod)))
        elif ((pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER) == self.name:
            self._queue(key, pod)

    def _queue(self, key: str, pod: dict) -> None:
        known = self.pending.get(key)
        if known and known.pod.get("spec") == pod.get("spec"):
            known.pod = pod  # a status or metadata change: nothing to reconsider
            return
        arrival = known.order[2] if known else self.arrivals
        self.arrivals += 1
        spec = pod.get("spec") or {}
        requests = exact_resources(pod_requests(pod))
        shape = constraints_shape(pod)
        order = (-(spec.get("priority") or 0), pod["metadata"].get("creationTimestamp", ""), arrival)
        entry = PendingPod(pod, requests, shape, (shape, tuple(sorted(requests.items()))), order)
        self.pending[key] = entry
        if not is_gated(pod):
            heapq.heappush(self.active, (order, key))

    # --- node usage, kept from events and from our own binds --------------------------------
    def _hold(self, key: str, node: str, requests: Resources) -> None:
        self.holding[key] = (node, requests)
        usage = self.usage.setdefault(node, NodeUsage())
        for name, value in requests.items():
            usage.requested[name] = exact(usage.requested.get(name, 0) + value)
        usage.pods += 1

    def _release(self, key: str) -> bool:
        held = self.holding.pop(key, None)
        if held is None:
            return False
        node, requests = held
        usage = self.usage[node]
        for name, value in requests.items():
            usage.requested[name] = exact(usage.requested[name] - value)
        usage.pods -= 1
        return True

    def _retry_parked(self) -> None:
        """Move the first parked pod of every shape back into the active queue."""
        for fit_shape in list(self.parked):
            self._unpark_next(fit_shape)

    def _unpark_next(self, fit_shape: tuple) -> None:
        bucket = self.parked.get(fit_shape, [])
        while bucket:
            order, key = heapq.heappop(bucket)
            entry = self.pending.get(key)
            if entry and entry.parked and entry.order == order and entry.fit_shape == fit_shape:
                entry.parked = False
                heapq.heappush(self.active, (order, key))
                break
        if not bucket:
            self.parked.pop(fit_shape, None)

    # --- scheduling cycle --------------------------------------------------------------------
    def step(self, now: float) -> bool:
        """Try every active pod, one at a time in queue order; True when anything was written."""
        wrote = False
        failed: dict[tuple, Decision] = {}
        while self.active:
            order, key = heapq.heappop(self.active)
            entry = self.pending.get(key)
            if entry is None or entry.parked or entry.order != order or is_gated(entry.pod):
                continue
            wrote |= self._schedule_one(key, entry, failed, now)
        return wrote

    def next_due(self) -> float | None:
        return None

    def _schedule_one(self, key: str, entry: PendingPod, failed: dict[tuple, Decision], now: float) -> bool:
        decision = failed.get(entry.fit_shape) or self._decide(entry)
        if decision.node is None:
            failed[entry.fit_shape] = decision
            self._park(key, entry)
            return self._report_unschedulable(entry.pod, decision, now)
        try:
            self.api.bind(entry.pod["metadata"].get("namespace", ""), entry.pod["metadata"]["name"],
                          decision.node, user=SCHEDULER)
        except APIError as error:
            if error.code in GONE_CODES:
                self.pending.pop(key, None)
            else:
                self._park(key, entry)
            return False
        self.pending.pop(key, None)
        self._hold(key, decision.node, entry.requests)
        self._unpark_next(entry.fit_shape)
        return True

    def _decide(self, entry: PendingPod) -> Decision:
        static = self.static_cache.get(entry.shape)
        if static is None:
            static = {name: static_reasons(entry.pod, node) for name, node in self.nodes.items()}
            self.static_cache[entry.shape] = static
        return place(entry.pod, entry.requests, self.nodes.values(), self.usage, self.scoring, static)

    def _park(self, key: str, entry: PendingPod) -> None:
        entry.parked = True
        heapq.heappush(self.parked.setdefault(entry.fit_shape, []), (entry.order, key))

    def _report_unschedulable(self, pod: dict, decision: Decision, now: float) -> bool:
        conditions = unschedulable_conditions(pod, decision.message(), now)
        if conditions is None:
            return False
        try:
            self.api.patch(PODS, pod["metadata"]["name"], {"status": {"conditions": conditions}},
                           namespace=pod["metadata"].get("namespace"), subresource="status", user=SCHEDULER)
        except APIError:
            return False
        return True
