"""What planning answers for a group: a node for every waiting member (`Plan`), or why not
(`NoFit`); and the cluster's topology labels (`Topology`) a group without a rule of its own is
kept inside when it fits there."""

from dataclasses import dataclass

from gangkeeper.controller.model.members import GroupKey, Member
from gangkeeper.names import ZONE_LABEL

Assignment = tuple[Member, str]
Domain = tuple[str, str] | None
Scope = frozenset[str] | None  # the nodes a placement may use; None: every node


@dataclass(frozen=True, slots=True)
class Topology:
    """Node labels naming the domains a group should stay inside."""

    zone_label: str | None = ZONE_LABEL  # None: no zones
    rack_label: str | None = None

    @property
    def labels(self) -> tuple[str, ...]:
        """Finest first: a rack lies inside a zone."""
        return tuple(label for label in (self.rack_label, self.zone_label) if label)


@dataclass(frozen=True, slots=True)
class Plan:
    """A node for every waiting member; `domain` is `label=value` when the group stays in one."""

    group: GroupKey
    assignments: tuple[Assignment, ...]
    domain: str | None = None

    @property
    def nodes(self) -> frozenset[str]:
        return frozenset(node for _, node in self.assignments)


@dataclass(frozen=True, slots=True)
class NoFit:
    """Why the group cannot be placed now, in words its owner can act on.

    `partial` is where the `placeable` members would go: the queue holds that capacity for a
    group that has starved. `fixed`: what keeps it out is bound to objects that exist (a volume
    or a device claim already on a node, pods it must sit beside), so that no new node would help.
    """

    group: GroupKey
    reason: str
    limiting: tuple[str, ...]
    placeable: int
    needed: int
    partial: tuple[Assignment, ...] = ()
    fixed: bool = False
