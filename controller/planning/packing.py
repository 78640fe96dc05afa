"""Placing a group's members inside a scope of nodes (a domain, or anywhere), class by class.

Packing, so that fragments get used and whole nodes stay whole for whole-node jobs:
partly used nodes before untouched ones, a whole node broken into only when the fragments cannot
take the group; within each of the two, when one node holds every member still unplaced, the
tightest such node (fewest free accelerators); otherwise the node holding the most members,
filled as far as it goes (fewest nodes). The nodes come in that order from `planning.shelves`.

Given the occupancy (`cache.occupancy`: devices, the pods around a member, its volumes),
members whose DRA claims or neighbours decide too are placed one at a time, each on the first
node in the same packing order that has the resources, can allocate its devices and whose
neighbours let it in (pod affinity and anti-affinity, DoNotSchedule spread, host ports; a
ScheduleAnyway spread picks the least skewed of the first `SPREAD_CHOICES` such nodes), and each
is counted before the next, so a group's own members keep each other apart. Members of a
volume's claim go only where the volume may be used.
"""

from collections.abc import Iterable, Mapping, Sequence
from itertools import islice

from gangkeeper.controller.cache.capacity import Ledger, members_fitting
from gangkeeper.controller.cache.occupancy import Occupancy
from gangkeeper.controller.checks.eligibility import NodePool
from gangkeeper.controller.checks.interpod.refusal import SPREAD_LABEL_REFUSAL, SPREAD_REFUSAL, spread_penalty
from gangkeeper.controller.model.members import Member
from gangkeeper.controller.model.rules import NO_RULES
from gangkeeper.controller.planning.classes import MemberClass, device_bound, one_by_one
from gangkeeper.controller.planning.plans import Assignment, Scope
from gangkeeper.controller.planning.shelves import Candidates, shelf
from gangkeeper.resources import Resources, add_into, subtract

SPREAD_CHOICES = 64  # nodes that take a member, among which its ScheduleAnyway constraints choose


def place(classes: Sequence[MemberClass], pool: NodePool, ledger: Ledger, scope: Scope,
          occupancy: Occupancy | None) -> list[Assignment]:
    """As many members as fit, class by class, on nodes of the scope (None: anywhere).

    Members are counted in the occupancy as they are placed, so that later members see them
    (anti-affinity among a group's own members), and taken out again before returning; the
    last class placed in batches is not counted, as no member comes after it."""
    assignments: list[Assignment] = []
    try:
        place_into(classes, pool, ledger, scope, occupancy, {}, assignments)
    finally:
        uncount(assignments, occupancy)
    return assignments


def place_into(classes: Sequence[MemberClass], pool: NodePool, ledger: Ledger, scope: Scope, occupancy: Occupancy | None,
               taken: dict[str, Resources], assignments: list[Assignment], count_last: bool = False) -> None:
    """`place`, adding to `taken` (what this plan has put on each node) and `assignments`, and
    leaving the members counted in the occupancy (the last class too with `count_last`)."""
    for position, cls in enumerate(classes):
        if cls.unplaceable:
            continue
        if occupancy is not None and one_by_one(cls, occupancy):
            placed = _place_one_by_one(cls, pool, ledger, taken, scope, occupancy)
        else:
            devices = occupancy if occupancy is not None and device_bound(cls, occupancy) else None
            placed = _place_in_batches(cls, pool, ledger, taken, scope, devices)
            if occupancy is not None and (count_last or position < len(classes) - 1):  # else no one left to see it
                for member, node in placed:
                    occupancy.place(member, pool.nodes[node], cls.device_demand)
        assignments += placed


def uncount(assignments: Iterable[Assignment], occupancy: Occupancy | None) -> None:
    if occupancy is not None:
        for member, _ in assignments:
            occupancy.uncount(member.uid)


def _place_in_batches(cls: MemberClass, pool: NodePool, ledger: Ledger, taken: dict[str, Resources],
                      scope: Scope, devices: Occupancy | None = None) -> list[Assignment]:
    """Members whose neighbours do not matter: as many to a node as it holds, by its resources
    and, given the occupancy, by the devices it can allocate them one after the other."""
    unplaced = list(cls.members)
    assignments: list[Assignment] = []
    candidates = Candidates(cls, pool, ledger, taken, scope, devices)
    while unplaced:
        pick = candidates.pick(len(unplaced))
        if pick is None:
            break
        node, count = pick
        assignments += [(member, node) for member in unplaced[:count]]
        del unplaced[:count]
        add_into(taken.setdefault(node, {}), {r: value * count for r, value in cls.demand.items()})
    return assignments


def _place_one_by_one(cls: MemberClass, pool: NodePool, ledger: Ledger, taken: dict[str, Resources],
                      scope: Scope, occupancy: Occupancy) -> list[Assignment]:
    """Members whose devices or neighbours decide too: each to the first node in packing order
    that has the resources, can allocate its devices, and whose neighbours let it in; each is
    counted in the occupancy before the next is placed."""
    order = _one_by_one_order(cls, pool, ledger, taken, scope, occupancy)
    assignments: list[Assignment] = []
    rules = cls.members[0].rules or NO_RULES
    prefers_spread = bool(rules.soft_spread)
    # A node that cannot take a member cannot take the next one of the class either, as nodes only
    # fill up, unless a DoNotSchedule spread lets a domain in again once the others have caught up.
    rescan = bool(rules.hard_spread)
    spread_keys = tuple(sorted({c.topology_key for c in rules.hard_spread})) if rescan else ()
    domains: dict[int, tuple] = {}  # the spread keys' values of each node looked at, read once
    full: set[int] = set()  # positions out of room: no later member of the class fits there either

    def domain_of(position: int) -> tuple:
        domain = domains.get(position)
        if domain is None:
            labels = pool.nodes[order[position]].labels
            domain = domains[position] = tuple(labels.get(key) for key in spread_keys)
        return domain

    start = 0
    for member in cls.members:
        refused_domains: set[tuple] = set()  # a spread refuses every node of a domain alike

        def takes(position: int) -> bool:
            if rescan and (position in full or domain_of(position) in refused_domains):
                return False
            why = _refusal_of(cls, member, order[position], pool, ledger, taken, occupancy)
            if why in (SPREAD_REFUSAL, SPREAD_LABEL_REFUSAL):
                refused_domains.add(domain_of(position))
            elif why in _OUT_OF_ROOM:
                full.add(position)
            return why is None

        takers = (position for position in range(0 if rescan else start, len(order)) if takes(position))
        if prefers_spread:
            chosen = _least_skewed(member, [order[p] for p in islice(takers, SPREAD_CHOICES)], occupancy)
        else:
            position = next(takers, None)
            chosen = None if position is None else order[position]
            start = start if position is None else position
        if chosen is None:
            break
        assignments.append((member, chosen))
        add_into(taken.setdefault(chosen, {}), cls.demand)
        occupancy.place(member, pool.nodes[chosen], cls.device_demand)
    return assignments


_OUT_OF_ROOM = ("resources", "devices")  # refusals that placing more members of the class never lifts


def _least_skewed(member: Member, takers: Iterable[str], occupancy: Occupancy) -> str | None:
    """Of the first nodes in packing order that take the member, the one its ScheduleAnyway
    spread constraints prefer (lowest skew; the earlier node on a tie)."""
    rules, spread_nodes = member.rules or NO_RULES, occupancy.scope.nodes_for(member)
    scored = [(spread_penalty(rules, member.namespace, member.labels, name, occupancy.placements, spread_nodes),
               position, name) for position, name in enumerate(takers)]
    return min(scored)[2] if scored else None


def _one_by_one_order(cls: MemberClass, pool: NodePool, ledger: Ledger, taken: Mapping[str, Resources],
                      scope: Scope, occupancy: Occupancy) -> list[str]:
    """The class's nodes in packing order: by the accelerator shelf when it asks for one; by
    devices otherwise, nodes that can take every member first (the tightest of them), then the
    ones taking most."""
    blocked = (occupancy.mixed_holds(cls.device_demand, cls.members[0].requests, pool) if cls.devices or cls.extended
               else ())
    order = _unblocked_order(cls, pool, ledger, taken, scope, occupancy)
    return [name for name in order if name not in blocked] if blocked else order


def _unblocked_order(cls: MemberClass, pool: NodePool, ledger: Ledger, taken: Mapping[str, Resources],
                     scope: Scope, occupancy: Occupancy) -> list[str]:
    count = len(cls.members)
    devices = occupancy.devices
    room = occupancy.room(cls.members[0], cls.device_demand, pool) if cls.devices and cls.accelerator is None else None
    if room is not None:
        counts = sorted(c for c in room if c >= count) + sorted((c for c in room if c < count), reverse=True)
        return [name for c in counts for name in devices.room_order(cls.device_demand, c)
                if name in cls.eligible and (scope is None or name in scope)]
    names = [name for _, bucket in sorted(shelf(cls, pool, ledger, taken, scope).items(), key=lambda item: item[0])
             for name in bucket]
    if not cls.devices or cls.accelerator is not None:
        return names
    takes = {name: devices.fits(pool.nodes[name], devices.demand_on(pool.nodes[name], cls.device_demand,
                                                                      cls.members[0].requests), count)
             for name in names if name in devices.nodes_with_devices or devices.serves_every_node}
    return sorted((name for name, fits in takes.items() if fits),
                  key=lambda name: (takes[name] < count, takes[name] if takes[name] >= count else -takes[name]))


def _refusal_of(cls: MemberClass, member: Member, name: str, pool: NodePool, ledger: Ledger,
                taken: Mapping[str, Resources], occupancy: Occupancy) -> str | None:
    """Why the node cannot take one more member of the class now; None when it can."""
    free = ledger.free(name)
    if name in taken:
        free = subtract(free, taken[name])
    if members_fitting(cls.demand, free, 1) < 1:
        return "resources"
    if cls.devices or cls.extended:
        if not occupancy.devices_fit(pool.nodes[name], cls.device_demand, member.requests):
            return "devices"
    return occupancy.refusal(member, name)
