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
disagree, it leaves it to the others — and the rule must be one the planner can follow
(`cache.declared_topology`).

The cache holds `PodFacts` and `Workload`s (`model.objects`), small frozen values made once per
API object by the informers' transforms (`reading.pods.pod_facts`, `reading.workloads`).

When a group was first seen orders the queue and starts its schedule timeout and starvation
clocks. The controller remembers it, and after a restart (or with nothing remembered) takes the
creation time of the group's oldest member: durable, so a restart neither moves a group to the
back of the queue nor restarts its timeout.
"""

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from gangkeeper import integrations, names
from gangkeeper.controller.cache.declared_topology import group_topology
from gangkeeper.controller.cache.trees import INVALID_TREE, PARENT_HAS_NO_MEMBERS, tree_problem
from gangkeeper.controller.model.members import NO_TOPOLOGY, Group, GroupKey, Member, group_of
from gangkeeper.controller.model.objects import Owner, PodFacts, Workload, WorkloadIndex, WorkloadKey
from gangkeeper.integrations import gang, job, jobset, native_pod_group, pytorchjob
from gangkeeper.integrations.kind import Integration, Resource, Through

# Cache keys name a workload's resource as `Resource.name` does (`gangs.gangkeeper.io`).
GANGS = gang.RESOURCE.name
# Named for the tests that build workloads of one kind.
PYTORCHJOBS, JOBSETS, JOBS, PODGROUPS_NATIVE = (
    pytorchjob.RESOURCE.name, jobset.RESOURCE.name, job.RESOURCE.name, native_pod_group.RESOURCE.name)


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
    parent: str = ""  # the parent Gang its Gang names (`spec.parent`): a child in a tree (`cache.trees`)


# --- grouping ----------------------------------------------------------------------------------


class Workloads(Mapping):
    """Workloads by (resource, namespace, name), with Gangs also found by the group they declare.

    A Gang may declare any group (`spec.groupName`); finding it by scanning every workload would
    cost O(workloads) per group and pass, so Gangs are indexed by (namespace, group) as well, and
    by the parent they name (`spec.parent`: a tree's children, `cache.trees`).
    """

    __slots__ = ("_items", "_gangs", "_children")

    def __init__(self, items: WorkloadIndex | None = None):
        self._items: dict[WorkloadKey, Workload] = {}
        self._gangs: dict[tuple[str, str], set[str]] = {}
        self._children: dict[tuple[str, str], set[str]] = {}
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
            _forget(self._gangs, (previous.namespace, previous.group_name), previous.name)
            _forget(self._children, (previous.namespace, previous.parent), previous.name)
        if workload is not None:
            self._items[key] = workload
            if workload.resource == GANGS:
                self._gangs.setdefault((workload.namespace, workload.group_name), set()).add(workload.name)
                if workload.parent:
                    self._children.setdefault((workload.namespace, workload.parent), set()).add(workload.name)
        return previous

    def children(self, namespace: str, parent: str) -> list[Workload]:
        """The Gangs naming `parent` in their `spec.parent`, by name."""
        return [self._items[(GANGS, namespace, name)] for name in sorted(self._children.get((namespace, parent), ()))]

    def gang(self, namespace: str, name: str) -> Workload | None:
        return self._items.get((GANGS, namespace, name))

    def gang_declaring(self, namespace: str, group: str) -> Workload | None:
        """The Gang named like the group when it declares it, else the first (by name) that does."""
        declaring = self._gangs.get((namespace, group))
        if not declaring:
            return None
        return self._items[(GANGS, namespace, group if group in declaring else min(declaring))]


def _forget(index: dict[tuple[str, str], set[str]], key: tuple[str, str], name: str) -> None:
    names_there = index.get(key)
    if names_there is not None:
        names_there.discard(name)
        if not names_there:
            del index[key]


def as_workloads(workloads: WorkloadIndex) -> Workloads:
    return workloads if isinstance(workloads, Workloads) else Workloads(workloads)


def build_groups(pods: Iterable[PodFacts], workloads: WorkloadIndex, first_seen: Mapping[GroupKey, float],
                 now: float) -> list[GangView]:
    """Every group the members make, sized (see the module docstring for when each was first seen)."""
    workloads = as_workloads(workloads)
    members: dict[GroupKey, list[PodFacts]] = {}
    for pod in pods:
        if pod.group is None:
            continue
        key = (pod.member.namespace, pod.group) if pod.source in _KEYED_BY_LABEL else group_key(pod, workloads)
        members.setdefault(key, []).append(pod)
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
    declaring = _declaring_ref(facts, integrations.BY_SOURCE.get(facts.source))
    if declaring is not None:
        keys.append((declaring.resource.name, namespace, declaring.name))
        if isinstance(declaring.proof, Through):
            keys.append((declaring.proof.resource, namespace, declaring.proof.name))
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
    gang = gang_for(key[0], label, workloads)
    live_pods = [p for p in pods if not p.member.terminal]
    declaring = _declaring(pods[0], integrations.BY_SOURCE.get(source), workloads)
    if gang is not None and gang.is_parent:
        problem = (PARENT_HAS_NO_MEMBERS, f"Gang {gang.name} is a parent (spec.minGroupCount): it has no members of "
                                          f"its own; label the pods into one of its children, the Gangs whose "
                                          f"spec.parent is {gang.name}")
    elif gang is not None and gang.parent and (wrong := tree_problem(gang, workloads)) is not None:
        problem = (INVALID_TREE, wrong)
    elif (unlike := _parent_disagreement(live_pods, gang, declaring)):
        problem = ("Disagreement", unlike)
    elif len(sources) > 1:
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
        topology, problem = group_topology(live, gang, min_count)
        min_count = min_count if problem is None else 0
    group = group_of(key, members, min_count, first_seen, _timeout(pods, workloads, key))
    if topology != NO_TOPOLOGY:
        group = replace(group, topology=topology)
    most = _max_count(key, pods[0], workloads) if problem is None else None
    if most is not None:
        group = replace(group, max_count=max(most, min_count))
    parent = gang.parent if gang is not None else _labelled_parent(live_pods, declaring)
    return GangView(group, pods, source, label, owner, problem, tuple(who for who, _ in declarations),
                    _finished(pods[0], workloads) if problem is None else None, parent)


def _labelled_parent(live: list[PodFacts], owner: Workload | None) -> str:
    """The parent Gang the members' label `gangkeeper.io/parent`, or their owner's, names ('' for none)."""
    said = {value for facts in live if (value := facts.member.labels.get(names.PARENT_LABEL))}
    if owner is not None and owner.resource != GANGS and owner.parent:
        said.add(owner.parent)
    return min(said) if said else ""


def _parent_disagreement(live: list[PodFacts], gang: Workload | None, owner: Workload | None) -> str | None:
    """Members (or their owner) naming different parents with `gangkeeper.io/parent`, or one their
    Gang's `spec.parent` does not name: which tree the group is in would be a guess."""
    said: dict[str, list[str]] = {}
    for facts in live:
        said.setdefault(facts.member.labels.get(names.PARENT_LABEL, ""), []).append(facts.member.name)
    if owner is not None and owner.resource != GANGS and owner.parent:
        said.setdefault(owner.parent, []).append(f"{owner.kind} {owner.name}")
        if said.get("") and len(said) == 2:  # the owner names it for pods that do not
            said.pop("")
    named = {value for value in said if value}
    if len(said) > 1:
        shown = ", ".join(f"{', '.join(sorted(who)[:3])} say {value or '(none)'}" for value, who in sorted(said.items()))
        return f"label {names.PARENT_LABEL} disagrees ({shown}): give the members and their owner one parent, or none"
    if named and gang is not None and gang.parent not in named:
        value = next(iter(named))
        return (f"label {names.PARENT_LABEL}={value} and Gang {gang.name}'s spec.parent "
                f"{gang.parent or '(unset)'} disagree: set spec.parent: {value} on Gang {gang.name}, or remove the label")
    return None


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
        found.append((f"{declaring.kind} {declaring.name}", declaring.sizes[""]))
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
        what = f"{declaring.resource.kind} {declaring.name}" if declaring else f"owner {facts.source}"
        if declaring and isinstance(declaring.proof, Through):
            what += f" controlling {declaring.proof.resource} {declaring.proof.name}, the pod's owner,"
        return found, None, f"{what} not in the cache (yet)"
    part = key[1][len(facts.group or "") + 1:] if owner.parts else ""
    who = f"{owner.kind} {owner.name} {part}".strip()
    return found + [(who, owner.sizes.get(part, 0))], owner.owner, None


class _DeclaringRef(NamedTuple):
    """The object that declares the size of a member's group, by its kind: its resource, its name
    and what proves it is the member's (`ObjectRef`)."""

    resource: Resource
    name: str
    proof: str | Through | None


def _declaring_ref(facts: PodFacts, integration: Integration | None) -> _DeclaringRef | None:
    """The object that declares the size of the member's group, by its kind; None for a kind
    whose objects declare none."""
    if integration is None or integration.declarer is None or integration.resource is None:
        return None
    owner = (facts.owner.name, facts.owner.uid) if facts.owner is not None else None
    found = integration.declarer(facts.group or "", facts.labels, owner)
    return None if found is None else _DeclaringRef(integration.resource, *found)


def _declaring(facts: PodFacts, integration: Integration | None, workloads: WorkloadIndex) -> Workload | None:
    """The cached object declaring the member's group size; an owner only when its UID is the one
    the member names, where members name one (an LWS's do not: it owns them through StatefulSets),
    or when it controls the cached object that owns the member (`Through`: an MPIJob's launcher Job)."""
    declaring = _declaring_ref(facts, integration)
    if integration is None or declaring is None:
        return None
    namespace, proof = facts.member.namespace, declaring.proof
    workload = workloads.get((declaring.resource.name, namespace, declaring.name))
    if workload is None or not integration.owns_pods or proof is None:
        return workload
    if isinstance(proof, Through):
        between = workloads.get((proof.resource, namespace, proof.name))
        owned = between is not None and between.uid == proof.uid and between.controller_uid == workload.uid
        return workload if owned else None
    return workload if workload.uid == proof else None


def _max_count(key: GroupKey, facts: PodFacts, workloads: WorkloadIndex) -> int | None:
    """The most pods its owner runs at once, where its kind runs with fewer between bounds of its
    own (`Workload.maxima`, of the group's part); None for any other group."""
    integration = integrations.BY_SOURCE.get(facts.source)
    owner = _declaring(facts, integration, workloads) if integration is not None and integration.owns_pods else None
    if owner is None:
        return None
    return owner.maxima.get(key[1][len(facts.group or "") + 1:] if owner.parts else "")


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
