"""Members and groups: a pod of a group as placement reads it (`Member`), and the group it belongs
to with the size its owner declares (`Group`), with the topology the group asks for."""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

import msgspec

from gangkeeper.controller.model.nodes import Toleration
from gangkeeper.controller.model.rules import PodRules
from gangkeeper.controller.model.selectors import Term

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
class TopologyRule:
    """Where a group's members must or should sit, each a node label key naming the domains
    (`gangkeeper.io/topology-*` on the members, or a Gang's `spec.topology`):

      - `required`: every member on nodes sharing one value of it (nodes without it never qualify);
      - `preferred`: one domain of it when the group fits in one, else as few as possible
        (inside the required domain when both are set);
      - `slice_required` with `slice_size`: members in consecutive slices of `slice_size`, ordered
        by `Member.rank` and then name (`rank_order`), each slice inside one domain of it.

    A group's rule (`Group.topology`) is set only when `controller.cache.groups` found it consistent and
    valid: label keys, both slice fields or neither, a slice size dividing the group's min count.
    """

    required: str | None = None
    preferred: str | None = None
    slice_required: str | None = None
    slice_size: int | None = None

    def __bool__(self) -> bool:
        return any(value is not None for value in (self.required, self.preferred, self.slice_required))


NO_TOPOLOGY = TopologyRule()


class Member(msgspec.Struct, frozen=True, gc=False):
    """A pod of a group. `affinity_terms` is None when the pod has no required node affinity.

    `labels` and `rules` (required pod affinity and anti-affinity, spread constraints, host
    ports: `model.rules`; None only for members built by hand without them) are what
    the pods around it see of it and ask of them; `claims` its DRA ResourceClaims, resolved
    against the cluster's claims and templates when it is planned (`controller.cache.occupancy`);
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
    labels: Mapping[str, str] = NO_LABELS
    rules: PodRules | None = None
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
    when a member's PriorityClass says `preemptionPolicy: Never`. `max_count`, when its owner
    runs with fewer than all its pods between bounds of its own (an elastic job), is the most
    members placed at once (never below `min_count`); None: every member.
    """

    key: GroupKey
    members: tuple[Member, ...]
    min_count: int
    priority: int
    first_seen: float
    schedule_timeout_seconds: float | None = None
    preempts: bool = True
    topology: TopologyRule = NO_TOPOLOGY  # as the members or the group's Gang declare it
    max_count: int | None = None

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


# The first element of a rank: members with an index come first, in index order; the others by name.
INDEXED, UNINDEXED = 0, 1
UNRANKED = (UNINDEXED, "", 0, 0)  # the rank of every pod without an index (`reading.pods.member_rank`)


def rank_order(members: Iterable[Member]) -> list[Member]:
    """Members in their group's order, the order slices follow: by rank, then by name."""
    return sorted(members, key=lambda member: (member.rank, member.name))
