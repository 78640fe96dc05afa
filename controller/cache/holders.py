"""The work that holds capacity, as preemption weighs it (`planning.preemption`): each group whose
live members hold capacity, taken whole, and each pod outside any group bound to a node, with
the PodDisruptionBudgets selecting it. The index lists them (`ClusterIndex.preemption_candidates`).

A running group with more members bound than its min count has elastic extras: those beyond it,
the last in the group's order (`rank_order`: a PyTorchJob's highest-indexed workers, never its
master or `worker-0`, where an elastic job's rendezvous is), each a candidate of its own that may
be taken while the group keeps running. The group's own candidate is then the rest of it; taking
it takes its extras too.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from math import ceil

from gangkeeper.controller.cache.budgets import Budgets
from gangkeeper.controller.cache.capacity import Ledger
from gangkeeper.controller.model.members import Group, GroupKey, Member, rank_order
from gangkeeper.controller.model.objects import Budget


@dataclass(frozen=True, slots=True)
class Candidate:
    """Work that may be preempted: a group (`group` is its key) or one lone pod (`group` None).
    `members` are the pods that hold capacity, each bound or reserved on a node. An elastic extra
    (`extra`) is one member of a running group beyond its min count, `place` the members after
    it in the group's order (0: the last)."""

    group: GroupKey | None
    members: tuple[Member, ...]
    priority: int
    accelerators: int
    started: float  # when its oldest member was created
    budgets: tuple[Budget, ...] = ()  # the PodDisruptionBudgets selecting a lone pod
    extra: bool = False
    place: int = 0
    together: tuple[GroupKey, ...] = ()  # the other groups taken with it: the children of one tree
    tree: str = ""  # the parent Gang of the tree it stands for

    @property
    def name(self) -> str:
        member = self.members[0]
        if self.extra and self.group is not None:
            return f"{member.namespace}/{member.name} (beyond the min count of {self.group[1]})"
        if self.tree and self.group is not None:
            return f"{self.group[0]}/{self.tree} (tree of {', '.join(key[1] for key in (self.group, *self.together))})"
        if self.group is not None:
            return f"{self.group[0]}/{self.group[1]}"
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


def holders(groups: Sequence[Group], lone: Iterable[Member], ledger: Ledger,
            budgets: Budgets | None = None, trees: Mapping[GroupKey, str] | None = None) -> list[Candidate]:
    """Every candidate: one per group holding capacity (one per tree for the groups `trees` names
    the parent of) and one per elastic extra of it, one per lone pod bound (with the budgets selecting it)."""
    found: list[Candidate | None] = []
    children: dict[tuple[str, str], list[Candidate]] = {}
    for group in groups:
        extras = elastic_extras(group)
        taken_alone = {m.uid for m in extras}
        whole = candidate(group.key, [m for m in group.members if m.uid not in taken_alone], ledger)
        tree = (trees or {}).get(group.key)
        if tree is not None and whole is not None:
            children.setdefault((group.key[0], tree), []).append(whole)
        else:
            found.append(whole)
        found += [replace(single, extra=True, place=place) for place, member in enumerate(extras)
                  if (single := candidate(group.key, (member,), ledger)) is not None]
    for (_, tree), parts in children.items():
        parts.sort(key=lambda c: c.group or ("", ""))
        first = parts[0]
        found.append(replace(first, members=tuple(m for c in parts for m in c.members),
                             priority=max(c.priority for c in parts), accelerators=sum(c.accelerators for c in parts),
                             started=min(c.started for c in parts),
                             together=tuple(c.group for c in parts[1:] if c.group is not None), tree=tree))
    found += [candidate(None, (member,), ledger, budgets.covering(member) if budgets is not None else ())
              for member in lone if member.node]
    return [c for c in found if c is not None]


def elastic_extras(group: Group) -> list[Member]:
    """The members bound beyond the group's min count, the last in its order first; none for a
    group of no known size (a problem: its min count is 0)."""
    holding = [m for m in group.members if not m.terminal and not m.terminating and (m.node or m.reserved_node)]
    spare = len(holding) - group.min_count
    if group.min_count <= 0 or spare <= 0:
        return []
    return [m for m in reversed(rank_order(holding)) if m.node][:spare]
