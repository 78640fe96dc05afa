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
"""

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from controller.model import Group, GroupKey, Member, group_of, member_from_api
from gangkeeper import names

PODGROUPS_NATIVE = "podgroups.scheduling.k8s.io"
PODGROUPS_PLUGINS = "podgroups.scheduling.x-k8s.io"
PODGROUPS_VOLCANO = "podgroups.scheduling.volcano.sh"
PYTORCHJOBS = "pytorchjobs.kubeflow.org"
JOBSETS = "jobsets.jobset.x-k8s.io"
JOBS = "jobs.batch"
GANGS = f"{names.GANG_PLURAL}.{names.GANG_GROUP}"

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
        return Workload(**base, sizes={"": int(spec.get("minCount") or 0)},
                        group_name=spec.get("groupName") or base["name"],
                        schedule_timeout=float(timeout) if timeout is not None else None,
                        status=obj.get("status") or {})
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


def _unschedulable(pod: Mapping) -> str | None:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
            return condition.get("message") or "Unschedulable"
    return None


# --- grouping ----------------------------------------------------------------------------------

WorkloadIndex = Mapping[tuple[str, str, str], Workload]  # (resource, namespace, name)


def build_groups(pods: Iterable[PodFacts], workloads: WorkloadIndex, first_seen: Mapping[GroupKey, float],
                 now: float) -> list[GangView]:
    """Every group the members make, sized; `first_seen` missing a key means seen `now`."""
    members: dict[GroupKey, list[PodFacts]] = {}
    for facts in pods:
        if facts.group is not None:
            members.setdefault(group_key(facts, workloads), []).append(facts)
    views = []
    for key, facts in sorted(members.items()):
        facts.sort(key=lambda f: f.member.name)
        views.append(_view(key, tuple(facts), workloads, first_seen.get(key, now)))
    return views


def group_key(facts: PodFacts, workloads: WorkloadIndex) -> GroupKey:
    namespace = facts.member.namespace
    if facts.source == names.SOURCE_ACCELERATOR_POD:
        return namespace, f"{facts.group}/pod/{facts.member.name}"
    if facts.source == names.SOURCE_JOBSET:
        jobset = _jobset(facts, workloads)
        if jobset is not None and jobset.in_order:
            return namespace, f"{facts.group}/{facts.labels.get(names.JOBSET_REPLICATED_JOB_LABEL, '')}"
    return namespace, facts.group or ""


def _view(key: GroupKey, pods: tuple[PodFacts, ...], workloads: WorkloadIndex, first_seen: float) -> GangView:
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
                  workloads: WorkloadIndex) -> tuple[list[tuple[str, int]], Owner | None, str | None]:
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
    pod_group = {names.SOURCE_NATIVE_POD_GROUP: (PODGROUPS_NATIVE, names.NATIVE_POD_GROUP_LABEL),
                 names.SOURCE_PLUGINS_POD_GROUP: (PODGROUPS_PLUGINS, names.PLUGINS_POD_GROUP_LABEL),
                 names.SOURCE_VOLCANO_POD_GROUP: (PODGROUPS_VOLCANO, None)}.get(source)
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


def gang_for(namespace: str, label: str, workloads: WorkloadIndex) -> Workload | None:
    """The user's Gang declaring this group: by `spec.groupName`, else by its name."""
    named = workloads.get((GANGS, namespace, label))
    if named is not None and named.group_name == label:
        return named
    return next((w for (resource, ns, _), w in workloads.items()
                 if resource == GANGS and ns == namespace and w.group_name == label), None)


def _timeout(pods: tuple[PodFacts, ...], workloads: WorkloadIndex, key: GroupKey) -> float | None:
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
