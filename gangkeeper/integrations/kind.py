"""The shape of an integration: everything gangkeeper knows about one workload kind, as data.

Three parts of gangkeeper that never import each other read it: the webhook (how a pod of the
kind is recognised), the controller (which resource it lists and watches, which object declares
a member's group size and how the size is read off it) and deploy/'s RBAC (the verbs the
controller needs, held against deploy/ by tests/integrations). One module per kind fills it in,
so supporting one more kind is one module, not an edit in each of those places.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Required, TypedDict

from gangkeeper import names
from gangkeeper.integrations.finding import Classification


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the API: `/api/v1/...` for the core group, `/apis/GROUP/VERSION/...` otherwise."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def name(self) -> str:
        """`pods`, `podgroups.scheduling.x-k8s.io`: unambiguous, as kubectl spells it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None = None, name: str = "", subresource: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [base]
        if self.namespaced and namespace:
            parts += ["namespaces", namespace]
        parts.append(self.plural)
        parts += [part for part in (name, subresource) if part]
        return "/".join(parts)


class Declaration(TypedDict, total=False):
    """What the controller reads off an object of the kind: pods per part of its group ('' for
    the whole), the most pods per part it runs at once where it runs with fewer than all, between
    bounds of its own (`maxima`: an elastic job's maximum, the replicas its autoscaler keeps), which part each value of the kind's `part_label` belongs to when the object
    splits its group into parts that start apart (`parts`; empty: one group), for a Gang the group it declares, its
    schedule timeout, its parent Gang (`parent`, '' for none) and, for a parent, its
    `spec.minGroupCount` (`min_group_count`; None for a Gang that is no parent) — for an owner asking to
    be a tree of its groups, the parent Gang the controller makes for it (`as_tree`) —, its `spec.topology` (the fields of `names.GANG_TOPOLOGY_FIELDS` it sets,
    as written: the controller checks them), its status (compared before it is written again),
    the nodes its status reserves for members (`reservations`: pod name → (uid, node)) and
    whether the controller created it for a group without owner (and so deletes it with the
    group), for an owner with a suspend switch where the switch stands (`SuspendState`), and the
    object whose switch is the group's when it is not this one (`switch`: resource name, name and
    uid of an owner that copies its own switch onto this object, as a TrainJob onto its JobSet,
    and so undoes a change made here), and for an owner whose operator says when it has ended
    (`finished`: "Succeeded" or "Failed") that end, which is then its group's whatever became of
    the pods: the operator may delete them once it has ended (an MPIJob's `cleanPodPolicy`)."""

    sizes: Required[Mapping[str, int]]
    maxima: Mapping[str, int]
    parts: Mapping[str, str]
    group_name: str
    schedule_timeout: float | None
    topology: Mapping[str, object]
    parent: str
    min_group_count: int | None
    status: Mapping
    reservations: Mapping[str, tuple[str, str]]
    disposable: bool
    suspend: "SuspendState"
    switch: tuple[str, str, str]
    finished: str


@dataclass(frozen=True, slots=True)
class Through:
    """The member's controlling owner when the object declaring its group owns it through another
    object it controls, as an MPIJob owns its launcher pod through its launcher Job: that object's
    resource (`Resource.name`), name and uid. The declaring object is proven by it: cached under
    that name with that uid, and controlled by the declaring object."""

    resource: str
    name: str
    uid: str


# (name, proof) of the object that declares a member's group size; the proof, compared for owners
# only, is its uid, or the owner in between (`Through`), or None (the members carry neither: found by name).
ObjectRef = tuple[str, str | Through | None]
# (group label, the member's labels the controller keeps, (name, uid) of its controlling owner or None).
Declarer = Callable[[str, Mapping[str, str], tuple[str, str] | None], ObjectRef | None]


@dataclass(frozen=True, slots=True)
class SuspendState:
    """An owner's suspend switch as the controller reads it: the resourceVersion read (the
    precondition of any patch decided on it), whether it is suspended, whether gangkeeper's
    annotation says gangkeeper suspended it, and when gangkeeper's annotation says to resume it
    (epoch seconds; None when missing or unreadable)."""

    resource_version: str
    suspended: bool
    by_gangkeeper: bool = False
    resume_at: float | None = None

    @property
    def held(self) -> bool:
        """Suspended by gangkeeper, and still so: the one state in which gangkeeper resumes it. An
        owner a user suspended, or resumed, or took the annotation off, is the user's."""
        return self.suspended and self.by_gangkeeper


@dataclass(frozen=True)
class Suspension:
    """The boolean field at `field` that suspends an owner: while it is true the owner's operator
    deletes the owner's pods and creates none, without counting them as failed, so a group can
    be taken back whole and retried.

    Every patch is a JSON merge patch carrying the resourceVersion the owner was read at, which
    the API server takes as a precondition (409 when the object changed since): a decision taken
    on an old view, say before a user resumed the job, is never written over their change.
    """

    field: tuple[str, ...]

    def is_suspended(self, obj: Mapping) -> bool:
        value: object = obj
        for key in self.field:
            value = value.get(key) if isinstance(value, Mapping) else None
        return value is True

    def state(self, obj: Mapping) -> SuspendState:
        metadata = obj.get("metadata") or {}
        annotations = metadata.get("annotations") or {}
        return SuspendState(str(metadata.get("resourceVersion", "")), self.is_suspended(obj),
                            annotations.get(names.SUSPENDED_BY_ANNOTATION) == names.SUSPENDED_BY_VALUE,
                            _epoch(annotations.get(names.RESUME_AT_ANNOTATION)))

    def patch(self, obj: Mapping, suspended: bool) -> dict | None:
        """The patch that sets the switch to `suspended`, and nothing else; None when it already is."""
        if self.is_suspended(obj) == suspended:
            return None
        return self._switch(str((obj.get("metadata") or {}).get("resourceVersion", "")), suspended, {})

    def suspending(self, resource_version: str, until: str) -> dict:
        """The patch that suspends the owner for gangkeeper until `until` (RFC 3339), saying so on it."""
        return self._switch(resource_version, True, {names.SUSPENDED_BY_ANNOTATION: names.SUSPENDED_BY_VALUE,
                                                     names.RESUME_AT_ANNOTATION: until})

    def resuming(self, resource_version: str) -> dict:
        """The patch that resumes an owner gangkeeper suspended and removes what it wrote on it."""
        return self._switch(resource_version, False, {names.SUSPENDED_BY_ANNOTATION: None,
                                                      names.RESUME_AT_ANNOTATION: None})

    def _switch(self, resource_version: str, suspended: bool, annotations: Mapping[str, str | None]) -> dict:
        switch: dict = {self.field[-1]: suspended}
        for key in reversed(self.field[:-1]):
            switch = {key: switch}
        metadata: dict = {"resourceVersion": resource_version}
        if annotations:
            metadata["annotations"] = dict(annotations)
        return {"metadata": metadata, **switch}


def _epoch(stamp: str | None) -> float | None:
    """An RFC 3339 time as epoch seconds; None when absent or unreadable (someone edited it)."""
    try:
        moment = datetime.fromisoformat(stamp) if stamp else None
    except ValueError:
        return None
    return moment.timestamp() if moment is not None and moment.tzinfo is not None else None


# A member's place among its group's pods: (part, major, minor), compared as a tuple.
Rank = tuple[str, int, int]


@dataclass(frozen=True)
class Integration:
    """One workload kind. A kind leaves empty what it has no use for.

    - `sources`: the values of `gangkeeper.io/group-source` its members get;
    - `group_of`: the webhook's rule, from the pod alone (None: its pods carry no mark of their own);
    - `resource`, `declaration`: the object the controller lists and watches, and what it reads off it;
    - `verbs`, `status_verbs`: what the controller does on `resource` (and its status) today;
    - `declarer`, `kept_labels`: which object declares a member's group size, from the member's
      group, the `kept_labels` of its labels and its controlling owner;
    - `owns_pods`: that object owns the members (itself or through its Jobs or StatefulSets) and is
      found by name and by the proof the `declarer` gives (its UID, the owner in between, or None:
      the members carry neither, found by name); only its own pods are members (a pod that labels
      itself into the group is set apart);
    - `part_label`: the member label whose value says its part when the object splits its group (`parts`);
    - `suspension`: how the owner is suspended and resumed; None when the kind has no such switch;
    - `names_group`: where a pod names its group by this kind's rule, as (`labels` or
      `annotations`, key): the webhook refuses a pod whose such declarations name different groups;
    - `rank`: a member's place in its group's order as the kind numbers its pods, from its labels
      and annotations: (part, major, minor), None when the pod carries no index of the kind's.
    """

    sources: tuple[str, ...]
    group_of: Callable[[Mapping], Classification | None] | None = None
    resource: Resource | None = None
    declaration: Callable[[Mapping], Declaration] | None = None
    verbs: frozenset[str] = frozenset()
    status_verbs: frozenset[str] = frozenset()
    declarer: Declarer | None = None
    kept_labels: tuple[str, ...] = ()
    owns_pods: bool = False
    part_label: str | None = None
    suspension: Suspension | None = None
    names_group: tuple[tuple[str, str], ...] = ()
    rank: Callable[[Mapping[str, str], Mapping[str, str]], Rank | None] | None = None


# What the controller's informers do on every resource they fill the cache from.
LIST_AND_WATCH = frozenset({"list", "watch"})
# And on an owner it suspends and resumes (a merge patch).
SUSPEND_VERBS = LIST_AND_WATCH | {"patch"}


def declared_by_owner(group: str, labels: Mapping[str, str], owner: tuple[str, str] | None) -> ObjectRef | None:
    """A `declarer` for kinds whose object is the members' controlling owner (PyTorchJob, Job)."""
    return owner


def as_tree(declared: Declaration, owner: Mapping, children: int) -> None:
    """What an owner asking to be a tree of its groups (annotation `gangkeeper.io/tree`: a JobSet's
    replicated jobs, a LeaderWorkerSet's replica groups) declares of the parent Gang the controller
    makes for it, added to `declared`: its name (the owner's), its min group count
    (`gangkeeper.io/min-group-count`, else all `children`; 0 when it is no whole number, which the
    controller refuses) and its topology (the owner's own `gangkeeper.io/topology-required`, `-preferred`)."""
    metadata = owner.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    count = annotations.get(names.MIN_GROUP_COUNT_ANNOTATION)
    declared["parent"] = metadata.get("name", "")
    declared["topology"] = {field: annotations[key] for field, key in (
        ("required", names.TOPOLOGY_REQUIRED_ANNOTATION), ("preferred", names.TOPOLOGY_PREFERRED_ANNOTATION))
        if key in annotations}
    declared["min_group_count"] = children if count is None else int(count) if count.isdigit() else 0
