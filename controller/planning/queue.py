"""Which waiting groups one planning pass admits, and why the others wait (docs/design.md, "Queue").

The queue holds the groups that are complete (at least min count live members, every one
gated) and still have waiting members, ordered by priority (highest first), then by when the
group was first seen (oldest first), then by key so that a pass is deterministic. Groups with
no waiting member are in flight (reserved, released or bound) and are not the queue's business.

Groups are planned in queue order on a copy of the ledger (and of the occupancy: devices and
neighbours); each admitted plan is counted there as reserved, so one pass never books the same
capacity twice. The caller's ledger is untouched; the copies, with every admitted plan and the
held capacity counted, are handed back in the `Pass`
so that the caller can plan more (one member at a time for elastic groups) without another copy.

A tree of groups (`planning.trees`) is one entry of the queue, planned, held, preempting and
reused as one, by its most important child's priority and its oldest child's age.

StrictFIFO: the first group that does not fit stops the pass; every group behind it waits.

BestEffortFIFO, the exact rule:
  - A group that does not fit is skipped; groups behind it may still be admitted.
  - The first group in queue order that does not fit and has waited `starvation_seconds` or
    more (now − first_seen) is the starving head. Those of its members that fit now are placed
    tentatively (`NoFit.partial`) and that capacity counts as taken for the rest of the pass:
    groups behind the head are admitted only if they fit without it. Passes recompute the hold
    from the ledger, so capacity that frees goes to the head, pass after pass, until it fits.
  - A group that would not fit even on the empty cluster (`planning.bounds`) is never the head:
    its hold would starve the groups behind it for nothing. It waits, and its reason says why.
  - One head is held at a time: two holds could split what frees between two starving groups
    and leave both waiting forever — the deadlock gangs exist to prevent. Groups ahead of the
    head in queue order were planned before it and are not affected.

Preemption (given `candidates(below)`, the work that holds capacity at a priority below `below`;
asked once, for the first group that asks, which has the highest priority of those that may: the
queue is in priority order): the first group in queue order
that does not fit and may preempt (`Group.preempts`, some candidate of lower priority) asks
`planning.preemption` for victims; if taking every candidate would not make it fit, the next
such group asks, up to `PREEMPTION_ATTEMPTS` a pass, so the pass stays bounded; one preempts. When it finds some, its plan is counted like
an admitted one — on top of the victims, which hold their capacity until they are gone — and the
pass goes on as if the group had been admitted (`Pass.preemptions`).

Reuse (`Planned`): planning a group reads the group, the nodes, the topology, and the ledger and
occupancy as the pass has changed them so far. When none of those differs from the last pass,
the planner's answer cannot differ either, and the last one is kept without planning again: a
pass over 2,000 groups that wait while nothing happens costs O(groups), not O(groups × nodes).
Exactly safe because:
  - the caller names the state of what it plans on (`basis`: the index's version, which moves
    with every pod, node and device change applied, and so with every node pool rebuilt); a
    different basis, or another topology, reuses nothing;
  - what a pass does to its working copies before a group is planned is a list of steps (a plan
    admitted, a preemptor's plan, the starving head's hold), each recorded with its outcome. A
    group's answer is reused only while this pass's steps so far are, one for one, those taken
    before the group last time; from the first step that differs (a group admitted earlier in
    the queue, another head held, a preemption, a group gone or come that took capacity), every
    later group is planned again. Groups that took nothing do not matter to those behind them;
  - time changes what the pass does, never what the planner answers: backoff, schedule timeouts
    and suspension decide which groups enter the queue (a group that leaves or enters it either
    took capacity, which the steps show, or did not, which changes nothing for the others); the
    starving head is chosen from `now` after planning, and its hold is a step; preemption is
    decided anew each pass from the (reused) NoFit and the index's candidates;
  - StrictFIFO stops at the first NoFit, reused or not, as it stops at a planned one;
  - the planner leaves the ledger and occupancy as it found them, so a group not planned again
    leaves nothing out that a later group would read.
"""

import enum
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from gangkeeper.controller.cache.capacity import Ledger
from gangkeeper.controller.cache.holders import Candidate
from gangkeeper.controller.cache.occupancy import Occupancy
from gangkeeper.controller.checks.eligibility import NodePool
from gangkeeper.controller.model.members import Group, GroupKey
from gangkeeper.controller.planning.bounds import beyond_the_cluster
from gangkeeper.controller.planning.planner import apply
from gangkeeper.controller.planning.plans import NoFit, Plan, Topology
from gangkeeper.controller.planning.preemption import Preemption, preempt
from gangkeeper.controller.planning.trees import Tree, Unit, plan_unit

PREEMPTION_ATTEMPTS = 3  # groups that may look for victims in one pass; one of them preempts at most


class Order(enum.Enum):
    BEST_EFFORT_FIFO = "BestEffortFIFO"
    STRICT_FIFO = "StrictFIFO"


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    order: Order = Order.BEST_EFFORT_FIFO
    starvation_seconds: float = 300.0
    topology: Topology = field(default_factory=Topology)


@dataclass(frozen=True, slots=True)
class Waiting:
    """A group (or a tree of groups) left waiting, why, and the planner's answer when it was planned at all."""

    group: Unit
    reason: str
    no_fit: NoFit | None = None


Step = tuple[str, GroupKey, Plan | NoFit]  # what a pass did to its working copies: admit, preempt or hold


@dataclass(frozen=True, slots=True)
class Planned:
    """What a pass planned, for the next one to reuse while nothing it read changed (module docstring).

    `answers` holds, by group key, the group as planned, how many `steps` came before it, and the
    planner's answer."""

    basis: Hashable
    topology: Topology
    steps: tuple[Step, ...]
    answers: Mapping[GroupKey, tuple[Unit, int, Plan | NoFit]]


@dataclass(frozen=True, slots=True)
class Pass:
    admitted: tuple[tuple[Unit, Plan], ...]
    waiting: tuple[Waiting, ...]
    held_for: Unit | None
    ledger: Ledger
    occupancy: Occupancy | None = None
    preemptions: tuple[tuple[Unit, Preemption], ...] = ()
    planned: Planned | None = None


Queued = TypeVar("Queued", Group, Unit)


def queued(groups: Iterable[Queued]) -> list[Queued]:
    """The complete groups (and trees: `planning.trees`) with waiting members, in admission order."""
    ready = [group for group in groups if group.complete and group.waiting_members]
    return sorted(ready, key=lambda group: (-group.priority, group.first_seen, group.key))


def incomplete_reason(group: Unit) -> str:
    if isinstance(group, Tree):
        return group.missing()
    live = [member for member in group.members if not member.terminal]
    ungated = [member.name for member in live if not member.gated]
    if len(live) < group.min_count:
        return f"{len(live)} of min count {group.min_count} members present"
    return f"members already released: {', '.join(sorted(ungated)[:5])}"


def admission_view(group: Group) -> Group:
    """The members the queue should place: min count of them, counting those already reserved.

    An elastic group is admitted with its min count; the rest follow one at a time.
    """
    live = [m for m in group.members if not m.terminal]
    if len(live) <= group.min_count:
        return group
    booked = [m for m in live if not m.waiting]
    waiting = [m for m in live if m.waiting]
    return replace(group, members=tuple(booked + waiting[:max(0, group.min_count - len(booked))]))


def plan_pass(groups: Iterable[Unit], nodes: NodePool, ledger: Ledger, now: float,
              policy: QueuePolicy = QueuePolicy(), occupancy: Occupancy | None = None,
              candidates: Callable[[int], Iterable[Candidate]] | None = None, *,
              basis: Hashable | None = None, last: Planned | None = None) -> Pass:
    """One pass over the queue (module docstring); `candidates`, asked at most once, enables preemption.

    Given `basis`, naming the state of `nodes`, `ledger` and `occupancy` (the caller changes it
    whenever any of them changes), the pass reuses `last`'s answers where nothing they read
    changed and hands back its own in `Pass.planned`."""
    groups = list(groups)
    order = queued(groups)
    in_queue = {group.key for group in order}
    waiting = [Waiting(group, incomplete_reason(group)) for group in groups
               if group.key not in in_queue and group.waiting_members]
    working = ledger.copy()
    if occupancy is not None:
        occupancy.index_rooms((member for group in order for member in group.waiting_members), nodes)
    around = None if occupancy is None else occupancy.copy()
    admitted: list[tuple[Unit, Plan]] = []
    preemptions: list[tuple[Unit, Preemption]] = []
    weighed: list[Candidate] | None = None
    attempts = 0  # groups that asked for victims this pass
    head: Unit | None = None
    reuse = _Reuse(last if basis is not None and last is not None and last.basis == basis
                   and last.topology == policy.topology else None)
    for position, group in enumerate(order):
        outcome = reuse.answer(group)
        if outcome is None:
            outcome = plan_unit(group, nodes, working, policy.topology, around)
        reuse.planned(group, outcome)
        if isinstance(outcome, Plan):
            apply(outcome, working, around, nodes)
            reuse.step("admit", group, outcome)
            admitted.append((group, outcome))
            continue
        if candidates is not None and not preemptions and attempts < PREEMPTION_ATTEMPTS and group.preempts:
            weighed = list(candidates(group.priority)) if weighed is None else weighed
            outranks = any(c.priority < group.priority for c in weighed)
            attempts += outranks
            found = preempt(group, weighed, nodes, working, policy.topology, around) if outranks else None
            if found is not None:
                apply(found.plan, working, around, nodes)
                reuse.step("preempt", group, found.plan)
                preemptions.append((group, found))
                continue
        held = f"; capacity is held for {head}, starving since it waited {policy.starvation_seconds:g}s" if head else ""
        starving = head is None and now - group.first_seen >= policy.starvation_seconds
        beyond = beyond_the_cluster(group, nodes, ledger) if starving and isinstance(group, Group) else None
        if beyond is not None:
            held = f"; it holds no capacity while it waits: {beyond}"
        waiting.append(Waiting(group, outcome.reason + held, outcome))
        if policy.order is Order.STRICT_FIFO:
            waiting += [Waiting(later, f"behind {group} in StrictFIFO order") for later in order[position + 1:]]
            break
        if starving and beyond is None:
            head = group
            apply(outcome, working, around, nodes)
            reuse.step("hold", group, outcome)
    planned = None if basis is None else Planned(basis, policy.topology, tuple(reuse.steps), reuse.answers)
    return Pass(tuple(admitted), tuple(waiting), head, working, around, tuple(preemptions), planned)


class _Reuse:
    """The last pass's answers, kept while this pass takes the same steps (module docstring, "Reuse")."""

    __slots__ = ("last", "steps", "answers")

    def __init__(self, last: Planned | None):
        self.last = last
        self.steps: list[Step] = []
        self.answers: dict[GroupKey, tuple[Unit, int, Plan | NoFit]] = {}

    def answer(self, group: Unit) -> Plan | NoFit | None:
        """The last pass's answer for the group, when it was planned on what it would be planned on now."""
        if self.last is None:
            return None
        before = self.last.answers.get(group.key)
        if before is None or before[1] != len(self.steps) or before[0] != group:
            return None
        return before[2]

    def planned(self, group: Unit, outcome: Plan | NoFit) -> None:
        self.answers[group.key] = (group, len(self.steps), outcome)

    def step(self, kind: str, group: Unit, outcome: Plan | NoFit) -> None:
        """A change to the working copies; the first one that differs from the last pass's ends reuse."""
        taken = (kind, group.key, outcome)
        position = len(self.steps)
        self.steps.append(taken)
        if self.last is not None and (position >= len(self.last.steps) or self.last.steps[position] != taken):
            self.last = None
