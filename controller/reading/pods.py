"""A pod as the API writes it, read into the cache's value of it (`model.objects.PodFacts`, around
its `model.members.Member`): only what placement and the pass read.

The cache may hold 50,000 pods, and a restart reads 150,000: equal constraints, labels, requests,
topologies and ranks are one shared object each (`_shared` and the caches below it), so that the
pods of a workload cost one copy of what they write alike.
"""

import sys
from collections.abc import Hashable, Mapping
from datetime import datetime
from fractions import Fraction
from functools import lru_cache
from types import MappingProxyType
from typing import TypeVar

import orjson

from gangkeeper import integrations, names
from gangkeeper.controller.model.members import (
    INDEXED,
    NEVER_PREEMPT,
    NO_LABELS,
    NO_TOPOLOGY,
    TERMINAL_PHASES,
    UNRANKED,
    ClaimRef,
    Member,
    TopologyRule,
)
from gangkeeper.controller.model.objects import Owner, PodFacts
from gangkeeper.controller.model.selectors import Term
from gangkeeper.controller.reading.rules import rules_of
from gangkeeper.controller.reading.selectors import selector_terms, toleration
from gangkeeper.integrations.finding import index_of
from gangkeeper.resources import as_scheduled, pod_requests

# lru_cache hides the type from mypy: a call of `_shared` is Any, though it is the argument's type.
Shared = TypeVar("Shared", bound=Hashable)

# The labels a member carries that lead to the object declaring its size; the rest is dropped from the cache.
_KEPT_LABELS = tuple(dict.fromkeys(label for integration in integrations.ALL for label in integration.kept_labels))


def pod_facts(pod: Mapping) -> PodFacts | None:
    """The cache value of a pod; None for pods that neither take capacity nor belong to a group.
    A pod outside every group (and no placeholder) is read the short way (`lone_facts`)."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    labels = metadata.get("labels") or {}
    group = labels.get(names.GROUP_LABEL)
    if group is None and names.CAPACITY_FOR_LABEL not in labels:
        return lone_facts(pod)
    annotations = metadata.get("annotations") or {}
    member = member_from_api(pod)
    # A placeholder is kept while it waits, too: the pass counts those of each group.
    if group is None and (member.terminal or (member.node is None and names.CAPACITY_FOR_LABEL not in labels)):
        return None
    gates = [gate.get("name") for gate in spec.get("schedulingGates") or ()]
    return PodFacts(
        member=member, group=group,
        source=annotations.get(names.GROUP_SOURCE_ANNOTATION, names.SOURCE_EXPLICIT),
        labels={key: labels[key] for key in _KEPT_LABELS if key in labels},
        min_count=annotations.get(names.MIN_COUNT_ANNOTATION),
        schedule_timeout=annotations.get(names.SCHEDULE_TIMEOUT_ANNOTATION),
        owner=controller_owner(metadata), resource_version=str(metadata.get("resourceVersion", "")),
        gate_index=gates.index(names.SCHEDULING_GATE) if names.SCHEDULING_GATE in gates else None,
        affinity_depth=_affinity_depth(spec), unschedulable=_unschedulable(pod),
        released_at=epoch(annotations.get(names.RELEASED_AT_ANNOTATION)),
    )


def lone_facts(pod: Mapping) -> PodFacts | None:
    """The cache value of a pod outside every group, and no placeholder: None unless it is bound
    and has not finished. Such a pod is never placed, grouped, released or rolled back; it is
    read for what it takes of its node (its requests, a pod slot), for what the pods planned
    beside it see of it (labels, pod rules, host ports, claims) and for preemption (priority,
    age, whether it is on its way out). Its own node selector, node affinity, tolerations,
    volumes, topology and rank, and what only a group's pods are read for (size, owner, gate,
    status), are not read: most pods of a large cluster are such pods (three in five of a
    restart's 650,000 in `bench/controller.py`), and reading a pod the short way costs about
    half as much."""
    spec = pod.get("spec") or {}
    node = spec.get("nodeName")
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    if not node or phase in TERMINAL_PHASES:
        return None
    metadata = pod.get("metadata") or {}
    return PodFacts(
        member=Member(
            namespace=sys.intern(metadata.get("namespace", "")), name=metadata.get("name", ""),
            uid=metadata.get("uid", ""), requests=_requests(spec), priority=int(spec.get("priority") or 0),
            preempts=spec.get("preemptionPolicy") != NEVER_PREEMPT, terminating=bool(metadata.get("deletionTimestamp")),
            node_selector=(), affinity_terms=None, tolerations=(), reserved_node=None, node=sys.intern(node),
            phase=phase, gated=False, created=_timestamp(metadata.get("creationTimestamp")),
            labels=_shared_labels(tuple(sorted((metadata.get("labels") or {}).items()))), rules=rules_of(pod),
            claims=_claim_refs(spec, status)),
        group=None, source=names.SOURCE_EXPLICIT, labels=NO_LABELS, min_count=None, schedule_timeout=None, owner=None,
        resource_version=str(metadata.get("resourceVersion", "")), gate_index=None, affinity_depth=0,
        unschedulable=None)


def member_from_api(pod: Mapping) -> Member:
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
        tolerations=_shared(tuple(toleration(t) for t in spec.get("tolerations") or ())),
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
    kept, and a slice size that is no whole number is 0, for `controller.cache.declared_topology` to report (the
    webhook refuses both; a pod admitted without it must not stop the controller)."""
    if not any(key in annotations for key in names.TOPOLOGY_ANNOTATIONS):
        return NO_TOPOLOGY
    required, preferred, slice_required, slice_size = (annotations.get(key) for key in names.TOPOLOGY_ANNOTATIONS)
    return _shared(TopologyRule(required, preferred, slice_required, _slice_size(slice_size)))


def member_rank(labels: Mapping[str, str], annotations: Mapping[str, str]) -> tuple[int, str, int, int]:
    """A pod's place in its group's order, as its workload numbers its pods: (INDEXED, part, major,
    minor) from the first kind that ranks it (`Integration.rank`, e.g. a PyTorchJob's replica type
    and index, a JobSet's Job index, a Job's completion index), or UNRANKED for a pod with no index.
    Every rank has these types, so the ranks of any two members compare; members of equal rank
    (none indexed, say) are ordered by name (`rank_order`). Ranks are shared: the pods at one index
    of every Job hold the same tuple. An index that is not a whole number counts as none."""
    for rank_of in integrations.RANKS:
        rank = rank_of(labels, annotations)
        if rank is not None:
            return _shared_rank((INDEXED, *rank))
    return UNRANKED


def required_affinity_terms(spec: Mapping) -> tuple[Term, ...] | None:
    """A pod's required node affinity, None when it has none."""
    return selector_terms(((spec.get("affinity") or {}).get("nodeAffinity") or {})
                          .get("requiredDuringSchedulingIgnoredDuringExecution"))


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
def _shared(value: Shared) -> Shared:
    """The first equal value seen: the members of a group, and most pods, share their constraints."""
    return value


@lru_cache(maxsize=4096)
def _shared_rank(rank: tuple[int, str, int, int]) -> tuple[int, str, int, int]:
    """The first equal rank seen, in a cache of its own: the indices of large jobs would
    otherwise push the constraints out of `_shared`'s."""
    return rank


def _requests(spec: Mapping) -> Mapping[str, Fraction]:
    """The pod's requests as the scheduler counts them (`pod_requests`, `as_scheduled`), shared, and
    worked out once per distinct way of writing them: the pods of a workload write theirs alike,
    and parsing quantities into Fractions was half of reading a pod (150,000 of them at a restart).
    The way of writing them is the JSON of what `pod_requests` reads, keys sorted: quicker to make
    than nested sorted tuples."""
    try:
        written = orjson.dumps(
            ([container.get("resources") for container in spec.get("containers") or ()],
             [(container.get("restartPolicy"), container.get("resources"))
              for container in spec.get("initContainers") or ()],
             spec.get("overhead")), option=orjson.OPT_SORT_KEYS)
    except (AttributeError, TypeError):  # not as the API writes it: read it the long way
        return _shared_requests(tuple(sorted(as_scheduled(pod_requests({"spec": spec})).items())))
    return _requests_written(written)


@lru_cache(maxsize=4096)
def _requests_written(written: bytes) -> Mapping[str, Fraction]:
    containers, init_containers, overhead = orjson.loads(written)
    spec = {"containers": [{"resources": resources} for resources in containers],
            "initContainers": [{"restartPolicy": policy, "resources": resources}
                               for policy, resources in init_containers],
            "overhead": overhead}
    return _shared_requests(tuple(sorted(as_scheduled(pod_requests({"spec": spec})).items())))


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


def _slice_size(text: str | None) -> int | None:
    """A declared slice size; 0 when it is not a whole number (`controller.cache.declared_topology` reports it)."""
    if text is None:
        return None
    size = index_of(text)
    return 0 if size is None else size


def _timestamp(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


def controller_owner(metadata: Mapping) -> Owner | None:
    for ref in metadata.get("ownerReferences") or ():
        if ref.get("controller"):
            return Owner(ref.get("apiVersion", ""), ref.get("kind", ""), ref.get("name", ""), ref.get("uid", ""))
    return None


def _affinity_depth(spec: Mapping) -> int:
    level: Mapping | None = spec
    depth = 0
    for key in ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"):
        level = (level or {}).get(key)
        if level is None:
            break
        depth += 1
    return depth


def epoch(stamp: str | None) -> float | None:
    """An RFC 3339 time as epoch seconds; None when absent or unreadable (someone edited it)."""
    try:
        return datetime.fromisoformat(stamp).timestamp() if stamp else None
    except ValueError:
        return None


def _unschedulable(pod: Mapping) -> str | None:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
            return condition.get("message") or "Unschedulable"
    return None
