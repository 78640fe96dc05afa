"""Groups from the cache: members by (namespace, group label) and the size their owners declare.

The webhook labels every member with `gangkeeper.io/group` and says how it found the group
(`gangkeeper.io/group-source`); the size is resolved here, from the owner objects the pod
alone cannot see (DESIGN.md, "Group identity"). Two exceptions to keying by the label:
  - a JobSet started `InOrder` is one group per replicated job: a JobSet-wide gang would
    deadlock, since later jobs start only when earlier ones are ready;
  - a lone accelerator pod is a group of one, keyed by the pod, never merged with another.

Every declaration found (pod annotations, the Gang, the owner) must agree; when they don't, or
none is found, the group gets a `problem` and nothing of it is reserved.

The cache holds `PodFacts` and `Workload`s, small frozen values made once per API object by
`pod_facts` and `workload_from_api` (the informers' transforms).

When a group was first seen orders the queue and starts its schedule timeout and starvation
clocks. The controller remembers it, and after a restart (or with nothing remembered) takes the
creation time of the group's oldest member: durable, so a restart neither moves a group to the
back of the queue nor restarts its timeout.
"""

import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from gangkeeper import names
from gangkeeper.controller.model import Group, GroupKey, Member, group_of, member_from_api

PODGROUPS_NATIVE = "podgroups.scheduling.k8s.io"
PODGROUPS_PLUGINS = "podgroups.scheduling.x-k8s.io"
PODGROUPS_VOLCANO = "podgroups.scheduling.volcano.sh"
PYTORCHJOBS = "pytorchjobs.kubeflow.org"
JOBSETS = "jobsets.jobset.x-k8s.io"
JOBS = "jobs.batch"
GANGS = f"{names.GANG_PLURAL}.{names.GANG_GROUP}"

# How a PodGroup-declared group finds its PodGroup: resource, and the pod label naming it (None: the group label).
_POD_GROUPS = {names.SOURCE_NATIVE_POD_GROUP: (PODGROUPS_NATIVE, names.NATIVE_POD_GROUP_LABEL),
               names.SOURCE_PLUGINS_POD_GROUP: (PODGROUPS_PLUGINS, names.PLUGINS_POD_GROUP_LABEL),
               names.SOURCE_VOLCANO_POD_GROUP: (PODGROUPS_VOLCANO, None)}
# The labels a member carries that lead to its owner; everything else is dropped from the cache.
_KEPT_LABELS = (names.JOBSET_NAME_LABEL, names.JOBSET_UID_LABEL, names.JOBSET_REPLICATED_JOB_LABEL,
                names.NATIVE_POD_GROUP_LABEL, names.PLUGINS_POD_GROUP_LABEL)


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
    """An object that declares a group's size: `sizes` by replicated job ('' for the whole)."""

    resource: str
    namespace: str
    name: str
    uid: str
    api_version: str
    kind: str
    sizes: Mapping[str, int]
    in_order: bool = False
    group_name: str = ""
    schedule_timeout: float | None = None
    status: Mapping | None = None  # a Gang's status, compared before it is written again
    disposable: bool = False  # a Gang the controller created for a group without owner

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
    """The sizes an owner object declares, read the way its own controller reads its spec."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    base = dict(resource=resource, namespace=sys.intern(metadata.get("namespace", "")), name=metadata.get("name", ""),
                uid=metadata.get("uid", ""), api_version=obj.get("apiVersion", ""), kind=obj.get("kind", ""))
    if resource == PYTORCHJOBS:
        return Workload(**base, sizes={"": pytorchjob_min_count(spec)})
    if resource == JOBSETS:
        sizes, in_order = jobset_sizes(spec)
        return Workload(**base, sizes=sizes, in_order=in_order)
    if resource == JOBS:
        return Workload(**base, sizes={"": job_size(spec)})
    if resource == GANGS:
        timeout = spec.get("scheduleTimeoutSeconds")
        labels = metadata.get("labels") or {}
        return Workload(**base, sizes={"": int(spec.get("minCount") or 0)},
                        group_name=spec.get("groupName") or base["name"],
                        schedule_timeout=float(timeout) if timeout is not None else None,
                        status=obj.get("status") or {},
                        disposable=labels.get(names.MANAGED_BY_LABEL) == names.MANAGED_BY_VALUE
                        and not metadata.get("ownerReferences"))
    if resource == PODGROUPS_NATIVE:
        gang = (spec.get("schedulingPolicy") or {}).get("gang") or {}
        return Workload(**base, sizes={"": int(gang.get("minCount") or 0)})
    return Workload(**base, sizes={"": int(spec.get("minMember") or 0)})


def pytorchjob_min_count(spec: Mapping) -> int:
    """Σ replicas, unless the job says fewer suffice (gang minAvailable, or elastic minReplicas)."""
    run_policy = spec.get("runPolicy") or {}
    declared = ((run_policy.get("schedulingPolicy") or {}).get("minAvailable")
                or (spec.get("elasticPolicy") or {}).get("minReplicas"))
    if declared:
        return int(declared)
    return sum(int(replica.get("replicas", 1)) for replica in (spec.get("pytorchReplicaSpecs") or {}).values())


def jobset_sizes(spec: Mapping) -> tuple[dict[str, int], bool]:
    """Pods per replicated job (replicas × pods per Job) and whether they start in order."""
    sizes = {}
    for replicated in spec.get("replicatedJobs") or ():
        job_spec = (replicated.get("template") or {}).get("spec") or {}
        sizes[replicated.get("name", "")] = int(replicated.get("replicas", 1)) * job_size(job_spec)
    in_order = (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
    return (sizes if in_order else {"": sum(sizes.values())}), in_order


def job_size(spec: Mapping) -> int:
    """Pods a Job runs at once: min(parallelism, completions); unset completions run `parallelism`."""
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    return parallelism if completions is None else min(parallelism, int(completions))


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
        if facts.group is not None:
            members.setdefault(group_key(facts, workloads), []).append(facts)
    views = []
    for key, facts in sorted(members.items()):
        facts, impostors = _split_impostors(facts)
        facts.sort(key=lambda f: f.member.name)
        views.append(_view(key, tuple(facts), workloads, _first_seen(key, facts, first_seen, now)))
        views.extend(_impostor_view(key, impostor, _first_seen(key, [impostor], first_seen, now))
                     for impostor in impostors)
    return views


# Sources the webhook derives from a controlling owner: only the owner's pods carry them.
_OWNED_SOURCES = frozenset({names.SOURCE_PYTORCHJOB, names.SOURCE_JOBSET, names.SOURCE_JOB})


def _split_impostors(pods: list[PodFacts]) -> tuple[list[PodFacts], list[PodFacts]]:
    """The members of a job's group, and the pods that only labelled themselves into it.

    The webhook marks a pod `explicit` when its label names a group its owner does not give it
    (the source is never taken from the pod). Such a pod is no member of the job: counting it
    would let anyone who can read a group name stall another team's job, or ride along when it
    is released. It is set apart as a group of its own that is never reserved.
    """
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
    namespace, source, label = facts.member.namespace, facts.source, facts.group or ""
    keys = [(GANGS, namespace, label)]
    owner_resource = {names.SOURCE_PYTORCHJOB: PYTORCHJOBS, names.SOURCE_JOB: JOBS}.get(source)
    if owner_resource and facts.owner is not None:
        keys.append((owner_resource, namespace, facts.owner.name))
    elif source == names.SOURCE_JOBSET:
        keys.append((JOBSETS, namespace, facts.labels.get(names.JOBSET_NAME_LABEL, "")))
    elif source in _POD_GROUPS:
        resource, name_label = _POD_GROUPS[source]
        keys.append((resource, namespace, facts.labels.get(name_label, label) if name_label else label))
    return tuple(keys)


def dependents(key: WorkloadKey, workload: Workload | None) -> tuple[WorkloadKey, ...]:
    """The `dependencies` keys a change of this workload affects (a Gang: the group it declares)."""
    if key[0] == GANGS:
        return ((GANGS, key[1], workload.group_name if workload is not None else key[2]),)
    return (key,)


def settled_phase(view: GangView) -> str | None:
    """Running, Succeeded or Failed when nothing about the group changes until one of its pods
    does: no problem, and every live member bound (or none live). None while it is under way."""
    if view.problem:
        return None
    live = [member for member in view.group.members if not member.terminal]
    if not live:
        return "Failed" if any(member.phase == "Failed" for member in view.group.members) else "Succeeded"
    return "Running" if all(member.node for member in live) else None


def group_key(facts: PodFacts, workloads: WorkloadIndex) -> GroupKey:
    namespace = facts.member.namespace
    if facts.source == names.SOURCE_ACCELERATOR_POD:
        return namespace, f"{facts.group}/pod/{facts.member.name}"
    if facts.source == names.SOURCE_JOBSET:
        jobset = _jobset(facts, workloads)
        if jobset is not None and jobset.in_order:
            return namespace, f"{facts.group}/{facts.labels.get(names.JOBSET_REPLICATED_JOB_LABEL, '')}"
    return namespace, facts.group or ""


def _view(key: GroupKey, pods: tuple[PodFacts, ...], workloads: Workloads, first_seen: float) -> GangView:
    source, label = pods[0].source, pods[0].group or ""
    declarations, owner, missing = _declarations(key, pods, workloads)
    values = {value for _, value in declarations}
    problem = None
    if len({p.source for p in pods}) > 1:
        problem = ("Disagreement", f"members name different group sources: {sorted({p.source for p in pods})}")
    elif len(values) > 1:
        problem = ("Disagreement", "declared sizes disagree: " + ", ".join(f"{who} says {v}" for who, v in declarations))
    elif not values:
        problem = ("UnknownSize", missing or f"no {names.MIN_COUNT_ANNOTATION} annotation and no Gang {label}")
    elif not names.MIN_COUNT_RANGE[0] <= next(iter(values)) <= names.MIN_COUNT_RANGE[1]:
        problem = ("InvalidSize", f"declared size {next(iter(values))} is outside {names.MIN_COUNT_RANGE}")
    min_count = next(iter(values)) if problem is None else 0
    group = group_of(key, [p.member for p in pods], min_count, first_seen, _timeout(pods, workloads, key))
    return GangView(group, pods, source, label, owner, problem, tuple(who for who, _ in declarations))


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
    owner_resource = {names.SOURCE_PYTORCHJOB: PYTORCHJOBS, names.SOURCE_JOB: JOBS}.get(source)
    if owner_resource:
        workload = _owned_by(pods[0], owner_resource, workloads)
        if workload is None:
            return found, None, f"owner {pods[0].owner.kind if pods[0].owner else source} not in the cache (yet)"
        return found + [(f"{workload.kind} {workload.name}", workload.sizes[""])], workload.owner, None
    if source == names.SOURCE_JOBSET:
        jobset = _jobset(pods[0], workloads)
        if jobset is None:
            return found, None, f"JobSet {pods[0].labels.get(names.JOBSET_NAME_LABEL)} not in the cache (yet)"
        part = key[1][len(label) + 1:] if jobset.in_order else ""
        return found + [(f"JobSet {jobset.name} {part}".strip(), jobset.sizes.get(part, 0))], jobset.owner, None
    pod_group = _POD_GROUPS.get(source)
    if pod_group:
        name = pods[0].labels.get(pod_group[1], label) if pod_group[1] else label
        workload = workloads.get((pod_group[0], namespace, name))
        if workload is not None:
            found.append((f"PodGroup {name}", workload.sizes[""]))
    gang = gang_for(namespace, label, workloads)
    if gang is not None:
        found.append((f"Gang {gang.name}", gang.sizes[""]))
    return found, None, None


def _owned_by(facts: PodFacts, resource: str, workloads: WorkloadIndex) -> Workload | None:
    owner = facts.owner
    if owner is None:
        return None
    workload = workloads.get((resource, facts.member.namespace, owner.name))
    return workload if workload is not None and workload.uid == owner.uid else None


def _jobset(facts: PodFacts, workloads: WorkloadIndex) -> Workload | None:
    name = facts.labels.get(names.JOBSET_NAME_LABEL, "")
    workload = workloads.get((JOBSETS, facts.member.namespace, name))
    if workload is None or workload.uid != facts.labels.get(names.JOBSET_UID_LABEL):
        return None
    return workload


def gang_for(namespace: str, label: str, workloads: Workloads) -> Workload | None:
    """The user's Gang declaring this group (`spec.groupName`, which defaults to its name)."""
    return workloads.gang_declaring(namespace, label)


def _timeout(pods: tuple[PodFacts, ...], workloads: Workloads, key: GroupKey) -> float | None:
    gang = gang_for(key[0], pods[0].group or "", workloads)
    if gang is not None and gang.schedule_timeout is not None:
        return gang.schedule_timeout
    declared = [p.schedule_timeout for p in pods if p.schedule_timeout]
    try:
        return float(declared[0]) if declared else None
    except ValueError:
        return None


def _int(text: str) -> int:
    """A declared size; an unreadable one counts as 0, which `_view` reports as out of range."""
    try:
        return int(text)
    except ValueError:
        return 0
