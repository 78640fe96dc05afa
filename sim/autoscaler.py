"""The emulated cluster-autoscaler: node groups that grow for pending pods and for ProvisioningRequests,
and shrink when their nodes stand empty.

Modelled on cluster-autoscaler (kubernetes/autoscaler, read at 87d9c45c02^, July 2026, the last commit
before its core moved to sigs.k8s.io/cluster-autoscaler), with its defaults (FAQ.md's flags, the
ProvisioningRequest processor's constants); the words it writes are `sim.provisioningrequests`'.

**Node groups.** Every node of a group is alike (its template: labels, capacity, taints), labelled
`sim.gangkeeper.io/node-group: NAME`, named `NAME-N` (the lowest N free). A group holds between its
min and max nodes; it starts with its min (`emulated_cluster` creates them). A scale-up adds to the
group's target at once, and each new node is created, Ready, `provisioning_seconds` later; until then
it is in flight, and counts as a node of its group, empty, wherever cluster-autoscaler simulates.

**The loop.** cluster-autoscaler scans every 10 s. Here a scan runs when something it watches
changed or one of its timers fell due, and at most once per scan interval: a quiet cluster costs
nothing and keeps no virtual clock busy. A scan, in cluster-autoscaler's order:
1. Requests are refreshed: a booking (Provisioned=True) older than the booking time (10 min) gets
   BookingExpired=True CapacityReservationTimeExpired; a request neither provisioned nor failed
   after 7 days gets Failed=True Expired; one whose Provisioned or Failed condition is 7 days old
   is deleted.
2. The snapshot (`sim.capacity`): every node with its bound, unfinished pods, and the nodes in flight.
3. Unschedulable pods (PodScheduled=False, reason Unschedulable: not gated ones, whose reason is
   SchedulingGated), unbound, neither finished nor being deleted, the most important first, are
   placed on the snapshot where they fit (FilterOutSchedulable): pods that nodes in flight will
   hold cause no second scale-up. Of those left, the pods consuming a request (annotation) never
   trigger a scale-up; the others are the pods to help.
4. One request is picked, oldest first (supported class; not Failed; not Provisioned=True; after a
   Provisioned=False only once its backoff has passed: 1 min, doubling up to 10 min): it gets
   Accepted=True and its pods are built from its PodTemplates. A request whose template is missing
   gets Failed=True FailedToCreatePods (the message names the templates) and the next is picked.
5. Bookings, of requests Provisioned and neither Failed nor BookingExpired: once the pods consuming
   one that are bound, or placed on the snapshot in 3, are as many as it asked for, it gets
   BookingExpired=True CapacityBookingConsumed (so pods pending while its nodes are in flight
   consume it before the nodes exist); until then its pods are placed on the snapshot, so that
   nothing else counts on that room and the nodes that hold it are not empty.
6. Scale-up, for the picked request or for the pods to help, taking turns when there are both
   (WrapperOrchestrator):
   - best-effort-atomic-scale-up: its pods that fit the snapshot need no node; none left:
     Provisioned=True CapacityIsFound. Else every group with room estimates new nodes for all the
     rest, within its max, all or nothing; the least-waste option scales up and the request is
     Provisioned=True CapacityIsProvisioned at once: when the nodes are asked for, before they exist
     (the class is "best effort": it admits without waiting for them). No option:
     Provisioned=False CapacityIsNotFound, and the request is picked again after its backoff.
   - check-capacity: all its pods fit the snapshot: Provisioned=True CapacityIsFound; else
     Provisioned=False CapacityIsNotFound (picked again after its backoff), or Failed=True with the
     parameter `noRetry: "true"`. It never scales.
   - the pods to help: not while they are all new (the oldest asking for a GPU less than 30 s
     old, or any less than 2 s: cluster-autoscaler waits for more to come, and does not scale
     down either); then each group with room estimates new nodes for those that fit its
     template, capped at its max, and the least-waste option scales up (partly, when not all fit).
7. Scale-down, in a scan that did not scale up: a Ready node of a group with nothing on it in the
   snapshot (no pod bound, no pending pod placed, no booking) is unneeded from then on; once
   unneeded for 10 min (scale-down-unneeded-time), and 10 min after the last scale-up
   (scale-down-delay-after-add), it is deleted, at most 10 at once, never below its group's min.
   Its pods are listed first: a node that holds one now is kept.

Not modelled: draining and removing nodes that hold pods but are underutilized (only empty nodes
go), DaemonSets (the emulation has none), the Events on pods, max-node-provision-time and a cloud
provider's failures (every node asked for comes), balancing similar groups, max-nodes-total, the
check-capacity processor instance and batch mode, `ValidUntilSeconds` (cluster-autoscaler does not
read it), and CapacityRevoked (it never sets it). Where it breaks ties at random (the expander, the
lister's order) the emulation takes the first group, the oldest request.
"""

import itertools
import logging
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from sim import provisioningrequests as requests
from sim.api import KUBELET, APIError, ClusterAPI, WatchEvent, service_account
from sim.capacity import Option, Snapshot, Wanted, estimate, least_waste, wanted
from sim.clock import epoch
from sim.names import (
    CHECK_CAPACITY_CLASS,
    HOSTNAME_LABEL,
    NODE_GROUP_LABEL,
    NODES,
    POD_TEMPLATES,
    PODS,
    PROVISIONING_REQUESTS,
)
from sim.placement import NodeFacts, is_ready, node_facts

log = logging.getLogger("gangkeeper.sim.autoscaler")

AUTOSCALER = service_account("kube-system", "cluster-autoscaler")
DAY = 24 * 3600.0
# Pending pods this young wait for the next scan, unless a ProvisioningRequest's are among them
# (unschedulablePodTimeBuffer, unschedulablePodWithGpuTimeBuffer), and the GPU resources meant.
NEW_POD_SECONDS = 2.0
NEW_GPU_POD_SECONDS = 30.0
GPU_RESOURCES = ("nvidia.com/gpu", "habana.ai/gaudi", "gpu.intel.com/xe", "amd.com/gpu", "microsoft.com/directx")
TERMINAL_PHASES = ("Succeeded", "Failed")
Key = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class NodeGroup:
    """Nodes alike, between `min_size` and `max_size` of them; `template` is their Node manifest
    (labels, capacity and allocatable, taints, Ready), without a name."""

    name: str
    template: Mapping
    min_size: int
    max_size: int
    provisioning_seconds: float

    def node(self, name: str) -> dict:
        """The Node of this group called `name`."""
        meta = dict(self.template.get("metadata") or {})
        meta.update(name=name, labels={**(meta.get("labels") or {}), HOSTNAME_LABEL: name, NODE_GROUP_LABEL: self.name})
        return {**self.template, "apiVersion": "v1", "kind": "Node", "metadata": meta}


EXPENDABLE_PODS_PRIORITY_CUTOFF = -10  # --expendable-pods-priority-cutoff


@dataclass(frozen=True)
class AutoscalerSettings:
    """cluster-autoscaler's defaults: its flags (FAQ.md) and the ProvisioningRequest processor's constants."""

    scan_interval: float = 10.0  # --scan-interval
    booking_seconds: float = 600.0  # defaultReservationTime: Provisioned=True until BookingExpired
    request_expiry_seconds: float = 7 * DAY  # defaultExpirationTime: not provisioned until Failed, Expired
    finished_request_ttl_seconds: float = 7 * DAY  # defaultTerminalProvReqTTL: Provisioned or Failed until deleted
    initial_backoff_seconds: float = 60.0  # --provisioning-request-initial-backoff-time
    max_backoff_seconds: float = 600.0  # --provisioning-request-max-backoff-time
    scale_down_unneeded_seconds: float = 600.0  # --scale-down-unneeded-time
    scale_down_delay_after_add_seconds: float = 600.0  # --scale-down-delay-after-add
    max_scale_down_parallelism: int = 10  # --max-scale-down-parallelism
    max_nodes_per_scale_up: int = 1000  # --max-nodes-per-scaleup


@dataclass(frozen=True)
class Arrival:
    """A node asked for: created, Ready, at `at`."""

    group: NodeGroup
    name: str
    at: float


def unschedulable(pod: Mapping, expendable_below: int = EXPENDABLE_PODS_PRIORITY_CUTOFF) -> bool:
    """What cluster-autoscaler lists as unschedulable: the scheduler found no node for the pod,
    and nothing else holds it back (a gated pod's PodScheduled reason is SchedulingGated); a pod of
    a priority below `expendable_below` is expendable, and no node is added for it."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if (spec.get("nodeName") or spec.get("schedulingGates") or pod["metadata"].get("deletionTimestamp")
            or status.get("phase") in TERMINAL_PHASES or int(spec.get("priority") or 0) < expendable_below):
        return False
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
               for c in status.get("conditions") or ())


def bound(pod: Mapping) -> str | None:
    """The node of a bound pod that still holds its room."""
    node = (pod.get("spec") or {}).get("nodeName")
    return node if node and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES else None


def key_of(obj: Mapping) -> Key:
    return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def transition(condition: Mapping) -> float:
    return epoch(condition["lastTransitionTime"])


class Autoscaler:
    resources = (NODES, PODS, PROVISIONING_REQUESTS, POD_TEMPLATES)

    def __init__(self, api: ClusterAPI, groups: Iterable[NodeGroup],
                 settings: AutoscalerSettings = AutoscalerSettings()):
        self.api = api
        self.groups = {group.name: group for group in groups}
        self.templates = {name: node_facts(group.node(f"template-node-for-{name}"))
                          for name, group in self.groups.items()}
        self.settings = settings
        self.nodes: dict[str, dict] = {}
        self.pods: dict[Key, dict] = {}
        self.requests: dict[Key, dict] = {}
        self.pod_templates: dict[Key, dict] = {}
        self.arriving: list[Arrival] = []
        self.unneeded: dict[str, float] = {}  # node → since when
        self.backoff: dict[str, float] = {}  # request uid → how long its next retry waits
        self.last_scan: float | None = None
        self.changed_at: float | None = None
        self.last_scale_up = -math.inf
        self.requests_turn = False
        self.pods_new_until: float | None = None  # pending pods too young to scale up for, until then
        self._facts: dict[str, tuple[dict, NodeFacts]] = {}
        self._wanted: dict[Key, tuple[dict, Wanted]] = {}

    # --- watch ------------------------------------------------------------------------------
    def observe(self, event: WatchEvent, now: float) -> None:
        obj, gone = event.object, event.type == "DELETED"
        if event.resource == NODES:
            name = obj["metadata"]["name"]
            self._keep(self.nodes, name, obj, gone)
            if gone:
                self._facts.pop(name, None)
        elif event.resource == PODS:
            self._keep(self.pods, key_of(obj), obj, gone)
            if gone:
                self._wanted.pop(key_of(obj), None)
        elif event.resource == PROVISIONING_REQUESTS:
            self._keep(self.requests, key_of(obj), obj, gone)
        else:
            self._keep(self.pod_templates, key_of(obj), obj, gone)
        if self.changed_at is None:
            self.changed_at = now

    @staticmethod
    def _keep(cache: dict, key, obj: dict, gone: bool) -> None:
        if gone:
            cache.pop(key, None)
        else:
            cache[key] = obj

    # --- timing -----------------------------------------------------------------------------
    def step(self, now: float) -> bool:
        wrote = self._arrive(now)
        due = self._scan_due()
        if due is not None and due <= now:
            wrote |= self._scan(now)
        return wrote

    def next_due(self) -> float | None:
        moments = [a.at for a in self.arriving]
        scan = self._scan_due()
        if scan is not None:
            moments.append(scan)
        return min(moments, default=None)

    def _scan_due(self) -> float | None:
        """When the next scan runs: once something changed or a timer falls due, not sooner than a
        scan interval after the last."""
        moments = self._request_timers() + self._scale_down_timers()
        moments += [m for m in (self.changed_at, self.pods_new_until) if m is not None]
        if not moments:
            return None
        earliest = min(moments)
        return earliest if self.last_scan is None else max(earliest, self.last_scan + self.settings.scan_interval)

    def _request_timers(self) -> list[float]:
        settings, moments = self.settings, []
        for request in self.requests.values():
            provisioned = requests.condition(request, requests.PROVISIONED)
            moments += [transition(c) + settings.finished_request_ttl_seconds for c in self._finished(request)]
            if not self._served(request) or self._closed(request):
                continue
            if requests.is_true(request, requests.PROVISIONED):
                moments.append(transition(provisioned) + settings.booking_seconds)
                continue
            moments.append(epoch(request["metadata"]["creationTimestamp"]) + settings.request_expiry_seconds)
            if provisioned is not None and provisioned.get("status") == "False":
                moments.append(transition(provisioned) + self._retry_wait(request))
        return moments

    def _scale_down_timers(self) -> list[float]:
        """When unneeded nodes that may go (their group above its min) have been unneeded long enough."""
        moments = []
        after_add = self.last_scale_up + self.settings.scale_down_delay_after_add_seconds
        for name, group in self.groups.items():
            since = sorted(s for node, s in self.unneeded.items() if self._group_of(node) == name)
            moments += [max(s + self.settings.scale_down_unneeded_seconds, after_add)
                        for s in since[:max(self._size(name) - group.min_size, 0)]]
        return moments

    # --- nodes ------------------------------------------------------------------------------
    def _arrive(self, now: float) -> bool:
        """Create the nodes whose provisioning time has come."""
        due = [a for a in self.arriving if a.at <= now]
        self.arriving = [a for a in self.arriving if a.at > now]
        created = False
        for arrival in due:
            try:
                self.nodes[arrival.name] = self.api.create(NODES, arrival.group.node(arrival.name), user=KUBELET)
            except APIError as error:
                log.warning("node %s of group %s was not created: %s", arrival.name, arrival.group.name, error)
                continue
            created = True
        return created

    def _group_of(self, node: str) -> str | None:
        labels = (self.nodes.get(node) or {}).get("metadata", {}).get("labels") or {}
        group = labels.get(NODE_GROUP_LABEL)
        return group if group in self.groups else None

    def _size(self, group: str) -> int:
        """The group's target size: its nodes and those in flight."""
        return sum(1 for node in self.nodes if self._group_of(node) == group) + \
            sum(1 for a in self.arriving if a.group.name == group)

    def _node_facts(self, node: dict) -> NodeFacts:
        name = node["metadata"]["name"]
        cached = self._facts.get(name)
        if cached is None or cached[0] is not node:
            cached = self._facts[name] = (node, node_facts(node))
        return cached[1]

    def _pod(self, key: Key, pod: dict) -> Wanted:
        cached = self._wanted.get(key)
        if cached is None or cached[0] != pod.get("spec"):
            cached = self._wanted[key] = (pod.get("spec") or {}, wanted(f"{key[0]}/{key[1]}", pod))
        return cached[1]

    # --- the scan ---------------------------------------------------------------------------
    def _scan(self, now: float) -> bool:
        self.last_scan, self.changed_at, self.pods_new_until = now, None, None
        wrote = self._refresh(now)
        snapshot = self._snapshot()
        pending, consuming = self._filter_out_schedulable(snapshot)
        picked, picking_wrote = self._pick(now)
        wrote |= picking_wrote | self._book(snapshot, consuming, now)
        if picked is None and not pending:
            return self._scale_down(snapshot, now) or wrote
        if picked is None:
            self.pods_new_until = self._new_until(pending, now)
            if self.pods_new_until is not None:
                return wrote
        serve_request = picked is not None and (not pending or self.requests_turn)
        self.requests_turn = not serve_request
        if serve_request:
            request, pods = picked
            scaled, provisioning_wrote = self._provision(request, pods, snapshot, now)
            wrote |= provisioning_wrote
        else:
            scaled = self._scale_up(self._best(pending, all_or_nothing=False), now)
        if scaled:
            self.last_scale_up = now
            return True
        return self._scale_down(snapshot, now) or wrote

    def _snapshot(self) -> Snapshot:
        snapshot = Snapshot()
        for node in self.nodes.values():
            snapshot.add(self._node_facts(node))
        for arrival in self.arriving:
            snapshot.add(replace(self.templates[arrival.group.name], name=arrival.name))
        for key, pod in self.pods.items():
            node = bound(pod)
            if node:
                snapshot.hold(node, self._pod(key, pod))
        return snapshot

    def _filter_out_schedulable(self, snapshot: Snapshot) -> tuple[list[Wanted], Counter]:
        """FilterOutSchedulable: the unschedulable pods, the most important first (priority, then
        age), placed on the snapshot where they fit, nodes in flight included. Those left that
        consume no request are the pods to help; those that consume one and were placed count
        with its bound pods (cluster-autoscaler counts every pod its snapshot holds)."""
        found = [(key, pod) for key, pod in self.pods.items() if unschedulable(pod)]
        found.sort(key=lambda item: (-((item[1].get("spec") or {}).get("priority") or 0),
                                     item[1]["metadata"].get("creationTimestamp", "")))
        pending, consuming = [], Counter()
        for key, pod in found:
            placed = snapshot.place(self._pod(key, pod)) is not None
            consumed = requests.consumed_request(pod)
            if consumed is None and not placed:
                pending.append(self._pod(key, pod))
            elif consumed is not None and placed:
                consuming[(key[0], consumed)] += 1
        return pending, consuming

    @staticmethod
    def _new_until(pending: list[Wanted], now: float) -> float | None:
        """allPodsAreNew: until when the pods to help are too young to scale up for (None: they are not)."""
        created = [epoch(p.pod["metadata"]["creationTimestamp"]) for p in pending]
        with_gpus = [c for c, p in zip(created, pending) if any(name in p.requests for name in GPU_RESOURCES)]
        until = min(with_gpus) + NEW_GPU_POD_SECONDS if with_gpus else min(created) + NEW_POD_SECONDS
        return until if until > now else None

    def _oldest_first(self) -> list[Key]:
        return sorted(self.requests, key=lambda k: (self.requests[k]["metadata"].get("creationTimestamp", ""), k))

    @staticmethod
    def _served(request: Mapping) -> bool:
        return request["spec"].get("provisioningClassName") in requests.SUPPORTED_CLASSES

    def _templates_in(self, namespace: str) -> dict[str, dict]:
        return {name: template for (ns, name), template in self.pod_templates.items() if ns == namespace}

    # --- 1. refresh -------------------------------------------------------------------------
    def _refresh(self, now: float) -> bool:
        wrote, settings = False, self.settings
        for key in self._oldest_first():
            request = self.requests[key]
            if any(transition(c) + settings.finished_request_ttl_seconds <= now for c in self._finished(request)):
                wrote |= self._delete_request(key)
                continue
            if not self._served(request) or self._closed(request):
                continue
            provisioned = requests.condition(request, requests.PROVISIONED)
            if requests.is_true(request, requests.PROVISIONED):
                if transition(provisioned) + settings.booking_seconds <= now:
                    wrote |= self._set(request, now, (requests.BOOKING_EXPIRED, "True", requests.RESERVATION_EXPIRED))
            elif epoch(request["metadata"]["creationTimestamp"]) + settings.request_expiry_seconds <= now:
                wrote |= self._set(request, now, (requests.FAILED, "True", requests.REQUEST_EXPIRED))
        return wrote

    @staticmethod
    def _finished(request: Mapping) -> list[Mapping]:
        """Its Provisioned and Failed conditions, whatever their status: they date its deletion."""
        return [c for c in (requests.condition(request, requests.PROVISIONED),
                            requests.condition(request, requests.FAILED)) if c]

    @staticmethod
    def _closed(request: Mapping) -> bool:
        return requests.is_true(request, requests.FAILED) or requests.is_true(request, requests.BOOKING_EXPIRED)

    def _booked(self, request: Mapping) -> bool:
        """ShouldCapacityBeBooked: provisioned, neither failed nor expired."""
        return self._served(request) and not self._closed(request) and requests.is_true(request, requests.PROVISIONED)

    def _delete_request(self, key: Key) -> bool:
        try:
            self.api.delete(PROVISIONING_REQUESTS, key[1], namespace=key[0], user=AUTOSCALER)
        except APIError as error:
            log.info("old ProvisioningRequest %s/%s was not deleted: %s", *key, error)
            return False
        self.requests.pop(key, None)
        return True

    # --- 4. pick ----------------------------------------------------------------------------
    def _pick(self, now: float) -> tuple[tuple[dict, list[Wanted]] | None, bool]:
        """The request to provision this scan, with its pods, and whether conditions were written."""
        wrote = False
        for key in self._oldest_first():
            request = self.requests[key]
            if not self._served(request) or not self._available(request, now):
                continue
            try:
                pods = requests.pods(request, self._templates_in(key[0]))
            except requests.MissingTemplates as error:
                words = (requests.FAILED_TO_CREATE_PODS, str(error))
                wrote |= self._set(request, now, (requests.FAILED, "True", words))
                continue
            accepted = self._write(requests.with_condition(request, requests.ACCEPTED, "True",
                                                           requests.ACCEPTED_BY_AUTOSCALER, now))
            if accepted is None:
                continue
            return (accepted, [wanted(f"{key[0]}/{p['metadata']['name']}", p) for p in pods]), True
        return None, wrote

    def _available(self, request: Mapping, now: float) -> bool:
        """IsAvailableForProvisioning: never tried, or tried and not found, once its backoff has
        passed (the next wait doubles, up to the max)."""
        uid = request["metadata"]["uid"]
        if requests.is_true(request, requests.FAILED) or requests.is_true(request, requests.PROVISIONED):
            self.backoff.pop(uid, None)
            return False
        provisioned = requests.condition(request, requests.PROVISIONED)
        if provisioned is None:
            return True
        wait = self._retry_wait(request)
        if provisioned.get("status") != "False" or transition(provisioned) + wait > now:
            return False
        self.backoff[uid] = min(2 * wait, self.settings.max_backoff_seconds)
        return True

    def _retry_wait(self, request: Mapping) -> float:
        return self.backoff.get(request["metadata"]["uid"], self.settings.initial_backoff_seconds)

    # --- 5. book ----------------------------------------------------------------------------
    def _book(self, snapshot: Snapshot, placed: Counter, now: float) -> bool:
        """Hold the room of every live booking on the snapshot; close those fully consumed, by pods
        bound or `placed` on the snapshot."""
        consuming = placed + Counter((key[0], requests.consumed_request(pod)) for key, pod in self.pods.items()
                                     if bound(pod))
        wrote = False
        for key in self._oldest_first():
            request = self.requests[key]
            if not self._booked(request):
                continue
            if consuming[key] >= requests.pod_count(request):
                wrote |= self._set(request, now, (requests.BOOKING_EXPIRED, "True", requests.BOOKING_CONSUMED))
                continue
            try:
                pods = requests.pods(request, self._templates_in(key[0]))
            except requests.MissingTemplates as error:
                words = (requests.FAILED_TO_BOOK_CAPACITY, f"Couldn't create pods, err: {error}")
                wrote |= self._set(request, now, (requests.FAILED, "True", words))
                continue
            for pod in pods:
                snapshot.place(wanted(f"{key[0]}/{pod['metadata']['name']}", pod))
        return wrote

    # --- 6. scale up ------------------------------------------------------------------------
    def _provision(self, request: dict, pods: list[Wanted], snapshot: Snapshot, now: float) -> tuple[bool, bool]:
        """Serve the picked request by its class: (scaled up, conditions written)."""
        if request["spec"]["provisioningClassName"] == CHECK_CAPACITY_CLASS:
            return False, self._check_capacity(request, pods, snapshot, now)
        left = [pod for pod in pods if snapshot.place(pod) is None]
        if not left:
            return False, self._set(request, now, (requests.PROVISIONED, "True", requests.CAPACITY_FOUND),
                                    observed=False)
        if not self._scale_up(self._best(left, all_or_nothing=True), now):
            return False, self._set(request, now, (requests.PROVISIONED, "False", requests.CAPACITY_NOT_FOUND),
                                    observed=False)
        self._set(request, now, (requests.PROVISIONED, "True", requests.CAPACITY_PROVISIONED), observed=False)
        return True, True

    def _check_capacity(self, request: dict, pods: list[Wanted], snapshot: Snapshot, now: float) -> bool:
        accepted = (requests.ACCEPTED, "True", requests.ACCEPTED_BY_AUTOSCALER)
        if snapshot.place_all(pods):
            return self._set(request, now, accepted, (requests.PROVISIONED, "True", requests.CAPACITY_FOUND))
        if (request["spec"].get("parameters") or {}).get(requests.NO_RETRY_PARAMETER) == "true":
            return self._set(request, now, accepted, (requests.FAILED, "True", requests.CHECK_CAPACITY_REFUSED))
        return self._set(request, now, accepted, (requests.PROVISIONED, "False", requests.CAPACITY_NOT_FOUND))

    def _best(self, pods: list[Wanted], *, all_or_nothing: bool) -> Option | None:
        """The least-waste option among the groups with room: new nodes for all the pods, or for
        as many as fit (`all_or_nothing` false)."""
        options = []
        for name, group in self.groups.items():
            room = min(group.max_size - self._size(name), self.settings.max_nodes_per_scale_up)
            if room <= 0:
                continue
            option = estimate(name, pods, self.templates[name], room)
            if option.nodes and (not all_or_nothing or len(option.pods) == len(pods)):
                options.append(option)
        return least_waste(options)

    def _scale_up(self, option: Option | None, now: float) -> bool:
        """Ask for the option's nodes: each is created when its group's provisioning time has passed."""
        if option is None:
            return False
        group = self.groups[option.group]
        taken = set(self.nodes) | {a.name for a in self.arriving}
        for _ in range(option.nodes):
            name = next(n for n in (f"{group.name}-{i}" for i in itertools.count()) if n not in taken)
            taken.add(name)
            self.arriving.append(Arrival(group, name, now + group.provisioning_seconds))
        log.info("scale-up: group %s %d->%d (max %d) for %d pods", group.name, self._size(group.name) - option.nodes,
                 self._size(group.name), group.max_size, len(option.pods))
        return True

    # --- 7. scale down ----------------------------------------------------------------------
    def _scale_down(self, snapshot: Snapshot, now: float) -> bool:
        for name, node in self.nodes.items():
            if self._group_of(name) is not None and is_ready(node) and snapshot.empty(name):
                self.unneeded.setdefault(name, now)
            else:
                self.unneeded.pop(name, None)
        for name in [n for n in self.unneeded if n not in self.nodes]:
            del self.unneeded[name]
        if now < self.last_scale_up + self.settings.scale_down_delay_after_add_seconds:
            return False
        removable = {name: self._size(name) - group.min_size for name, group in self.groups.items()}
        deleted = 0
        for name, since in sorted(self.unneeded.items(), key=lambda item: (item[1], item[0])):
            group = self._group_of(name)
            if deleted == self.settings.max_scale_down_parallelism:
                break
            if group is None or since + self.settings.scale_down_unneeded_seconds > now or removable[group] <= 0:
                continue
            if self._holds_pods(name) or not self._delete_node(name):
                continue
            removable[group] -= 1
            deleted += 1
        return deleted > 0

    def _holds_pods(self, node: str) -> bool:
        """Whether a pod is bound to the node now, as the API says (the watch may be behind)."""
        return any(bound(pod) == node for pod in self.api.list(PODS, field_selector=f"spec.nodeName={node}"))

    def _delete_node(self, name: str) -> bool:
        try:
            self.api.delete(NODES, name, user=AUTOSCALER)
        except APIError as error:
            log.warning("empty node %s was not deleted: %s", name, error)
            return False
        log.info("scale-down: empty node %s of group %s deleted", name, self._group_of(name))
        del self.nodes[name]
        del self.unneeded[name]
        return True

    # --- writing conditions -------------------------------------------------------------------
    def _set(self, request: dict, now: float, *changes: tuple[str, str, tuple[str, str]],
             observed: bool = True) -> bool:
        """Set conditions (type, status, (reason, message)) on the request, in one status write."""
        for kind, status, words in changes:
            request = requests.with_condition(request, kind, status, words, now, observed=observed)
        return self._write(request) is not None

    def _write(self, request: dict) -> dict | None:
        """Write the request's conditions through its status, if it has not changed since it was read."""
        meta = request["metadata"]
        try:
            updated = self.api.patch(PROVISIONING_REQUESTS, meta["name"], {
                "metadata": {"resourceVersion": meta["resourceVersion"]},
                "status": {"conditions": request["status"]["conditions"]}},
                namespace=meta["namespace"], subresource="status", user=AUTOSCALER)
        except APIError as error:
            log.info("ProvisioningRequest %s/%s was not updated: %s", meta["namespace"], meta["name"], error)
            return None
        self.requests[key_of(updated)] = updated
        return updated
