"""Where each waiting member of a group goes: all of them, or none of them.

`plan_group` places every waiting member (gated, nothing reserved) on a node that passes
`eligibility.placement_refusal` and has room for all its requests plus a pod slot, counting
what the same plan already put on that node, so that no resource of any node is over-committed.
Members already reserved keep their reservation (it is in the ledger): after a restart in the
middle of writing reservations, planning the group again places only the rest.

A group without a topology rule of its own is kept, when it fits there, inside one domain of the
cluster's `Topology`: the finest label first (rack, then zone), and among domains of one label
the one with the fewest accelerators to spare; a group with spread constraints is not kept
inside one domain. Inside a domain, or anywhere, the members are packed (`planning.packing`,
class by class: `planning.classes`), those with the most accelerators each first; a group that
does not fit in that order is tried again with the classes that have the fewest eligible nodes
first, before it is refused. The packing is greedy: a group of unlike members may still be
refused where another packing would hold it. A group that declares its own rule (`Group.topology`) is
placed by it instead (`planning.rule_search`). A group that does not fit gets a `NoFit` saying
why (`planning.nofit`). Everything placed while planning is taken out again: `apply` counts an
admitted plan.
"""

from collections import Counter
from collections.abc import Sequence

from gangkeeper.controller.cache.capacity import Ledger
from gangkeeper.controller.cache.occupancy import Occupancy
from gangkeeper.controller.checks.eligibility import NodePool
from gangkeeper.controller.model.members import Group
from gangkeeper.controller.planning.classes import (
    MemberClass,
    confined,
    device_bound,
    devices_of,
    fits_somewhere,
    member_classes,
    one_by_one,
)
from gangkeeper.controller.planning.nofit import no_fit
from gangkeeper.controller.planning.packing import place
from gangkeeper.controller.planning.plans import Assignment, Domain, NoFit, Plan, Scope, Topology
from gangkeeper.controller.planning.rule_search import plan_by_rule


def plan_group(group: Group, pool: NodePool, ledger: Ledger, topology: Topology = Topology(),
               occupancy: Occupancy | None = None, within: Scope = None) -> Plan | NoFit:
    """Without `occupancy`, only resources and each node's own rules decide (devices, the pods
    around a member and its volumes are not looked at). Given `within`, only those nodes are used
    (a child of a tree, inside its parent's domain: `planning.trees`). The ledger and occupancy
    are left as they were."""
    members = group.waiting_members
    classes = member_classes(members, pool, ledger, occupancy)
    if within is not None:
        classes = confined(classes, within)
    if group.topology:
        return plan_by_rule(group, classes, pool, ledger, occupancy)
    domains: list[Domain] = _domains(classes, pool, topology) if fits_somewhere(classes) else [None]
    if occupancy is not None and any(one_by_one(cls, occupancy) for cls in classes):
        domains = _best_per_label(domains)  # placing one by one costs more: the best domain of each level
    elif occupancy is not None and not any(device_bound(cls, occupancy) for cls in classes):
        occupancy = None  # only resources and node rules decide for every member
    constrained = _most_constrained_first(classes)
    assignments: list[Assignment] = []
    for domain in domains:
        assignments = place(classes, pool, ledger, _scope(pool, domain), occupancy)
        if len(assignments) < len(members) and constrained is not None:
            retried = place(constrained, pool, ledger, _scope(pool, domain), occupancy)
            assignments = retried if len(retried) == len(members) else assignments
        if len(assignments) == len(members):
            return Plan(group.key, tuple(assignments), None if domain is None else "=".join(domain))
    return no_fit(group, classes, assignments, pool, ledger, occupancy)


def _most_constrained_first(classes: list[MemberClass]) -> list[MemberClass] | None:
    """The classes with the fewest eligible nodes first, or None when that is the order they
    have. Placing the hardest first can give a node that only one class may use to another that
    had others: then the group is placed again in this order before it is refused (found by
    tests/controller/test_planner_against_emulation.py: a member that tolerates a taint took the
    one untainted node its untolerating peer needed)."""
    constrained = sorted(classes, key=lambda c: len(c.eligible))
    return None if [id(c) for c in constrained] == [id(c) for c in classes] else constrained


def apply(plan: Plan | NoFit, ledger: Ledger, occupancy: Occupancy | None = None, pool: NodePool | None = None) -> None:
    """Count a plan's members as reserved (or a NoFit's placeable ones, to hold their capacity),
    in the ledger and, given one, in the occupancy (`pool` then names the nodes)."""
    placed = plan.assignments if isinstance(plan, Plan) else plan.partial
    with ledger.in_one_go():  # members sharing a node change its figures once
        for member, node in placed:
            ledger.reserve(member.uid, node, member.requests)
    if occupancy is None:
        return
    if pool is None:
        raise TypeError("apply: an occupancy is counted on the nodes of a pool; pass `pool` with it")
    for member, node in placed:
        occupancy.place(member, pool.nodes[node], devices_of(member, occupancy))
    occupancy.serve_extended(ledger, pool.nodes)  # devices the claims now hold serve no extended resource there


def _domains(classes: Sequence[MemberClass], pool: NodePool, topology: Topology) -> list[Domain]:
    """Domains with enough free accelerators for every class, preferred first; then anywhere.
    Members with topology spread constraints asked to be spread: no domain is preferred for them."""
    if any(c.members[0].rules and c.members[0].rules.spread for c in classes):
        return [None]
    packed = [c for c in classes if c.accelerator]
    preferred: list[Domain] = []
    for label in topology.labels:
        members_room: dict[str, list[int]] = {}
        spare: Counter = Counter()
        for index, cls in enumerate(packed):
            for free, names in cls.room.items():
                for value, nodes in pool.labelled(label, names, (cls.accelerator, free)).items():
                    if value is not None:
                        members_room.setdefault(value, [0] * len(packed))[index] += free // cls.per_member * nodes
                        spare[value] += free * nodes
        fitting = [value for value, room in members_room.items()
                   if all(r >= len(c.members) for r, c in zip(room, packed))]
        preferred += [(label, value) for value in sorted(fitting, key=lambda v: (spare[v], v))]
    return preferred + [None]


def _best_per_label(domains: list[Domain]) -> list[Domain]:
    best: dict[str, Domain] = {}
    for domain in domains:
        if domain is not None:
            best.setdefault(domain[0], domain)
    return [*best.values(), None]


def _scope(pool: NodePool, domain: Domain) -> Scope:
    return None if domain is None else pool.domains(domain[0]).get(domain[1], frozenset())
