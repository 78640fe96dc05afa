"""Which lower-priority work a group that does not fit takes the place of (docs/design.md, "Preemption").

The kube-scheduler preempts pod by pod, so it can take one member of a running group and leave
the rest holding accelerators. gangkeeper chooses its victims as the scheduler chooses pods, but
by whole groups:

  - a candidate is a running group of strictly lower priority, taken whole (every live member
    that holds capacity: bound or reserved) or not at all, or a pod outside any group (a lone
    pod, a pod of a namespace gangkeeper does not enforce) of strictly lower priority, bound;
  - or one elastic extra of such a group, a member bound beyond its min count (`cache.holders`):
    taking it stops no work, the group runs on with fewer. Extras are taken before any whole
    group or lone pod, whatever their priorities (the least important of all, the last in their
    group's order first), and a victim set of extras alone is cheaper than any that stops work;
    a group taken whole takes its extras with it;
  - a tree of groups (`planning.trees`) preempts as one, its plan the tree's, and is taken as one:
    its children holding capacity are one candidate (`cache.holders`);
  - every candidate is taken away at once; when the group does not fit even then, nothing is
    taken. Otherwise candidates are given back, the most important first, and each one stays
    given back when the group still fits without it: the scheduler's reprieve. Importance is
    priority, then accelerators held, then pods, then age (the oldest has done the most work).
    The reprieve is run twice, within a priority once the largest and once the smallest given
    back first (one large group on one node against several small pods on another, as the
    scheduler weighs node against node), and the cheaper set is taken: the lowest highest
    priority, then the fewest accelerators, then the fewest pods, then the youngest (the least
    work lost);
  - at most `MAX_CANDIDATES` candidates are weighed, the least important ones, and as many
    extras, and only those holding what the group asks for (its accelerators, when it asks for
    any) on nodes some waiting member may use (with the extras of every group weighed whole);
  - PodDisruptionBudgets (`cache.budgets`): a lone pod more than one budget selects is no
    candidate (the Eviction API refuses it always); the pods whose eviction a budget would refuse
    (the least important beyond what it allows, as the scheduler counts them) are given back
    before any other, and when the victims left still need more than a budget allows, nothing is
    preempted: the Eviction API would refuse them, and the room would never come free.

Pure: the ledger and occupancy given are copied, never changed.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gangkeeper.controller.cache.capacity import Ledger
from gangkeeper.controller.cache.holders import Candidate
from gangkeeper.controller.cache.occupancy import Occupancy
from gangkeeper.controller.checks.eligibility import NodePool
from gangkeeper.controller.model.members import GroupKey
from gangkeeper.controller.planning.plans import Plan, Topology
from gangkeeper.controller.planning.trees import Unit, plan_unit

MAX_CANDIDATES = 64


@dataclass(frozen=True, slots=True)
class Preemption:
    """The plan that fits once the victims are gone, and the victims, least important first."""

    plan: Plan
    victims: tuple[Candidate, ...]


def preempt(group: Unit, candidates: Iterable[Candidate], pool: NodePool, ledger: Ledger,
            topology: Topology = Topology(), occupancy: Occupancy | None = None) -> Preemption | None:
    """The victims whose going makes room for `group`, and its plan then; None when the group
    may not preempt, or when taking every candidate of lower priority is not enough."""
    if not group.preempts:
        return None
    weighed = _weighed(group, candidates, pool, ledger)
    if not weighed:
        return None
    working, around = _without(weighed, ledger, occupancy)
    if not isinstance(plan_unit(group, pool, working, topology, around), Plan):
        return None
    violating = _violating(weighed)
    found = [_reprieved(group, weighed, sorted(weighed, key=lambda c: (c.name in violating, *order(c)), reverse=True),
                        pool, ledger, topology, occupancy) for order in (_importance, _smallest_spared)]
    victims = min((taken for taken in found if not _violating(taken)), key=_cost, default=None)
    if victims is None:
        return None
    working, around = _without(victims, ledger, occupancy)
    plan = plan_unit(group, pool, working, topology, around)
    assert isinstance(plan, Plan)  # the set taken is one just found to fit
    return Preemption(plan, tuple(sorted(victims, key=_importance)))


def _without(victims: Iterable[Candidate], ledger: Ledger, occupancy: Occupancy | None) -> tuple:
    """Copies of the ledger and occupancy with the victims taken away."""
    working, around = ledger.copy(), occupancy.copy() if occupancy is not None else None
    for victim in victims:
        _take(victim, working, around)
    return working, around


def _reprieved(group: Unit, weighed: list[Candidate], order: list[Candidate], pool: NodePool, ledger: Ledger,
               topology: Topology, occupancy: Occupancy | None) -> list[Candidate]:
    """The victims left once candidates are given back in `order`, each staying given back when
    the group still fits without it (every candidate taken fits, as the caller checked); an extra
    of a group taken whole stays taken with it (`order` comes to the extras last)."""
    working, around = _without(weighed, ledger, occupancy)
    victims: list[Candidate] = []
    whole: set[GroupKey | None] = set()  # the groups taken whole so far
    for victim in order:
        if victim.extra and victim.group in whole:
            victims.append(victim)
            continue
        _give_back(victim, working, around, pool)
        if not isinstance(plan_unit(group, pool, working, topology, around), Plan):
            _take(victim, working, around)
            victims.append(victim)
            if not victim.extra:
                whole.update((victim.group, *victim.together))
    return victims


def _weighed(group: Unit, candidates: Iterable[Candidate], pool: NodePool, ledger: Ledger) -> list[Candidate]:
    """The least important candidates of lower priority that hold what the group asks for (its
    accelerators when it asks for any: a node agent with none frees nothing it needs) where it may go."""
    usable: set[str] = set()
    wanted: set[str] = set()
    for member in group.waiting_members:
        usable |= pool.eligible(member)
        wanted |= {name for name, value in member.requests.items() if value > 0 and name != "pods"}
    needs = {name for name in wanted if ledger.is_accelerator(name)} or wanted
    candidates = list(candidates)
    own = {m.uid for m in group.members}  # a tree's children already placed are its own, no victims
    lower = sorted((c for c in candidates if c.priority < group.priority and c.group != group.key
                    and own.isdisjoint(m.uid for m in c.members)
                    and len(c.budgets) <= 1 and any((m.node or m.reserved_node) in usable for m in c.members)
                    and any(m.requests.get(name, 0) > 0 for m in c.members for name in needs)), key=_importance)
    whole = [c for c in lower if not c.extra][:MAX_CANDIDATES]
    extras = [c for c in lower if c.extra][:MAX_CANDIDATES]
    taken_with = {key for c in whole if c.group is not None for key in (c.group, *c.together)}
    weighed_alone = {c.name for c in extras}
    extras += [c for c in candidates if c.extra and c.group in taken_with and c.name not in weighed_alone]
    return sorted(extras + whole, key=_importance)


def _violating(victims: Iterable[Candidate]) -> set[str]:
    """The names of the victims whose eviction a budget would refuse: the budget's allowance goes
    to the most important of the pods it selects first (the scheduler's count), the rest violate it."""
    left: dict[str, int] = {}
    violating = set()
    for victim in sorted(victims, key=_importance, reverse=True):
        for budget in victim.budgets:
            left[budget.key] = left.get(budget.key, budget.allowed) - 1
            if left[budget.key] < 0:
                violating.add(victim.name)
    return violating


def _smallest_spared(victim: Candidate) -> tuple:
    """Ascending, like `_importance`, but within a priority the smallest last: given back first,
    so that one large victim is weighed against several small ones."""
    return (not victim.extra, victim.priority, -victim.accelerators, -len(victim.members), victim.place,
            -victim.started, victim.name)


def _cost(victims: Sequence[Candidate]) -> tuple:
    """What taking `victims` costs, the cheapest least: whether it stops work (extras alone do
    not), the highest priority taken, then the accelerators and pods taken, then the work lost
    (the youngest set loses the least)."""
    return (any(not v.extra for v in victims), max(v.priority for v in victims), sum(v.accelerators for v in victims),
            sum(len(v.members) for v in victims), -min(v.started for v in victims))


def _importance(victim: Candidate) -> tuple:
    """Ascending: the first is the cheapest to preempt (an elastic extra, the last of its group
    first; then the lowest priority, fewest accelerators and pods, youngest)."""
    return (not victim.extra, victim.priority, victim.accelerators, len(victim.members), victim.place,
            -victim.started, victim.name)


def _take(victim: Candidate, ledger: Ledger, occupancy: Occupancy | None) -> None:
    for member in victim.members:
        ledger.forget(member.uid)
        if occupancy is not None:
            occupancy.uncount(member.uid)


def _give_back(victim: Candidate, ledger: Ledger, occupancy: Occupancy | None, pool: NodePool) -> None:
    for member in victim.members:
        if member.node:
            ledger.bind(member.uid, member.node, member.requests)
        elif member.reserved_node:
            ledger.reserve(member.uid, member.reserved_node, member.requests)
        if occupancy is not None:
            occupancy.count(member, pool.nodes)
