"""Groups from the cache: members by (namespace, group label) and the size their owners declare.

The webhook labels every member with `gangkeeper.io/group` and says how it found the group
(`gangkeeper.io/group-source`); the size is resolved here, from the owner objects the pod
alone cannot see (docs/design.md, "Group identity"). What each workload kind declares, and which of
its objects declares it, is the kind's integration (gangkeeper.integrations), found by the
source; only the Gang and lone pods are handled here by name. Two exceptions to keying by the
label:
  - an object that starts the parts of its group in order (a JobSet started `InOrder`) makes
    one group per part: a JobSet-wide gang would deadlock, since later jobs start only when
    earlier ones are ready;
  - a lone accelerator pod is a group of one, keyed by the pod, never merged with another.

Every declaration found (pod annotations, the Gang, the owner) must agree; when they don't, or
none is found, the group gets a `problem` and nothing of it is reserved. So it is with the
group's topology (`Group.topology`): the members' `gangkeeper.io/topology-*` annotations and
the Gang's `spec.topology`, field by field — a member or Gang that leaves a field unset does not
disagree, it leaves it to the others — and the rule must be one the planner can follow (label
keys, a slice size with its label, a size that is a multiple of the slice size).

The cache holds `PodFacts` and `Workload`s, small frozen values made once per API object by
`pod_facts` and `workload_from_api` (the informers' transforms).

When a group was first seen orders the queue and starts its schedule timeout and starvation
clocks. The controller remembers it, and after a restart (or with nothing remembered) takes the
creation time of the group's oldest member: durable, so a restart neither moves a group to the
back of the queue nor restarts its timeout.
"""

import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType

from gangkeeper import integrations, names
from gangkeeper.controller.model import NO_TOPOLOGY, Group, GroupKey, Member, TopologyRule, group_of, member_from_api
from gangkeeper.integrations import gang, job, jobset, native_pod_group, pytorchjob
from gangkeeper.integrations.finding import LABEL_KEY_RULE, is_valid_label_key
from gangkeeper.integrations.kind import Integration, ObjectRef, SuspendState, Through
from gangkeeper.wording import first_of

# Cache keys name a workload's resource as `Resource.name` does (`gangs.gangkeeper.io`).
GANGS = gang.RESOURCE.name
# Named for the tests that build workloads of one kind.
PYTORCHJOBS, JOBSETS, JOBS, PODGROUPS_NATIVE = (
    pytorchjob.RESOURCE.name, jobset.RESOURCE.name, job.RESOURCE.name, native_pod_group.RESOURCE.name)

_NO_FIELDS: Mapping[str, object] = MappingProxyType({})
# The labels a member carries that lead to the object declaring its size; the rest is dropped from the cache.
_KEPT_LABELS = tuple(dict.fromkeys(label for integration in integrations.ALL for label in integration.kept_labels))


@dataclass(frozen=True, slots=True)
class Owner:
    """The controlling owner of a pod, or the workload a Gang is owned by."""

    api_version: str
    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What decisions need of a pod besides its `Member`: group, owner, and how to patch it.

    `affinity_depth` says how much of `spec.affinity.nodeAffinity.required…` exists (0 to 3),
    so that the pin can be added with JSON Patch `add` operations that never replace anything.
    `released_at` is the controller's release annotation (epoch seconds), when it can be read.
    """

    member: Member
    group: str | None
    source: str
    labels: Mapping[str, str]
    min_count: str | None
    schedule_timeout: str | None
    owner: Owner | None
    resource_version: str
    gate_index: int | None
    affinity_depth: int
    unschedulable: str | None
    released_at: float | None = None


@dataclass(frozen=True, slots=True)
class Workload:
    """An object that declares a group's size: `sizes` by part ('' for the whole)."""

    resource: str
    namespace: str
    name: str
    uid: str
    api_version: str
    kind: str
    sizes: Mapping[str, int]
    # Which part each value of its kind's part label belongs to, when its parts start apart (else one group).
    parts: Mapping[str, str] = field(default_factory=lambda: _NO_FIELDS)
    group_name: str = ""
    schedule_timeout: float | None = None
    topology: Mapping[str, object] = field(default_factory=lambda: _NO_FIELDS)  # a Gang's spec.topology, as written
    status: Mapping | None = None  # a Gang's status, compared before it is written again
    disposable: bool = False  # a Gang the controller created for a group without owner
    suspend: SuspendState | None = None  # an owner's suspend switch, where its kind has one
    switch: tuple[str, str, str] | None = None  # (resource, name, uid) of the owner whose switch is the group's
    finished: str | None = None  # "Succeeded" or "Failed": the owner's end, as its operator says it (its group's)
    controller_uid: str = ""  # of its controlling owner: proves the members it owns for that owner (`Through`)
    # A Gang's `status.reservations`: member pod name → (uid, node), the nodes booked for its gated members.
    reservations: Mapping[str, tuple[str, str]] = field(default_factory=lambda: _NO_FIELDS)
    resource_version: str = ""

    @property
    def owner(self) -> Owner:
        return Owner(self.api_version, self.kind, self.name, self.uid)


@dataclass(frozen=True, slots=True)
class GangView:
    """A group with the facts of its pods (in member order), where its size came from, and why
    it cannot be reserved when it cannot (`problem` = (reason, message))."""

    group: Group
    pods: tuple[PodFacts, ...]
    source: str
    label: str
    owner: Owner | None = None
    problem: tuple[str, str] | None = None
    declared_by: tuple[str, ...] = field(default=())
    finished: str | None = None  # the end its owner has come to, which is the group's (`Workload.finished`)


# --- transforms: API objects → cache values ----------------------------------------------------

def pod_facts(pod: Mapping) -> PodFacts | None:
    """The cache value of a pod; None for pods that neither take capacity nor belong to a group."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    member = member_from_api(pod)
    group = labels.get(names.GROUP_LABEL)
    if group is None and (member.node is None or member.terminal):
        return None
    gates = [gate.get("name") for gate in spec.get("schedulingGates") or ()]
    return PodFacts(
        member=member, group=group,
        source=annotations.get(names.GROUP_SOURCE_ANNOTATION, names.SOURCE_EXPLICIT),
        labels={key: labels[key] for key in _KEPT_LABELS if key in labels},
        min_count=annotations.get(names.MIN_COUNT_ANNOTATION),
        schedule_timeout=annotations.get(names.SCHEDULE_TIMEOUT_ANNOTATION),
        owner=_controller_owner(metadata), resource_version=str(metadata.get("resourceVersion", "")),
        gate_index=gates.index(names.SCHEDULING_GATE) if names.SCHEDULING_GATE in gates else None,
        affinity_depth=_affinity_depth(spec), unschedulable=_unschedulable(pod),
        released_at=_epoch(annotations.get(names.RELEASED_AT_ANNOTATION)),
    )


def workload_from_api(resource: str, obj: Mapping) -> Workload:
    """What an object declares, read the way its own controller reads its spec (its kind's integration).

    The API version and kind come from the resource watched, not from the object: a real API
    server lists built-in kinds (Jobs) without them on the items, and a Gang owned by a Job
    needs both in its ownerReference."""
    metadata = obj.get("metadata") or {}
    integration = integrations.BY_RESOURCE[resource]
    api = integration.resource
    controller = _controller_owner(metadata)
    return Workload(resource=resource, namespace=sys.intern(metadata.get("namespace", "")),
                    name=metadata.get("name", ""), uid=metadata.get("uid", ""),
                    api_version=f"{api.group}/{api.version}" if api.group else api.version,
                    kind=api.kind, resource_version=str(metadata.get("resourceVersion", "")),
                    controller_uid=controller.uid if controller is not None else "", **integration.declaration(obj))


def _controller_owner(metadata: Mapping) -> Owner | None:
    for ref in metadata.get("ownerReferences") or ():
        if ref.get("controller"):
            return Owner(ref.get("apiVersion", ""), ref.get("kind", ""), ref.get("name", ""), ref.get("uid", ""))
    return None


def _affinity_depth(spec: Mapping) -> int:
    level, depth = spec, 0
    for key in ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"):
        level = (level or {}).get(key)
        if level is None:
            break
        depth += 1
    return depth


def _epoch(stamp: str | None) -> float | None:
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


# --- grouping ----------------------------------------------------------------------------------

WorkloadKey = tuple[str, str, str]  # (resource, namespace, name)
WorkloadIndex = Mapping[WorkloadKey, Workload]


class Workloads(Mapping):
    """Workloads by (resource, namespace, name), with Gangs also found by the group they declare.

    A Gang may declare any group (`spec.groupName`); finding it by scanning every workload would
    cost O(workloads) per group and pass, so Gangs are indexed by (namespace, group) as well.
    """

    __slots__ = ("_items", "_gangs")

    def __init__(self, items: WorkloadIndex | None = None):
        self._items: dict[WorkloadKey, Workload] = {}
        self._gangs: dict[tuple[str, str], set[str]] = {}
        for key, workload in (items or {}).items():
            self.put(key, workload)

    def __getitem__(self, key: WorkloadKey) -> Workload:
        return self._items[key]

    def __iter__(self) -> Iterator[WorkloadKey]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def put(self, key: WorkloadKey, workload: Workload | None) -> Workload | None:
        """Store (None: forget) the workload at `key`; return what was there.

        A group no Gang declares any longer leaves no entry behind: with a Gang created and deleted
        for every group, an empty set per group ever seen would grow without bound."""
        previous = self._items.pop(key, None)
        if previous is not None and previous.resource == GANGS:
            declared = (previous.namespace, previous.group_name)
            declaring = self._gangs.get(declared)
            if declaring is not None:
                declaring.discard(previous.name)
                if not declaring:
                    del self._gangs[declared]
        if workload is not None:
            self._items[key] = workload
            if workload.resource == GANGS:
                self._gangs.setdefault((workload.namespace, workload.group_name), set()).add(workload.name)
        return previous

    def gang_declaring(self, namespace: str, group: str) -> Workload | None:
        """The Gang named like the group when it declares it, else the first (by name) that does."""
        declaring = self._gangs.get((namespace, group))
        if not declaring:
            return None
        return self._items[(GANGS, namespace, group if group in declaring else min(declaring))]


def as_workloads(workloads: WorkloadIndex) -> Workloads:
    return workloads if isinstance(workloads, Workloads) else Workloads(workloads)


def build_groups(pods: Iterable[PodFacts], workloads: WorkloadIndex, first_seen: Mapping[GroupKey, float],
                 now: float) -> list[GangView]:
    """Every group the members make, sized (see the module docstring for when each was first seen)."""
    workloads = as_workloads(workloads)
    members: dict[GroupKey, list[PodFacts]] = {}
    for facts in pods:
        if facts.group is None:
            continue
        key = (facts.member.namespace, facts.group) if facts.source in _KEYED_BY_LABEL else group_key(facts, workloads)
        members.setdefault(key, []).append(facts)
    views = []
    for key, facts in sorted(members.items()):
        sources = {f.source for f in facts}
        facts, impostors = _split_impostors(facts, sources)
        if impostors:
            sources = {f.source for f in facts}
        facts.sort(key=lambda f: f.member.name)
        views.append(_view(key, tuple(facts), workloads, _first_seen(key, facts, first_seen, now), sources))
        views.extend(_impostor_view(key, impostor, _first_seen(key, [impostor], first_seen, now))
                     for impostor in impostors)
    return views


# Sources the webhook derives from an owner: only the owner's pods carry them.
_OWNED_SOURCES = frozenset(source for integration in integrations.ALL if integration.owns_pods
                           for source in integration.sources)
# Sources whose members are grouped by their label alone (`group_key`): the key of most members,
# made without asking their kind what it declares.
_KEYED_BY_LABEL = frozenset(source for source, integration in integrations.BY_SOURCE.items()
                            if source != names.SOURCE_ACCELERATOR_POD and integration.part_label is None)


def _split_impostors(pods: list[PodFacts], sources: set[str]) -> tuple[list[PodFacts], list[PodFacts]]:
    """The members of a job's group, and the pods that only labelled themselves into it.

    The webhook marks a pod `explicit` when its label names a group its owner does not give it
    (the source is never taken from the pod). Such a pod is no member of the job: counting it
    would let anyone who can read a group name stall another team's job, or ride along when it
    is released. It is set apart as a group of its own that is never reserved. `sources` are
    the pods' sources: pods of one source are all members, or none is a job's.
    """
    if len(sources) == 1:
        return pods, []
    owned = [facts for facts in pods if facts.source in _OWNED_SOURCES]
    if not owned or len(owned) == len(pods):
        return pods, []
    return owned, [facts for facts in pods if facts.source not in _OWNED_SOURCES]


def _impostor_view(key: GroupKey, facts: PodFacts, first_seen: float) -> GangView:
    label = facts.group or ""
    group = group_of((key[0], f"{label}/pod/{facts.member.name}"), [facts.member], 0, first_seen)
    return GangView(group, (facts,), facts.source, label, None,
                    ("NotAMember", f"pod {facts.member.name} is labelled into group {label}, which belongs to a "
                                   f"job that does not own it; it is never released with that group"))


def _first_seen(key: GroupKey, pods: Iterable[PodFacts], remembered: Mapping[GroupKey, float], now: float) -> float:
    if key in remembered:
        return remembered[key]
    created = [facts.member.created for facts in pods if facts.member.created is not None]
    return min([now, *created])


def dependencies(facts: PodFacts) -> tuple[WorkloadKey, ...]:
    """The workloads whose change may change the group of this pod, as `Workloads` keys.

    Gangs are looked up by the group they declare, so a Gang dependency is written
    (GANGS, namespace, group) whatever the Gang's own name; every group may have one.
    """
    namespace = facts.member.namespace
    keys = [(GANGS, namespace, facts.group or "")]
    integration = integrations.BY_SOURCE.get(facts.source)
    declaring = _declaring_ref(facts, integration)
    if declaring is not None:
        keys.append((integration.resource.name, namespace, declaring[0]))
        if isinstance(declaring[1], Through):
            keys.append((declaring[1].resource, namespace, declaring[1].name))
    return tuple(keys)


def dependents(key: WorkloadKey, workload: Workload | None) -> tuple[WorkloadKey, ...]:
    """The `dependencies` keys a change of this workload affects (a Gang: the group it declares)."""
    if key[0] == GANGS:
        return ((GANGS, key[1], workload.group_name if workload is not None else key[2]),)
    return (key,)


def settled_phase(view: GangView) -> str | None:
    """Running, Succeeded or Failed when nothing about the group changes until one of its pods
    does: no problem, and every live member bound, as many as its min count with those that
    succeeded (or none live: Succeeded when at least min count did). None while it is under way — a group left with fewer, a member
    preempted or deleted that nothing recreates, is incomplete, and is decided every pass. A group
    whose owner has ended (`GangView.finished`) has ended so, whatever its operator left of its pods."""
    if view.problem:
        return None
    if view.finished is not None:
        return view.finished
    members = view.group.members
    live = [member for member in members if not member.terminal]
    succeeded = sum(1 for member in members if member.phase == "Succeeded")
    if not live:  # Succeeded only as a whole: members failed or gone mean the group did not
        whole = succeeded >= view.group.min_count and not any(member.phase == "Failed" for member in members)
        return "Succeeded" if whole else "Failed"
    whole = len(live) + succeeded >= view.group.min_count
    return "Running" if whole and all(member.node for member in live) else None


def group_key(facts: PodFacts, workloads: WorkloadIndex) -> GroupKey:
    namespace = facts.member.namespace
    if facts.source == names.SOURCE_ACCELERATOR_POD:
        return namespace, f"{facts.group}/pod/{facts.member.name}"
    integration = integrations.BY_SOURCE.get(facts.source)
    if integration is not None and integration.part_label is not None:
        declaring = _declaring(facts, integration, workloads)
        if declaring is not None and declaring.parts:
            value = facts.labels.get(integration.part_label, "")
            return namespace, f"{facts.group}/{declaring.parts.get(value, value)}"
    return namespace, facts.group or ""


def _view(key: GroupKey, pods: tuple[PodFacts, ...], workloads: Workloads, first_seen: float,
          sources: set[str]) -> GangView:
    """The group of `pods` (their `sources` given, as they were found to split them)."""
    source, label = pods[0].source, pods[0].group or ""
    members = [p.member for p in pods]
    live = [member for member in members if not member.terminal]
    declarations, owner, missing = _declarations(key, pods, workloads)
    values = {value for _, value in declarations}
    problem = None
    if len(sources) > 1:
        problem = ("Disagreement", f"members name different group sources: {sorted(sources)}")
    elif len(values) > 1:
        problem = ("Disagreement", "declared sizes disagree: " + ", ".join(f"{who} says {v}" for who, v in declarations))
    elif not values:
        problem = ("UnknownSize", missing or f"no {names.MIN_COUNT_ANNOTATION} annotation and no Gang {label}")
    elif not names.MIN_COUNT_RANGE[0] <= next(iter(values)) <= names.MIN_COUNT_RANGE[1]:
        problem = ("InvalidSize", f"declared size {next(iter(values))} is outside {names.MIN_COUNT_RANGE}")
    else:
        problem = _priority_disagreement(live)
    min_count = next(iter(values)) if problem is None else 0
    topology = NO_TOPOLOGY
    if problem is None:
        topology, problem = group_topology(live, gang_for(key[0], label, workloads), min_count)
        min_count = min_count if problem is None else 0
    group = group_of(key, members, min_count, first_seen, _timeout(pods, workloads, key))
    if topology != NO_TOPOLOGY:
        group = replace(group, topology=topology)
    return GangView(group, pods, source, label, owner, problem, tuple(who for who, _ in declarations),
                    _finished(pods[0], workloads) if problem is None else None)


def _priority_disagreement(live: list[Member]) -> tuple[str, str] | None:
    """Live members of one group with different priorities or preemption policies (their PriorityClasses):
    the group is queued, preempted and preempts as one, so which one holds would be a guess. Only
    before the group is admitted: a replacement made after a PriorityClass changed must not stop
    a running group from getting its member back."""
    if any(m.node or m.reserved_node for m in live):
        return None
    for what, value in (("priorities", lambda m: m.priority),
                        ("preemption policies", lambda m: "Never" if not m.preempts else "PreemptLowerPriority")):
        seen: dict[object, list[str]] = {}
        for member in live:
            seen.setdefault(value(member), []).append(member.name)
        if len(seen) > 1:
            said = ", ".join(f"{', '.join(sorted(who)[:3])} {value}" for value, who in sorted(seen.items(), key=str))
            return "Disagreement", f"members' {what} disagree ({said}): give them one PriorityClass"
    return None


# TopologyRule's fields, with the annotation and the Gang field that declare each.
_TOPOLOGY_FIELDS = tuple(zip(("required", "preferred", "slice_required", "slice_size"),
                             names.TOPOLOGY_ANNOTATIONS, names.GANG_TOPOLOGY_FIELDS, strict=True))
_LABEL_KEY_FIELDS = _TOPOLOGY_FIELDS[:3]
_SHOWN_CHARS = 64


def group_topology(live: list[Member], gang: Workload | None,
                   min_count: int) -> tuple[TopologyRule, tuple[str, str] | None]:
    """The group's topology from its live members' annotations and its Gang's `spec.topology`,
    field by field, or the problem that stops it: members, or members and the Gang, that
    disagree (`Disagreement`), or a rule the planner cannot follow (`InvalidTopology`, every
    fault at once). Never raises, whatever the members or the Gang hold."""
    declared_by_gang = gang.topology if gang is not None else {}
    if not declared_by_gang and all(member.topology == NO_TOPOLOGY for member in live):
        return NO_TOPOLOGY, None
    values: dict[str, object] = {}
    origins: dict[str, str] = {}
    for attribute, annotation, gang_field in _TOPOLOGY_FIELDS:
        said: dict[object, list[str]] = {}
        for member in live:
            value = getattr(member.topology, attribute)
            if value is not None:
                said.setdefault(value, []).append(member.name)
        if len(said) > 1:
            return NO_TOPOLOGY, ("Disagreement", f"members' {annotation} disagree ({_who_says(said)}): give them one")
        gang_value = declared_by_gang.get(gang_field)
        if said and gang_value is not None and not any(gang_value == value for value in said):
            return NO_TOPOLOGY, ("Disagreement",
                                 f"members' {annotation} and Gang {gang.name}'s spec.topology.{gang_field} disagree "
                                 f"({_who_says(said)}; the Gang says {_shown(gang_value)}): give them one")
        if said:
            values[attribute], origins[attribute] = next(iter(said)), annotation
        elif gang_value is not None:
            values[attribute], origins[attribute] = gang_value, f"Gang {gang.name}'s spec.topology.{gang_field}"
    faults = _topology_faults(values, origins, min_count)
    if faults:
        return NO_TOPOLOGY, ("InvalidTopology", "; ".join(faults))
    return TopologyRule(**values), None


def _topology_faults(values: Mapping[str, object], origins: Mapping[str, str], min_count: int) -> list[str]:
    """What keeps the planner from following the rule, each naming where it was declared."""
    faults = [f"{origins[attribute]} {_quoted(values[attribute])} is not accepted: write {LABEL_KEY_RULE}"
              for attribute, _, _ in _LABEL_KEY_FIELDS
              if attribute in values and not is_valid_label_key(values[attribute])]
    size = values.get("slice_size")
    for present, absent in (("slice_size", "slice_required"), ("slice_required", "slice_size")):
        if present in values and absent not in values:
            faults.append(f"{origins[present]} is set without {_counterpart(origins[present], absent)}: "
                          f"a slice needs both the label its members share and its size; give both, or neither")
    low, high = names.SLICE_SIZE_RANGE
    if size is not None and not (type(size) is int and low <= size <= high):
        # An annotation that is no whole number was read as 0 (`model.member_topology`): not shown.
        shown = "" if size == 0 and not origins["slice_size"].startswith("Gang ") else f" {_quoted(size)}"
        faults.append(f"{origins['slice_size']}{shown} is not accepted: write the members in one slice, "
                      f"a whole number from {low} to {high}")
    elif size is not None and min_count % size:
        faults.append(f"group of {min_count} is not a multiple of {origins['slice_size']} {size}")
    return faults


def _counterpart(origin: str, attribute: str) -> str:
    """The field that declares `attribute` beside `origin`: the annotation, or the Gang's field."""
    annotation, gang_field = next((a, g) for name, a, g in _TOPOLOGY_FIELDS if name == attribute)
    return f"spec.topology.{gang_field}" if origin.startswith("Gang ") else annotation


def _who_says(said: Mapping[object, list[str]]) -> str:
    """`a says X, b, c say Y`: up to three members per value, values in a stable order."""
    parts = []
    for value, who in sorted(said.items(), key=lambda item: str(item[0])):
        parts.append(f"{first_of(sorted(who), 3)} {'says' if len(who) == 1 else 'say'} {_shown(value)}")
    return ", ".join(parts)


def _shown(value: object) -> str:
    """The value cut to a length a message can hold (an annotation may be 256 KiB)."""
    text = str(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


def _quoted(value: object) -> str:
    return _shown(f'"{value}"' if isinstance(value, str) else value)


def _declarations(key: GroupKey, pods: tuple[PodFacts, ...],
                  workloads: Workloads) -> tuple[list[tuple[str, int]], Owner | None, str | None]:
    """(who, size) for every declaration found, the owner to hang the Gang on, and what is missing."""
    namespace, source, label = key[0], pods[0].source, pods[0].group or ""
    found: list[tuple[str, int]] = []
    for annotation in sorted({p.min_count for p in pods if p.min_count is not None}):
        found.append((f"annotation {names.MIN_COUNT_ANNOTATION}={annotation}", _int(annotation)))
    if source == names.SOURCE_ACCELERATOR_POD:
        member = pods[0].member
        return [("a lone accelerator pod", 1)], Owner("v1", "Pod", member.name, member.uid), None
    integration = integrations.BY_SOURCE.get(source)
    if integration is not None and integration.owns_pods:
        return _owner_declaration(key, pods[0], integration, workloads, found)
    declaring = _declaring(pods[0], integration, workloads)
    if declaring is not None:
        found.append((f"{integration.resource.kind} {declaring.name}", declaring.sizes[""]))
    gang = gang_for(namespace, label, workloads)
    if gang is not None:
        found.append((f"Gang {gang.name}", gang.sizes[""]))
    return found, None, None


def _owner_declaration(key: GroupKey, facts: PodFacts, integration: Integration, workloads: Workloads,
                       found: list[tuple[str, int]]) -> tuple[list[tuple[str, int]], Owner | None, str | None]:
    """The owner's size (of the group's part, when it starts its parts in order) after `found`.

    Only the owner declares the size of its group: a Gang naming the group is not asked."""
    owner = _declaring(facts, integration, workloads)
    if owner is None:
        declaring = _declaring_ref(facts, integration)
        what = f"{integration.resource.kind} {declaring[0]}" if declaring else f"owner {facts.source}"
        if declaring and isinstance(declaring[1], Through):
            what += f" controlling {declaring[1].resource} {declaring[1].name}, the pod's owner,"
        return found, None, f"{what} not in the cache (yet)"
    part = key[1][len(facts.group or "") + 1:] if owner.parts else ""
    who = f"{integration.resource.kind} {owner.name} {part}".strip()
    return found + [(who, owner.sizes.get(part, 0))], owner.owner, None


def _declaring_ref(facts: PodFacts, integration: Integration | None) -> ObjectRef | None:
    """(name, uid) of the object that declares the size of the member's group, by its kind."""
    if integration is None or integration.declarer is None:
        return None
    owner = (facts.owner.name, facts.owner.uid) if facts.owner is not None else None
    return integration.declarer(facts.group or "", facts.labels, owner)


def _declaring(facts: PodFacts, integration: Integration | None, workloads: WorkloadIndex) -> Workload | None:
    """The cached object declaring the member's group size; an owner only when its UID is the one
    the member names, where members name one (an LWS's do not: it owns them through StatefulSets),
    or when it controls the cached object that owns the member (`Through`: an MPIJob's launcher Job)."""
    declaring = _declaring_ref(facts, integration)
    if declaring is None:
        return None
    namespace, proof = facts.member.namespace, declaring[1]
    workload = workloads.get((integration.resource.name, namespace, declaring[0]))
    if workload is None or not integration.owns_pods or proof is None:
        return workload
    if isinstance(proof, Through):
        between = workloads.get((proof.resource, namespace, proof.name))
        owned = between is not None and between.uid == proof.uid and between.controller_uid == workload.uid
        return workload if owned else None
    return workload if workload.uid == proof else None


def _finished(facts: PodFacts, workloads: WorkloadIndex) -> str | None:
    """The end the member's owner has come to, as its operator says it (`Workload.finished`)."""
    integration = integrations.BY_SOURCE.get(facts.source)
    if integration is None or not integration.owns_pods:
        return None
    owner = _declaring(facts, integration, workloads)
    return owner.finished if owner is not None else None


def gang_for(namespace: str, label: str, workloads: Workloads) -> Workload | None:
    """The user's Gang declaring this group (`spec.groupName`, which defaults to its name)."""
    return workloads.gang_declaring(namespace, label)


def _timeout(pods: tuple[PodFacts, ...], workloads: Workloads, key: GroupKey) -> float | None:
    gang = gang_for(key[0], pods[0].group or "", workloads)
    if gang is not None and gang.schedule_timeout is not None:
        return gang.schedule_timeout
    declared = next((p.schedule_timeout for p in pods if p.schedule_timeout), None)
    try:
        return float(declared) if declared else None
    except ValueError:
        return None


def _int(text: str) -> int:
    """A declared size; an unreadable one counts as 0, which `_view` reports as out of range."""
    try:
        return int(text)
    except ValueError:
        return 0
