"""The controller's view of nodes, members and groups: only what placement decisions read.

The cache may hold 50,000 pods, so these are slotted, frozen dataclasses built once from the
raw API objects; everything else in a pod or node (env, volumes, status details) is dropped.
Constraints are stored as tuples of frozen values so that identical members hash alike: the
planner groups them and the node pool remembers eligibility per constraint set.
"""

import sys
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from functools import lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING

import orjson

from gangkeeper import names
from gangkeeper.quantity import parse_quantity
from gangkeeper.resources import Resources, pod_requests

if TYPE_CHECKING:
    from gangkeeper.controller.checks.interpod import PodRules

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
NEVER_PREEMPT = "Never"  # spec.preemptionPolicy of a pod that preempts nothing

GroupKey = tuple[str, str]
NO_LABELS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """One `spec.resourceClaims` entry of a pod: a template (one claim per pod) or a shared
    ResourceClaim, and the claim generated for it when `status.resourceClaimStatuses` names one."""

    name: str
    template: str | None
    shared: str | None
    generated: str | None = None


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `matchExpressions` or `matchFields` entry of a node selector term."""

    key: str
    operator: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Term:
    """A node selector term: every requirement must hold (terms themselves are ORed)."""

    match_expressions: tuple[Requirement, ...]
    match_fields: tuple[Requirement, ...]


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    allocatable: Resources
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    ready: bool


@dataclass(frozen=True, slots=True)
class TopologyRule:
    """Where a group's members must or should sit, each a node label key naming the domains
    (`gangkeeper.io/topology-*` on the members, or a Gang's `spec.topology`):

      - `required`: every member on nodes sharing one value of it (nodes without it never qualify);
      - `preferred`: one domain of it when the group fits in one, else as few as possible
        (inside the required domain when both are set);
      - `slice_required` with `slice_size`: members in consecutive slices of `slice_size`, ordered
        by `Member.rank` and then name (`rank_order`), each slice inside one domain of it.

    A group's rule (`Group.topology`) is set only when `controller.groups` found it consistent and
    valid: label keys, both slice fields or neither, a slice size dividing the group's min count.
    """

    required: str | None = None
    preferred: str | None = None
    slice_required: str | None = None
    slice_size: int | None = None

    def __bool__(self) -> bool:
        return any(value is not None for value in (self.required, self.preferred, self.slice_required))


NO_TOPOLOGY = TopologyRule()


@dataclass(frozen=True, slots=True)
class Member:
    """A pod of a group. `affinity_terms` is None when the pod has no required node affinity.

    `labels` and `rules` (required pod affinity and anti-affinity, spread constraints, host
    ports: `controller.interpod`; None only for members built by hand without them) are what
    the pods around it see of it and ask of them; `claims` its DRA ResourceClaims, resolved
    against the cluster's claims and templates when it is planned (`controller.occupancy`);
    `volume_claims` the PersistentVolumeClaims its volumes name.

    `reserved_node` is the reservation annotation or, once the gate is gone, the node of the pin:
    a released member carries both, and either one is enough to rebuild the ledger after a
    restart. A gated pod is reserved by the annotation alone: the pin and the gate's removal are
    one patch, so a pin on a gated pod is the user's own constraint, not a reservation.
    """

    namespace: str
    name: str
    uid: str
    requests: Mapping[str, Fraction]
    priority: int
    node_selector: tuple[tuple[str, str], ...]
    affinity_terms: tuple[Term, ...] | None
    tolerations: tuple[Toleration, ...]
    reserved_node: str | None
    node: str | None
    phase: str
    gated: bool
    created: float | None
    labels: Mapping[str, str] = field(default_factory=lambda: NO_LABELS)
    rules: "PodRules | None" = None
    claims: tuple[ClaimRef, ...] = ()
    volume_claims: tuple[str, ...] = ()
    preempts: bool = True  # spec.preemptionPolicy is not Never (PriorityClass `preemptionPolicy`)
    terminating: bool = False  # metadata.deletionTimestamp: on its way out, though it still holds its node
    topology: TopologyRule = NO_TOPOLOGY  # as its own annotations declare it (`member_topology`)
    rank: tuple = ()  # its place in the group's order, which slices follow (`member_rank`; ties by name)

    @property
    def placement_key(self) -> tuple:
        """Everything that decides which nodes the member may run on, ignoring capacity."""
        return (self.node_selector, self.affinity_terms, self.tolerations)

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def waiting(self) -> bool:
        """Gated with nothing reserved yet: the planner still has to place it."""
        return self.gated and self.reserved_node is None and self.node is None


@dataclass(frozen=True, slots=True)
class Group:
    """Members sharing a group label value in one namespace, with the size the owner declares.

    `priority` is the highest member priority, `first_seen` the controller's clock when the
    group first appeared (it orders the queue and measures starvation). `preempts` is false
    when a member's PriorityClass says `preemptionPolicy: Never`.
    """

    key: GroupKey
    members: tuple[Member, ...]
    min_count: int
    priority: int
    first_seen: float
    schedule_timeout_seconds: float | None = None
    preempts: bool = True
    topology: TopologyRule = NO_TOPOLOGY  # as the members or the group's Gang declare it

    @property
    def complete(self) -> bool:
        """All declared members exist, and every one of them still waits behind the gate."""
        live = [member for member in self.members if not member.terminal]
        return len(live) >= self.min_count and all(member.gated for member in live)

    @property
    def waiting_members(self) -> tuple[Member, ...]:
        return tuple(member for member in self.members if member.waiting)

    def __str__(self) -> str:
        return f"{self.key[0]}/{self.key[1]}"


def group_of(key: GroupKey, members: Sequence[Member], min_count: int, first_seen: float,
             schedule_timeout_seconds: float | None = None) -> Group:
    """A group whose priority is that of its most important member (as the scheduler's queue sees it)."""
    priority = max((member.priority for member in members), default=0)
    return Group(key, tuple(members), min_count, priority, first_seen, schedule_timeout_seconds,
                 all(member.preempts for member in members))


def node_from_api(obj: Mapping) -> Node:
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    allocatable = {sys.intern(name): parse_quantity(value)
                   for name, value in (status.get("allocatable") or {}).items()}
    taints = tuple(Taint(t.get("key", ""), t.get("value", ""), t.get("effect", ""))
                   for t in spec.get("taints") or ())
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())
    return Node(metadata.get("name", ""), allocatable, dict(metadata.get("labels") or {}), taints,
                bool(spec.get("unschedulable")), ready)


def member_from_api(pod: Mapping) -> Member:
    # interpod's rules are built on this module's values (requirements, nodes), hence imported here.
    from gangkeeper.controller.checks.interpod import rules_of

    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    annotations = metadata.get("annotations") or {}
    terms = required_affinity_terms(spec)
    gated = any(gate.get("name") == names.SCHEDULING_GATE for gate in spec.get("schedulingGates") or ())
    return Member(
        namespace=sys.intern(metadata.get("namespace", "")),
        name=metadata.get("name", ""),
        uid=metadata.get("uid", ""),
        requests=_requests(spec),
        priority=int(spec.get("priority") or 0),
        preempts=spec.get("preemptionPolicy") != NEVER_PREEMPT,
        terminating=bool(metadata.get("deletionTimestamp")),
        node_selector=_shared(tuple(sorted((spec.get("nodeSelector") or {}).items()))),
        affinity_terms=_shared(terms),
        tolerations=_shared(tuple(_toleration(t) for t in spec.get("tolerations") or ())),
        reserved_node=annotations.get(names.RESERVED_NODE_ANNOTATION) or (None if gated else pinned_node(terms)),
        node=spec.get("nodeName") or None,
        phase=(pod.get("status") or {}).get("phase") or "Pending",
        gated=gated,
        created=_timestamp(metadata.get("creationTimestamp")),
        labels=_shared_labels(tuple(sorted((metadata.get("labels") or {}).items()))),
        rules=rules_of(pod),
        claims=_claim_refs(spec, pod.get("status") or {}),
        volume_claims=tuple(volume["persistentVolumeClaim"].get("claimName", "")
                            for volume in spec.get("volumes") or () if volume.get("persistentVolumeClaim")),
        topology=member_topology(annotations),
        rank=member_rank(metadata.get("labels") or {}, annotations),
    )


def member_topology(annotations: Mapping[str, str]) -> TopologyRule:
    """The topology a pod's `gangkeeper.io/topology-*` annotations declare, shared by every pod
    declaring the same. Read as written, never refused here: a value that is no label key is
    kept, and a slice size that is no whole number is 0, for `controller.groups` to report (the
    webhook refuses both; a pod admitted without it must not stop the controller)."""
    if not any(key in annotations for key in names.TOPOLOGY_ANNOTATIONS):
        return NO_TOPOLOGY
    required, preferred, slice_required, slice_size = (annotations.get(key) for key in names.TOPOLOGY_ANNOTATIONS)
    return _shared(TopologyRule(required, preferred, slice_required, _slice_size(slice_size)))


# The first element of a rank: members with an index come first, in index order; the others by name.
INDEXED, UNINDEXED = 0, 1
UNRANKED = (UNINDEXED, "", 0, 0)  # the rank of every pod without an index
# PyTorchJob replica types in rank order (the operator writes them lowercased): the master is rank 0.
_REPLICA_TYPE_ORDER = {"master": 0, "worker": 1}


def member_rank(labels: Mapping[str, str], annotations: Mapping[str, str]) -> tuple[int, str, int, int]:
    """A pod's place in its group's order, as its workload numbers its pods: (INDEXED, part, major,
    minor), or UNRANKED for a pod with no index. Every rank has these types, so the ranks of any
    two members compare; members of equal rank (none indexed, say) are ordered by name
    (`rank_order`). Ranks are shared: the pods at one index of every Job hold the same tuple.

      - PyTorchJob: replica type (Master, Worker, then any other), then replica index;
      - JobSet: the Job's global index (JobSet ≥ 0.7), else its replicated job (`part`, by name)
        and index within it; then the pod's completion index in its Job;
      - Job: the completion index (label, or the annotation older clusters set alone).
    An index that is not a whole number counts as none."""
    replica_index = _index(labels.get(names.KUBEFLOW_REPLICA_INDEX_LABEL))
    replica_type = labels.get(names.KUBEFLOW_REPLICA_TYPE_LABEL)
    if replica_type is not None and replica_index is not None:
        role = _REPLICA_TYPE_ORDER.get(replica_type.lower(), len(_REPLICA_TYPE_ORDER))
        return _shared_rank((INDEXED, "", role, replica_index))
    completion = _index(labels.get(names.JOB_COMPLETION_INDEX) or annotations.get(names.JOB_COMPLETION_INDEX))
    if names.JOBSET_NAME_LABEL in labels:
        job = _index(labels.get(names.JOBSET_JOB_GLOBAL_INDEX_LABEL)
                     or annotations.get(names.JOBSET_JOB_GLOBAL_INDEX_LABEL))
        part = ""
        if job is None:
            job = _index(labels.get(names.JOBSET_JOB_INDEX_LABEL) or annotations.get(names.JOBSET_JOB_INDEX_LABEL))
            part = labels.get(names.JOBSET_REPLICATED_JOB_LABEL, "")
        if job is not None:
            return _shared_rank((INDEXED, part, job, completion or 0))
    if completion is not None:
        return _shared_rank((INDEXED, "", completion, 0))
    return UNRANKED


def rank_order(members: Iterable[Member]) -> list[Member]:
    """Members in their group's order, the order slices follow: by rank, then by name."""
    return sorted(members, key=lambda member: (member.rank, member.name))


def required_affinity_terms(spec: Mapping) -> tuple[Term, ...] | None:
    """A pod's required node affinity, None when it has none."""
    return selector_terms(((spec.get("affinity") or {}).get("nodeAffinity") or {})
                          .get("requiredDuringSchedulingIgnoredDuringExecution"))


def required_terms(volume_node_affinity: Mapping | None) -> tuple[Term, ...] | None:
    """A PersistentVolume's `spec.nodeAffinity.required`, None when it has none."""
    return selector_terms((volume_node_affinity or {}).get("required"))


def selector_terms(selector: Mapping | None) -> tuple[Term, ...] | None:
    """The terms of a core/v1 NodeSelector, None for no selector."""
    if selector is None:
        return None
    return tuple(
        Term(_requirements(term.get("matchExpressions")), _requirements(term.get("matchFields")))
        for term in selector.get("nodeSelectorTerms") or ()
    )


def pinned_node(terms: tuple[Term, ...] | None) -> str | None:
    """The node every term pins the pod to with `metadata.name In [node]`, if they all agree."""
    pins = set()
    for term in terms or ():
        pin = next((r.values[0] for r in term.match_fields
                    if r.key == names.PIN_FIELD and r.operator == "In" and len(r.values) == 1), None)
        if pin is None:
            return None
        pins.add(pin)
    return pins.pop() if len(pins) == 1 else None


@lru_cache(maxsize=4096)
def _shared(value: Hashable) -> Hashable:
    """The first equal value seen: the members of a group, and most pods, share their constraints."""
    return value


@lru_cache(maxsize=4096)
def _shared_rank(rank: tuple[int, str, int, int]) -> tuple[int, str, int, int]:
    """The first equal rank seen, in a cache of its own: the indices of large jobs would
    otherwise push the constraints out of `_shared`'s."""
    return rank


def _requests(spec: Mapping) -> Mapping[str, Fraction]:
    """The pod's requests (`pod_requests`), shared, and worked out once per distinct way of writing
    them: the pods of a workload write theirs alike, and parsing quantities into Fractions was
    half of reading a pod (150,000 of them at a restart). The way of writing them is the JSON of
    what `pod_requests` reads, keys sorted: quicker to make than nested sorted tuples."""
    try:
        written = orjson.dumps(
            ([container.get("resources") for container in spec.get("containers") or ()],
             [(container.get("restartPolicy"), container.get("resources"))
              for container in spec.get("initContainers") or ()],
             spec.get("overhead")), option=orjson.OPT_SORT_KEYS)
    except (AttributeError, TypeError):  # not as the API writes it: read it the long way
        return _shared_requests(tuple(sorted(pod_requests({"spec": spec}).items())))
    return _requests_written(written)


@lru_cache(maxsize=4096)
def _requests_written(written: bytes) -> Mapping[str, Fraction]:
    containers, init_containers, overhead = orjson.loads(written)
    spec = {"containers": [{"resources": resources} for resources in containers],
            "initContainers": [{"restartPolicy": policy, "resources": resources}
                               for policy, resources in init_containers],
            "overhead": overhead}
    return _shared_requests(tuple(sorted(pod_requests({"spec": spec}).items())))


@lru_cache(maxsize=4096)
def _shared_labels(items: tuple[tuple[str, str], ...]) -> Mapping[str, str]:
    """One read-only mapping per distinct set of labels (the pods of one workload often share theirs)."""
    return MappingProxyType(dict(items))


def _claim_refs(spec: Mapping, status: Mapping) -> tuple[ClaimRef, ...]:
    entries = spec.get("resourceClaims")
    if not entries:
        return ()
    generated = {s.get("name"): s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or ()}
    return tuple(ClaimRef(e.get("name", ""), e.get("resourceClaimTemplateName"), e.get("resourceClaimName"),
                          generated.get(e.get("name"))) for e in entries)


@lru_cache(maxsize=4096)
def _shared_requests(items: tuple[tuple[str, Fraction], ...]) -> Mapping[str, Fraction]:
    """One read-only mapping per distinct set of requests, shared by every pod asking for it."""
    return MappingProxyType({sys.intern(name): value for name, value in items})


def _requirements(raw: Sequence[Mapping] | None) -> tuple[Requirement, ...]:
    return tuple(Requirement(r.get("key", ""), r.get("operator", ""), tuple(r.get("values") or ()))
                 for r in raw or ())


def _toleration(raw: Mapping) -> Toleration:
    return Toleration(raw.get("key", ""), raw.get("operator", ""), raw.get("value", ""), raw.get("effect", ""))


def _index(text: str | None) -> int | None:
    """An index as its workload's controller writes it (decimal digits); None for anything else."""
    return int(text) if isinstance(text, str) and text.isascii() and text.isdigit() and len(text) <= 12 else None


def _slice_size(text: str | None) -> int | None:
    """A declared slice size; 0 when it is not a whole number (`controller.groups` reports it)."""
    if text is None:
        return None
    size = _index(text)
    return 0 if size is None else size


def _timestamp(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None
