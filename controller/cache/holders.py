"""The work that holds capacity, as preemption weighs it (`planning.preemption`): each group whose
live members hold capacity, taken whole, and each pod outside any group bound to a node, with
the PodDisruptionBudgets selecting it. The index lists them (`ClusterIndex.preemption_candidates`).
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import ceil

from gangkeeper.controller.cache.budgets import Budgets
from gangkeeper.controller.cache.capacity import Ledger
from gangkeeper.controller.model.members import GroupKey, Member
from gangkeeper.controller.model.objects import Budget


@dataclass(frozen=True, slots=True)
class Candidate:
    """Work that may be preempted: a group (`group` is its key) or one lone pod (`group` None).
    `members` are the pods that hold capacity, each bound or reserved on a node."""

    group: GroupKey | None
    members: tuple[Member, ...]
    priority: int
    accelerators: int
    started: float  # when its oldest member was created
    budgets: tuple[Budget, ...] = ()  # the PodDisruptionBudgets selecting a lone pod

    @property
    def name(self) -> str:
        if self.group is not None:
            return f"{self.group[0]}/{self.group[1]}"
        member = self.members[0]
        return f"{member.namespace}/{member.name}"


def candidate(group: GroupKey | None, members: Iterable[Member], ledger: Ledger,
              budgets: tuple[Budget, ...] = ()) -> Candidate | None:
    """The live members holding capacity as one candidate; None when none holds any. Members on
    their way out (terminating: preempted, rolled back, their owner suspended) are no candidates:
    they are going already. `budgets` are those selecting a lone pod."""
    holding = tuple(m for m in members if not m.terminal and not m.terminating and (m.node or m.reserved_node))
    if not holding:
        return None
    held = sum(ceil(value) for m in holding for name, value in m.requests.items() if ledger.is_accelerator(name))
    started = min((m.created for m in holding if m.created is not None), default=0.0)
    return Candidate(group, holding, max(m.priority for m in holding), held, started, budgets)


def holders(groups: Sequence[tuple[GroupKey, Sequence[Member]]], lone: Iterable[Member],
            ledger: Ledger, budgets: Budgets | None = None) -> list[Candidate]:
    """Every candidate: one per group holding capacity, one per lone pod bound (with the budgets
    selecting it)."""
    found = [candidate(key, members, ledger) for key, members in groups]
    found += [candidate(None, (member,), ledger, budgets.covering(member) if budgets is not None else ())
              for member in lone if member.node]
    return [c for c in found if c is not None]
