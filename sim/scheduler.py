"""The emulated default kube-scheduler: a queue of unbound pods, one pod placed at a time.

Like kube-scheduler it keeps its own picture of the cluster from watch events (nodes; every
non-terminal pod bound to a node with its requests, host ports, labels and anti-affinity, kept
incrementally; namespaces' labels; DeviceClasses, ResourceSlices and ResourceClaims), pops pods
in priority then creationTimestamp order, skips gated pods and pods whose ResourceClaims are not
there yet, binds through `pods/binding`, and "assumes" each bind at once so that the next pod
sees the capacity, ports and devices it took. Before binding a pod that needs devices it writes
what DynamicResources' PreBind writes: the claim's finalizer, `status.allocation` and
`status.reservedFor`, and for extended resources served by DRA the special claim and the pod's
`status.extendedResourceClaimStatus`. A pod that fits nowhere gets `PodScheduled=False, reason
Unschedulable` and is parked until the cluster changes (a node, DRA object or namespace event,
a bound pod finishing or going away, for pods with pod affinity or spread constraints also a
pod placed) or the pod itself changes.

Parked pods are grouped by shape: on a change only the first pod of each shape is retried, and
the next one follows only if it binds. A pod identical to one that does not fit cannot fit
either, so a replay with thousands of pending pods does not retry them one by one on every
event. The shape is what the filters read of a pod: requests, node selector and affinity,
tolerations, host ports, spread constraints, its namespace and the labels any selector in play
reads (its own terms', and every placed pod's anti-affinity terms'; when a placed pod brings a
new one, every pending pod is grouped again); a pod with ResourceClaims is a shape of its own.
The placement itself is the pure function `sim.placement.place`.
"""

import heapq
import json
from dataclasses import dataclass

from gangkeeper.resources import Resources, pod_requests
from sim.api import SCHEDULER, APIError, ClusterAPI, WatchEvent
from sim.clock import rfc3339
from sim.dra import DraState, PodClaim
from sim.interpod import LabelSelector, PlacedPod, affinity_filter, label_keys, placed_pod, required_terms
from sim.names import (
    CLAIM_FINALIZER,
    DEFAULT_SCHEDULER,
    DEVICE_CLASSES,
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    NAMESPACES,
    NODES,
    PODS,
    RESOURCE_API_VERSION,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
)
from sim.placement import (
    Checks,
    Decision,
    NodeFacts,
    NodeUsage,
    Scoring,
    exact,
    exact_resources,
    host_ports,
    node_facts,
    pinned_nodes,
    place,
    static_reasons,
)
from sim.spread import DO_NOT_SCHEDULE, SCHEDULE_ANYWAY, constraints, spread_filter, spread_scores

TERMINAL_PHASES = ("Succeeded", "Failed")
GONE_CODES = (404, 409)


@dataclass
class PendingPod:
    pod: dict
    requests: Resources
    shape: str  # node constraints only; pods of one shape pass the same static filters
    fit_shape: tuple  # everything the filters read of the pod
    order: tuple  # (-priority, creationTimestamp, arrival)
    pinned: frozenset[str] | None  # the nodes NodeAffinity's PreFilter leaves, None: all
    pod_sensitive: bool  # pod affinity or spread constraints: another pod placed may let it fit
    parked: bool = False


@dataclass
class Held:
    """A bound pod as the filters see it."""

    requests: Resources
    ports: tuple
    placed: PlacedPod


def pod_key(pod: dict) -> str:
    return f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"


def is_terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def is_gated(pod: dict) -> bool:
    return bool((pod.get("spec") or {}).get("schedulingGates"))


def constraints_shape(pod: dict) -> str:
    spec = pod.get("spec") or {}
    return json.dumps([spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations")], sort_keys=True)


def scheduling_view(pod: dict) -> tuple:
    """What a change must touch for the scheduler to look at a pending pod again."""
    return (pod.get("spec"), pod["metadata"].get("labels"),
            (pod.get("status") or {}).get("resourceClaimStatuses"))


def own_label_keys(pod: dict) -> frozenset[str]:
    """Label keys the pod's own pod-affinity terms and spread constraints read of it."""
    keys = label_keys(required_terms(pod, "podAffinity") + required_terms(pod, "podAntiAffinity"))
    for constraint in (pod.get("spec") or {}).get("topologySpreadConstraints") or ():
        keys |= LabelSelector.parse(constraint.get("labelSelector")).keys()
        keys |= frozenset(constraint.get("matchLabelKeys") or ())
    return keys


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
    resources = (NODES, PODS, NAMESPACES, DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS)

    def __init__(self, api: ClusterAPI, *, scoring: Scoring = Scoring(), name: str = DEFAULT_SCHEDULER):
        self.api = api
        self.scoring = scoring
        self.name = name
        self.nodes: dict[str, NodeFacts] = {}
        self.usage: dict[str, NodeUsage] = {}
        self.holding: dict[str, tuple[str, Held]] = {}  # bound pod → (node, what it holds)
        self.pods_on: dict[str, dict[str, PlacedPod]] = {}
        self.with_anti_affinity: dict[str, PlacedPod] = {}
        self.anti_affinity_keys: frozenset[str] = frozenset()
        self.namespace_labels: dict[str, dict] = {}
        self.dra = DraState()
        self.pending: dict[str, PendingPod] = {}
        self.active: list[tuple[tuple, str]] = []
        self.parked: dict[tuple, list[tuple[tuple, str]]] = {}
        self.pod_sensitive_shapes: set[tuple] = set()
        self.static_cache: dict[str, dict[str, tuple[str, ...]]] = {}
        self.arrivals = 0

    # --- watch ------------------------------------------------------------------------------
    def observe(self, event: WatchEvent, now: float) -> None:
        if event.resource == NODES:
            self._observe_node(event)
        elif event.resource == PODS:
            self._observe_pod(event)
        elif event.resource == NAMESPACES:
            self._observe_namespace(event)
        else:
            self.dra.observe(event.resource, event.type, event.object)
            self._retry_parked()

    def _observe_node(self, event: WatchEvent) -> None:
        name = event.object["metadata"]["name"]
        if event.type == "DELETED":
            self.nodes.pop(name, None)
        else:
            self.nodes[name] = node_facts(event.object)
        self.static_cache.clear()
        self.dra.nodes_changed()
        self._retry_parked()

    def _observe_namespace(self, event: WatchEvent) -> None:
        name = event.object["metadata"]["name"]
        labels = event.object["metadata"].get("labels") or {}
        if event.type == "DELETED":
            self.namespace_labels.pop(name, None)
        elif self.namespace_labels.get(name) != labels:
            self.namespace_labels[name] = labels
            self._retry_parked(pod_sensitive_only=True)

    def _observe_pod(self, event: WatchEvent) -> None:
        pod = event.object
        key = pod_key(pod)
        if event.type == "DELETED" or is_terminal(pod):
            self.pending.pop(key, None)
            if self._release(key):
                self._retry_parked()
        elif (pod.get("spec") or {}).get("nodeName"):
            self.pending.pop(key, None)
            held = self.holding.get(key)
            if held is None:
                self._hold(key, pod["spec"]["nodeName"], pod, exact_resources(pod_requests(pod)))
            elif held[1].placed != placed_pod(pod, held[0]):
                self._release(key)
                self._hold(key, held[0], pod, held[1].requests)
        elif ((pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER) == self.name:
            self._queue(key, pod)

    def _queue(self, key: str, pod: dict) -> None:
        known = self.pending.get(key)
        if known and scheduling_view(known.pod) == scheduling_view(pod):
            known.pod = pod  # a status or metadata change: nothing to reconsider
            return
        arrival = known.order[2] if known else self.arrivals
        self.arrivals += 1
        spec = pod.get("spec") or {}
        order = (-(spec.get("priority") or 0), pod["metadata"].get("creationTimestamp", ""), arrival)
        sensitive = bool(required_terms(pod, "podAffinity") or constraints(pod, DO_NOT_SCHEDULE)
                         or constraints(pod, SCHEDULE_ANYWAY))
        requests = exact_resources(pod_requests(pod))
        entry = PendingPod(pod, requests, constraints_shape(pod), (), order, pinned_nodes(spec), sensitive)
        entry.fit_shape = self._fit_shape(key, entry)
        self.pending[key] = entry
        if not is_gated(pod):
            heapq.heappush(self.active, (order, key))

    def _fit_shape(self, key: str, entry: PendingPod) -> tuple:
        pod = entry.pod
        spec = pod.get("spec") or {}
        keys = own_label_keys(pod) | self.anti_affinity_keys
        labels = pod["metadata"].get("labels") or {}
        alike = None
        if keys or self.with_anti_affinity or entry.pod_sensitive or required_terms(pod, "podAntiAffinity"):
            alike = (pod["metadata"].get("namespace", ""), tuple((k, labels.get(k)) for k in sorted(keys)))
        own = key if spec.get("resourceClaims") else None
        return (entry.shape, tuple(sorted(entry.requests.items())), host_ports(pod),
                json.dumps(spec.get("topologySpreadConstraints"), sort_keys=True), alike, own)

    def _regroup(self) -> None:
        """Selectors read more labels than before: every pending pod gets its shape again."""
        for key, entry in self.pending.items():
            entry.fit_shape = self._fit_shape(key, entry)
        parked = [key for key, entry in self.pending.items() if entry.parked]
        self.parked, self.pod_sensitive_shapes = {}, set()
        for key in parked:
            self._park(key, self.pending[key])

    # --- what runs where, kept from events and from our own binds ---------------------------
    def _hold(self, key: str, node: str, pod: dict, requests: Resources) -> None:
        placed = placed_pod(pod, node)
        ports = host_ports(pod)
        self.holding[key] = (node, Held(requests, ports, placed))
        usage = self.usage.get(node) or self.usage.setdefault(node, NodeUsage())
        for name, value in requests.items():
            usage.requested[name] = exact(usage.requested.get(name, 0) + value)
        usage.pods += 1
        usage.ports.update(ports)
        self.pods_on.setdefault(node, {})[key] = placed
        if placed.anti_affinity:
            first = not self.with_anti_affinity
            self.with_anti_affinity[key] = placed
            keys = self.anti_affinity_keys | label_keys(placed.anti_affinity)
            if first or keys != self.anti_affinity_keys:
                self.anti_affinity_keys = keys
                self._regroup()
        self._retry_parked(pod_sensitive_only=True)

    def _release(self, key: str) -> bool:
        held = self.holding.pop(key, None)
        if held is None:
            return False
        node, what = held
        usage = self.usage[node]
        for name, value in what.requests.items():
            usage.requested[name] = exact(usage.requested[name] - value)
        usage.pods -= 1
        usage.ports.subtract(what.ports)
        self.pods_on[node].pop(key, None)
        self.with_anti_affinity.pop(key, None)
        return True

    def _retry_parked(self, pod_sensitive_only: bool = False) -> None:
        """Move the first parked pod of every shape (or of every pod-sensitive one) back into the active queue."""
        for fit_shape in list(self.pod_sensitive_shapes if pod_sensitive_only else self.parked):
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
            self.pod_sensitive_shapes.discard(fit_shape)

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
        if decision is None:  # PreEnqueue: a claim is not there yet
            self._park(key, entry)
            return False
        if decision.node is None:
            failed[entry.fit_shape] = decision
            self._park(key, entry)
            return self._report_unschedulable(entry.pod, decision, now)
        if decision.plan is not None and not self._write_claims(entry.pod, decision.plan, now):
            self._park(key, entry)
            return True
        try:
            self.api.bind(entry.pod["metadata"].get("namespace", ""), entry.pod["metadata"]["name"],
                          decision.node, user=SCHEDULER)
        except APIError as error:
            if error.code in GONE_CODES:
                self.pending.pop(key, None)
            else:
                self._park(key, entry)
            return decision.plan is not None
        self.pending.pop(key, None)
        self._hold(key, decision.node, entry.pod, entry.requests)
        for shape in [s for s in failed if s in self.pod_sensitive_shapes]:
            del failed[shape]  # another pod placed may let these fit now
        self._unpark_next(entry.fit_shape)
        return True

    def _decide(self, entry: PendingPod) -> Decision | None:
        pod = entry.pod
        prepared = self.dra.prepare(pod, entry.requests)
        if prepared.waiting:
            return None
        checks = Checks(claims=prepared.check, served_by_dra=self.dra.served, failure=prepared.failure)
        if entry.pod_sensitive:
            pods_on = {node: placed.values() for node, placed in self.pods_on.items()}
            checks.spread = spread_filter(pod, self.nodes.values(), pods_on)
            if constraints(pod, SCHEDULE_ANYWAY):
                checks.spread_scores = lambda feasible: spread_scores(pod, feasible, self.nodes.values(), pods_on)
        if self.with_anti_affinity or required_terms(pod, "podAffinity") or required_terms(pod, "podAntiAffinity"):
            checks.affinity = affinity_filter(pod, self.nodes, (held.placed for _, held in self.holding.values()),
                                              self.with_anti_affinity.values(), self._labels_of_namespace)
        return place(pod, entry.requests, self.nodes.values(), self.usage, self.scoring, self._static(entry), checks)

    def _static(self, entry: PendingPod) -> dict[str, tuple[str, ...]]:
        static = self.static_cache.get(entry.shape)
        if static is None:
            names = self.nodes if entry.pinned is None else [n for n in entry.pinned if n in self.nodes]
            static = self.static_cache[entry.shape] = {n: static_reasons(entry.pod, self.nodes[n]) for n in names}
        return static

    def _labels_of_namespace(self, name: str) -> dict:
        return self.namespace_labels.get(name) or {}

    def _park(self, key: str, entry: PendingPod) -> None:
        entry.parked = True
        heapq.heappush(self.parked.setdefault(entry.fit_shape, []), (entry.order, key))
        if entry.pod_sensitive:
            self.pod_sensitive_shapes.add(entry.fit_shape)

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

    # --- DynamicResources' PreBind -----------------------------------------------------------
    def _write_claims(self, pod: dict, plan, now: float) -> bool:
        """Allocate and reserve the pod's claims, and create the special claim for extended
        resources; False when a write was refused (the pod is tried again on the next change)."""
        for claim, allocation in plan.claims:
            if (allocation is not None or not claim.reserved) and self._reserve(claim, pod, allocation, now) is None:
                return False
        if plan.extended is None:
            return True
        requests, mappings, allocation = plan.extended
        namespace, name = pod["metadata"].get("namespace", ""), pod["metadata"]["name"]
        try:
            created = self.api.create(RESOURCE_CLAIMS, extended_resource_claim(pod, requests), namespace=namespace,
                                      user=SCHEDULER)
        except APIError:
            return False
        special = PodClaim((namespace, created["metadata"]["name"]), created, None, False)
        if self._reserve(special, pod, allocation, now) is None:
            return False
        status = {"extendedResourceClaimStatus": {"requestMappings": mappings,
                                                  "resourceClaimName": created["metadata"]["name"]}}
        try:
            self.api.patch(PODS, name, {"status": status}, namespace=namespace, subresource="status", user=SCHEDULER)
        except APIError:
            return False
        return True

    def _reserve(self, claim: PodClaim, pod: dict, allocation: dict | None, now: float) -> dict | None:
        namespace, name = claim.key
        current = claim.claim
        try:
            finalizers = list(current["metadata"].get("finalizers") or ())
            if allocation is not None and CLAIM_FINALIZER not in finalizers:
                current = self.api.patch(RESOURCE_CLAIMS, name, {"metadata": {
                    "resourceVersion": current["metadata"]["resourceVersion"],
                    "finalizers": finalizers + [CLAIM_FINALIZER]}}, namespace=namespace, user=SCHEDULER)
            status = dict(current.get("status") or {})
            if allocation is not None:
                status["allocation"] = dict(allocation, allocationTimestamp=rfc3339(now))
            status["reservedFor"] = list(status.get("reservedFor") or ()) + [
                {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}]
            current = self.api.patch(RESOURCE_CLAIMS, name, {
                "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]}, "status": status},
                namespace=namespace, subresource="status", user=SCHEDULER)
        except APIError:
            return None
        self.dra.put_claim(current)
        return current


def extended_resource_claim(pod: dict, requests: list) -> dict:
    """The claim for a pod's extended resources served by DRA, as the scheduler creates it."""
    meta = pod["metadata"]
    return {"apiVersion": RESOURCE_API_VERSION, "kind": "ResourceClaim",
            "metadata": {"generateName": f"{meta['name']}-extended-resources-", "namespace": meta.get("namespace", ""),
                         "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                              "uid": meta.get("uid", ""), "controller": True}]},
            "spec": {"devices": {"requests": requests}}}
