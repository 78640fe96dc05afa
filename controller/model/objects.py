"""What the cache keeps of the API objects the informers read, besides nodes: a pod's facts
(`PodFacts`, around its `Member`), an object that declares a group's size (`Workload`), and a
PodDisruptionBudget (`Budget`). Small frozen values made once per object (`controller.reading`).
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Never

import msgspec

from gangkeeper.controller.model.members import Member
from gangkeeper.controller.model.selectors import LabelSelector
from gangkeeper.integrations.kind import SuspendState

_NO_FIELDS: Mapping[str, Never] = MappingProxyType({})  # empty: a mapping of any values


@dataclass(frozen=True, slots=True)
class Owner:
    """The controlling owner of a pod, or the workload a Gang is owned by."""

    api_version: str
    kind: str
    name: str
    uid: str


class PodFacts(msgspec.Struct, frozen=True, gc=False):
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
    # The most pods per part it runs at once, where its kind runs with fewer between bounds (`Declaration`).
    maxima: Mapping[str, int] = field(default_factory=lambda: _NO_FIELDS)
    # Which part each value of its kind's part label belongs to, when its parts start apart (else one group).
    parts: Mapping[str, str] = field(default_factory=lambda: _NO_FIELDS)
    group_name: str = ""
    schedule_timeout: float | None = None
    topology: Mapping[str, object] = field(default_factory=lambda: _NO_FIELDS)  # a Gang's spec.topology, as written
    parent: str = ""  # a Gang's spec.parent, another kind's label gangkeeper.io/parent: its group's parent Gang
    min_group_count: int | None = None  # a parent Gang's spec.minGroupCount (None: the Gang is no parent)
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
    def is_parent(self) -> bool:
        """A Gang with children rather than members of its own (`spec.minGroupCount`)."""
        return self.min_group_count is not None

    @property
    def owner(self) -> Owner:
        return Owner(self.api_version, self.kind, self.name, self.uid)


@dataclass(frozen=True, slots=True)
class Budget:
    """One PodDisruptionBudget: its namespace and name, whom it selects, and how many of those
    pods the Eviction API lets go now."""

    namespace: str
    name: str
    selector: LabelSelector
    allowed: int

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def selects(self, member: Member) -> bool:
        return member.namespace == self.namespace and self.selector.matches(member.labels)


WorkloadKey = tuple[str, str, str]  # (resource, namespace, name)
WorkloadIndex = Mapping[WorkloadKey, Workload]
