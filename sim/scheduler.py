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

For a pod that fits nowhere the PostFilter plugins run, and the message ends with what they
say, as the real one does: DynamicResources' "still not schedulable" (a pod with claims or with
extended resources a DeviceClass serves) or "no new claims to deallocate" (a pod without, or
one its own PreFilter refused), then DefaultPreemption's (`sim.preemption`; its dry run reruns
the filters on a node with pods taken away: their requests, pod slots, host ports, and their
part in pod (anti-)affinity and spread; devices stay allocated, as upstream's DynamicResources
has no PreFilter extensions). When NodeAffinity's PreFilter refuses the pod (pins that
contradict each other), DynamicResources' PreFilter never ran, so its PostFilter fails to read
its state ("not found") and that error ends the PostFilter phase: nothing is preempted.

When preemption finds victims, each gets `DisruptionTarget=True, reason PreemptionByScheduler`
through pods/status and is deleted with its own grace period; it holds its node's resources
until it is gone (at once with grace period 0, else when the kubelet ends it). Pods of lower
priority nominated to that node lose their nomination, and the pod gets
`status.nominatedNodeName` with the filters' words alone and is parked: a victim going away
retries it. As the scheduler's nominator does, a pending pod's nomination counts against its
node's resources, pod slots and host ports for every other pod of lower or equal priority (not
for pod affinity or spread), and a nominated pod tries its nominated node first. The real
scheduler evicts beside the scheduling cycle (asynchronous preemption); the emulation evicts
before it parks the pod. Not modelled: DynamicResources' PostFilter deallocating an allocated
claim that is not available where the pod could go and that no other pod uses.

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
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from sim.api import SCHEDULER, APIError, ClusterAPI, WatchEvent
from sim.clock import epoch, rfc3339
from sim.dra import DraState, PodClaim
from sim.interpod import LabelSelector, PlacedPod, affinity_filter, label_keys, placed_pod, required_terms
from sim.names import (
    CLAIM_FINALIZER,
    DEFAULT_SCHEDULER,
    DEVICE_CLASSES,
    DISRUPTION_TARGET,
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    NAMESPACES,
    NODES,
    PODS,
    RESOURCE_API_VERSION,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
)
from sim.placement import (
    NOTHING_USED,
    REASON_PIN_CONFLICT,
    Checks,
    ClaimCheck,
    Decision,
    NodeFacts,
    NodeUsage,
    PodUse,
    Scoring,
    exact,
    exact_resources,
    filter_node,
    host_ports,
    node_facts,
    pinned_nodes,
    place,
    static_reasons,
    usage_with,
)
from sim.preemption import Fit, Preemptor, Resident, Verdict, post_filter, potential_nodes
from sim.resources import Resources, scheduled_requests
from sim.spread import DO_NOT_SCHEDULE, SCHEDULE_ANYWAY, constraints, spread_filter, spread_scores

TERMINAL_PHASES = ("Succeeded", "Failed")
GONE_CODES = (404, 409)
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
STILL_NOT_SCHEDULABLE = "still not schedulable"  # DynamicResources' PostFilter, for a pod with claims
NO_CLAIMS_TO_DEALLOCATE = "no new claims to deallocate"  # ... and for one without
NO_CLAIMS_STATE = "not found"  # ... when its PreFilter never ran: the cycle state's ErrNotFound


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
    """A bound pod as the filters and preemption see it."""

    use: PodUse
    placed: PlacedPod
    priority: int
    started: float | None  # status.startTime
    preempted: bool  # carries DisruptionTarget=True for PreemptionByScheduler


def pod_key(pod: dict) -> str:
    return f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"


def is_terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def is_gated(pod: dict) -> bool:
    return bool((pod.get("spec") or {}).get("schedulingGates"))


def priority_of(pod: dict) -> int:
    return (pod.get("spec") or {}).get("priority") or 0


def nominated_node(pod: dict) -> str | None:
    return (pod.get("status") or {}).get("nominatedNodeName") or None


def start_time(pod: dict) -> float | None:
    started = (pod.get("status") or {}).get("startTime")
    return epoch(started) if started else None


def preempted_by_scheduler(pod: dict) -> bool:
    """The pod's first DisruptionTarget condition says the scheduler preempts it."""
    condition = next((c for c in (pod.get("status") or {}).get("conditions") or ()
                      if c.get("type") == DISRUPTION_TARGET), None)
    return bool(condition) and condition.get("status") == "True" and condition.get("reason") == PREEMPTION_BY_SCHEDULER


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


def disruption_conditions(victim: dict, scheduler_name: str, now: float) -> list[dict]:
    """The victim's conditions with the DisruptionTarget the preempting scheduler writes, observed
    at the pod's generation (in place of any earlier one: a victim is marked once, just before
    it is deleted)."""
    conditions = list((victim.get("status") or {}).get("conditions") or ())
    condition = {"type": DISRUPTION_TARGET, "status": "True", "lastProbeTime": None,
                 "lastTransitionTime": rfc3339(now), "reason": PREEMPTION_BY_SCHEDULER,
                 "message": f"{scheduler_name}: preempting to accommodate a higher priority pod"}
    if victim["metadata"].get("generation"):
        condition["observedGeneration"] = victim["metadata"]["generation"]
    return [c for c in conditions if c.get("type") != DISRUPTION_TARGET] + [condition]


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
        self.priorities_on: dict[str, Counter] = {}  # node → how many bound pods of each priority
        self.with_anti_affinity: dict[str, PlacedPod] = {}
        self.anti_affinity_keys: frozenset[str] = frozenset()
        self.namespace_labels: dict[str, dict] = {}
        self.dra = DraState()
        self.pending: dict[str, PendingPod] = {}
        self.nominations: dict[str, str] = {}  # pending pod → the node it is nominated to
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
            self.nominations.pop(key, None)
            if self._release(key):
                self._retry_parked()
        elif (pod.get("spec") or {}).get("nodeName"):
            self.pending.pop(key, None)
            self.nominations.pop(key, None)
            held = self.holding.get(key)
            if held is None:
                self._hold(key, pod["spec"]["nodeName"], pod, exact_resources(scheduled_requests(pod)))
            elif held[1].placed != placed_pod(pod, held[0]):
                self._release(key)
                self._hold(key, held[0], pod, held[1].use.requests)
            else:
                held[1].started, held[1].preempted = start_time(pod), preempted_by_scheduler(pod)
        elif ((pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER) == self.name:
            self._queue(key, pod)

    def _queue(self, key: str, pod: dict) -> None:
        self._note_nomination(key, nominated_node(pod))
        known = self.pending.get(key)
        if known and scheduling_view(known.pod) == scheduling_view(pod):
            known.pod = pod  # a status or metadata change: nothing to reconsider
            return
        arrival = known.order[2] if known else self.arrivals
        self.arrivals += 1
        spec = pod.get("spec") or {}
        order = (-priority_of(pod), pod["metadata"].get("creationTimestamp", ""), arrival)
        sensitive = bool(required_terms(pod, "podAffinity") or constraints(pod, DO_NOT_SCHEDULE)
                         or constraints(pod, SCHEDULE_ANYWAY))
        requests = exact_resources(scheduled_requests(pod))
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
    def _note_nomination(self, key: str, node: str | None) -> None:
        if node:
            self.nominations[key] = node
        else:
            self.nominations.pop(key, None)

    def _hold(self, key: str, node: str, pod: dict, requests: Resources) -> None:
        placed = placed_pod(pod, node)
        ports = host_ports(pod)
        self.holding[key] = (node, Held(PodUse(requests, ports), placed, priority_of(pod), start_time(pod),
                                        preempted_by_scheduler(pod)))
        usage = self.usage.get(node) or self.usage.setdefault(node, NodeUsage())
        for name, value in requests.items():
            usage.requested[name] = exact(usage.requested.get(name, 0) + value)
        usage.pods += 1
        usage.ports.update(ports)
        self.pods_on.setdefault(node, {})[key] = placed
        self.priorities_on.setdefault(node, Counter())[priority_of(pod)] += 1
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
        for name, value in what.use.requests.items():
            usage.requested[name] = exact(usage.requested[name] - value)
        usage.pods -= 1
        usage.ports.subtract(what.use.ports)
        self.pods_on[node].pop(key, None)
        priorities = self.priorities_on[node]
        priorities[what.priority] -= 1
        if not priorities[what.priority]:
            del priorities[what.priority]
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
        """The filters' refusal of a pod is reused for the next pods of its shape: coming later in
        queue order (priority first), they see the same nominations or more — unless one is
        nominated itself, as its own nomination does not count against it."""
        decision = (None if key in self.nominations else failed.get(entry.fit_shape)) or self._decide(key, entry)
        if decision is None:  # PreEnqueue: a claim is not there yet
            self._park(key, entry)
            return False
        if decision.node is None:
            failed[entry.fit_shape] = decision
            self._park(key, entry)
            return self._refuse(key, entry, decision, now)
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
        self.nominations.pop(key, None)
        self._hold(key, decision.node, entry.pod, entry.requests)
        for shape in [s for s in failed if s in self.pod_sensitive_shapes]:
            del failed[shape]  # another pod placed may let these fit now
        self._unpark_next(entry.fit_shape)
        return True

    def _decide(self, key: str, entry: PendingPod) -> Decision | None:
        """Filter and score; a nominated pod tries its nominated node first, as the scheduler's
        evaluateNominatedNode does, and takes it when it fits there."""
        pod = entry.pod
        prepared = self.dra.prepare(pod, entry.requests)
        if prepared.waiting:
            return None
        checks = self._checks(entry, prepared.check, prepared.failure)
        usage, static = self._usage_for(key, entry), self._static(entry)
        nominated = self.nominations.get(key)
        if nominated in self.nodes:
            decision = place(pod, entry.requests, [self.nodes[nominated]], usage, self.scoring, static, checks)
            if decision.node is not None:
                return decision
        return place(pod, entry.requests, self.nodes.values(), usage, self.scoring, static, checks)

    def _checks(self, entry: PendingPod, claims: ClaimCheck | None, failure: str = "",
                without: frozenset[str] = frozenset()) -> Checks:
        """The pod's filters that read other pods, as PreFilter computes them, with the pods
        `without` names taken away (preemption's dry run)."""
        pod = entry.pod
        checks = Checks(claims=claims, served_by_dra=self.dra.served, failure=failure)
        if entry.pod_sensitive:
            pods_on = {node: [p for k, p in placed.items() if k not in without] if without else placed.values()
                       for node, placed in self.pods_on.items()}
            checks.spread = spread_filter(pod, self.nodes.values(), pods_on)
            if constraints(pod, SCHEDULE_ANYWAY):
                checks.spread_scores = lambda feasible: spread_scores(pod, feasible, self.nodes.values(), pods_on)
        if self.with_anti_affinity or required_terms(pod, "podAffinity") or required_terms(pod, "podAntiAffinity"):
            placed = (held.placed for k, (_, held) in self.holding.items() if k not in without)
            anti_affinity = (p for k, p in self.with_anti_affinity.items() if k not in without)
            checks.affinity = affinity_filter(pod, self.nodes, placed, anti_affinity, self._labels_of_namespace)
        return checks

    def _usage_for(self, key: str, entry: PendingPod) -> Mapping[str, NodeUsage]:
        """What is used on each node, counting the nominated pods of the same or higher priority."""
        priority = priority_of(entry.pod)
        nominees: dict[str, list[PodUse]] = {}
        for other, node in self.nominations.items():
            nominee = self.pending.get(other)
            if other != key and nominee is not None and priority_of(nominee.pod) >= priority:
                nominees.setdefault(node, []).append(PodUse(nominee.requests, host_ports(nominee.pod)))
        if not nominees:
            return self.usage
        return {**self.usage, **{node: usage_with(self.usage.get(node) or NOTHING_USED, added=uses)
                                 for node, uses in nominees.items()}}

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

    # --- PostFilter: DynamicResources' words, DefaultPreemption ------------------------------
    def _refuse(self, key: str, entry: PendingPod, decision: Decision, now: float) -> bool:
        """Run the PostFilter plugins for a pod that fits nowhere, evict what preemption chose,
        and write the pod's PodScheduled condition and nomination."""
        message = decision.message()
        if decision.failure == REASON_PIN_CONFLICT:
            verdict = Verdict(NO_CLAIMS_STATE, keeps_nomination=True)
            return self._report_unschedulable(key, entry.pod, f"{message} {NO_CLAIMS_STATE}", verdict, now)
        verdict = self._preemption(key, entry, decision, now)
        wrote = self._evict(key, entry, verdict, now) if verdict.victims else False
        if verdict.words:
            message += f" {self._claims_verdict(entry, decision)}, {verdict.words}"
        return self._report_unschedulable(key, entry.pod, message, verdict, now) or wrote

    def _claims_verdict(self, entry: PendingPod, decision: Decision) -> str:
        """DynamicResources' PostFilter: its PreFilter records the pod's claims only once it accepts them."""
        spec = entry.pod.get("spec") or {}
        with_claims = bool(spec.get("resourceClaims")) or any(entry.requests.get(r) for r in self.dra.served)
        return STILL_NOT_SCHEDULABLE if with_claims and not decision.failure else NO_CLAIMS_TO_DEALLOCATE

    def _preemption(self, key: str, entry: PendingPod, decision: Decision, now: float) -> Verdict:
        pod = entry.pod
        preemptor = Preemptor(priority_of(pod), (pod.get("spec") or {}).get("preemptionPolicy") or "",
                              self.nominations.get(key))

        def residents(node: str, below: int) -> list[Resident]:
            if min(self.priorities_on.get(node) or (below,)) >= below:
                return []
            held = ((k, self.holding[k][1]) for k in self.pods_on[node])
            return [Resident(k, h.priority, now if h.started is None else h.started, h.placed.deleting, h.preempted)
                    for k, h in held if h.priority < below]

        potential = potential_nodes(decision, entry.requests, self.nodes)
        return post_filter(preemptor, potential, residents, self._fit(key, entry), decision.node_count)

    def _fit(self, key: str, entry: PendingPod) -> Fit:
        """The filters on one node with some bound pods taken away, nominated pods counted as
        for the pod itself (RunFilterPluginsWithNominatedPods); the pod-reading checks are
        computed again without those pods, as the plugins' RemovePod extensions do."""
        claims = self.dra.prepare(entry.pod, entry.requests).check
        usage, static, ports = self._usage_for(key, entry), self._static(entry), host_ports(entry.pod)

        def fit(node: str, without: frozenset[str]) -> tuple[str, ...]:
            used = usage_with(usage.get(node) or NOTHING_USED, removed=[self.holding[k][1].use for k in without])
            checks = self._checks(entry, claims, without=without)
            return filter_node(entry.requests, self.nodes[node], used, static[node], ports, checks)

        return fit

    def _evict(self, key: str, entry: PendingPod, verdict: Verdict, now: float) -> bool:
        """Take the nomination from lower-priority pods nominated to the node, then mark and
        delete every victim that is not being deleted already."""
        wrote = False
        priority = priority_of(entry.pod)
        for other, node in list(self.nominations.items()):
            nominee = self.pending.get(other)
            if node == verdict.nominate and other != key and nominee and priority_of(nominee.pod) < priority:
                del self.nominations[other]
                wrote |= self._patch_status(nominee.pod, {"nominatedNodeName": None})
        scheduler_name = (entry.pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER
        for victim in verdict.victims:
            if victim.deleting:
                continue
            namespace, _, name = victim.key.partition("/")
            try:
                pod = self.api.get(PODS, name, namespace=namespace)
                self.api.patch(PODS, name, {"status": {"conditions": disruption_conditions(pod, scheduler_name, now)}},
                               namespace=namespace, subresource="status", user=SCHEDULER)
                self.api.delete(PODS, name, namespace=namespace, user=SCHEDULER)
            except APIError:
                continue  # gone already
            wrote = True
        return wrote

    def _report_unschedulable(self, key: str, pod: dict, message: str, verdict: Verdict, now: float) -> bool:
        """PodScheduled=False with the message, and the nomination preemption asks for; only what changed."""
        status: dict = {}
        conditions = unschedulable_conditions(pod, message, now)
        if conditions is not None:
            status["conditions"] = conditions
        if not verdict.keeps_nomination:
            self._note_nomination(key, verdict.nominate)
            if nominated_node(pod) != verdict.nominate:
                status["nominatedNodeName"] = verdict.nominate
        return bool(status) and self._patch_status(pod, status)

    def _patch_status(self, pod: dict, status: dict) -> bool:
        try:
            self.api.patch(PODS, pod["metadata"]["name"], {"status": status},
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
