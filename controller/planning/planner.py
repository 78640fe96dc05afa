"""Where each waiting member of a group goes: all of them, or none of them.

`plan_group` places every waiting member (gated, nothing reserved) on a node that passes
`eligibility.placement_refusal` and has room for all its requests plus a pod slot, counting
what the same plan already put on that node, so that no resource of any node is over-committed.
Members already reserved keep their reservation (it is in the ledger): after a restart in the
middle of writing reservations, planning the group again places only the rest.

Packing, so that fragments get used and whole nodes stay whole for whole-node jobs:
  1. One topology domain when the whole group fits there: the finest label first (rack, then
     zone), and among domains of one label the one with the fewest accelerators to spare.
  2. Partly used nodes before untouched ones: a whole node is broken into only when the
     fragments cannot take the group.
  3. Within each of the two, when one node holds every member still unplaced, the tightest
     such node (fewest free accelerators); otherwise the node holding the most members,
     filled as far as it goes (fewest nodes).
Members are grouped by identical requests and constraints: eligibility is looked up once per
group of identical members (the node pool remembers it), and only nodes the ledger's index shows
with enough free accelerators are considered, so a 64-member group on 5,000 nodes is planned in
milliseconds. Those nodes are taken in packing order only as far as the plan reads them (the
ledger keeps each amount's nodes in name order; `_Bucket`), and what a plan works out from one
amount's nodes (which are eligible, how many each domain has) the node pool keeps until they
change, so that planning every group after a restart costs what each plan reads, not the
nodes times the groups. Ties break as the full sort would: by name within an amount.

Given the occupancy (`controller.occupancy`: devices, the pods around a member, its volumes),
members whose DRA claims or neighbours decide too are placed one at a time, each on the first
node in the same packing order that has the resources, can allocate its devices and whose
neighbours let it in (pod affinity and anti-affinity, DoNotSchedule spread, host ports; a
ScheduleAnyway spread picks the least skewed of the first `SPREAD_CHOICES` such nodes), and each
is counted before the next, so a group's own members keep each other apart. A group with spread
constraints is not kept inside one domain. Members of a volume's claim go only where the volume
may be used. Everything placed while planning is taken out again: `apply` counts an admitted plan.

Topology rules: a group that declares its own (`Group.topology`, a `model.TopologyRule`) is
placed by it instead of by the cluster's `Topology`; the packing inside a domain is the same.
What each domain of a label offers is counted once per plan from the class's room by free
accelerators (`controller.topology.DomainRoom`), and domains are chosen BestFit (partly used
first, then fewest accelerators left free; `controller.topology`). The scopes tried, in order:
  - `required` alone: each domain that holds the group, best first; none: a NoFit naming every
    domain's free accelerators. Nodes without the label never qualify.
  - `preferred` alone: each domain that holds the group, best first; then as few domains as hold
    it together; then anywhere. A group with spread constraints has no preferred domain.
  - both: domains of `preferred` inside one of `required` that hold the group, best first; then
    per domain of `required`, best first, as few of `preferred` as hold it, then the whole domain.
  - `slice_required` with `slice_size`, inside each scope: the group's live members ordered by
    `Member.rank` in consecutive slices, each placed in turn in the BestFit domain of the slice
    label that takes it, counting what the earlier slices took (at most `SLICE_TRIES` domains a
    slice). Members reserved before a restart hold their required domain and their slice's.
Placing one at a time (devices, neighbours), at most `ONE_BY_ONE_TRIES` domains a level are tried.
"""

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import partial
from itertools import islice
from math import ceil, floor

from gangkeeper.controller.cache.capacity import Ledger, members_fitting, usage
from gangkeeper.controller.cache.occupancy import Occupancy
from gangkeeper.controller.checks.dra.rooms import ROOM_LIMIT
from gangkeeper.controller.checks.eligibility import NodePool
from gangkeeper.controller.checks.interpod.refusal import (
    AFFINITY_REFUSAL,
    ANTI_AFFINITY_REFUSAL,
    BINDING_ORDER_REFUSAL,
    EXISTING_ANTI_AFFINITY_REFUSAL,
    SPREAD_LABEL_REFUSAL,
    SPREAD_REFUSAL,
    spread_penalty,
)
from gangkeeper.controller.checks.ports import REFUSAL as PORTS_REFUSAL
from gangkeeper.controller.model.claims import DeviceDemand, Unresolved
from gangkeeper.controller.model.members import Group, GroupKey, Member
from gangkeeper.controller.model.nodes import Node
from gangkeeper.controller.planning.domains import DomainRoom, best_fit, fewest, noun, shortage, slices
from gangkeeper.names import ZONE_LABEL
from gangkeeper.quantity import format_quantity
from gangkeeper.resources import Resources, add_into, subtract

SPREAD_CHOICES = 64  # nodes that take a member, among which its ScheduleAnyway constraints choose

Assignment = tuple[Member, str]
Domain = tuple[str, str] | None
Scope = frozenset[str] | None  # the nodes a placement may use; None: every node


@dataclass(frozen=True, slots=True)
class Topology:
    """Node labels naming the domains a group should stay inside."""

    zone_label: str = ZONE_LABEL
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
    group that has starved.
    """

    group: GroupKey
    reason: str
    limiting: tuple[str, ...]
    placeable: int
    needed: int
    partial: tuple[Assignment, ...] = ()


def plan_group(group: Group, pool: NodePool, ledger: Ledger, topology: Topology = Topology(),
               occupancy: Occupancy | None = None) -> Plan | NoFit:
    """Without `occupancy`, only resources and each node's own rules decide (devices, the pods
    around a member and its volumes are not looked at). The ledger and occupancy are left as they were."""
    members = group.waiting_members
    classes = _member_classes(members, pool, ledger, occupancy)
    if group.topology:
        return _plan_by_rule(group, classes, pool, ledger, occupancy)
    domains = _domains(classes, pool, topology) if _fits_somewhere(classes) else [None]
    if occupancy is not None and any(_one_by_one(cls, occupancy) for cls in classes):
        domains = _best_per_label(domains)  # placing one by one costs more: the best domain of each level
    elif occupancy is not None and not any(_device_bound(cls, occupancy) for cls in classes):
        occupancy = None  # only resources and node rules decide for every member
    assignments: list[Assignment] = []
    for domain in domains:
        assignments = _place(classes, pool, ledger, _scope(pool, domain), occupancy)
        if len(assignments) == len(members):
            return Plan(group.key, tuple(assignments), None if domain is None else "=".join(domain))
    return _no_fit(group, classes, assignments, pool, ledger, occupancy)


def apply(plan: Plan | NoFit, ledger: Ledger, occupancy: Occupancy | None = None, pool: NodePool | None = None) -> None:
    """Count a plan's members as reserved (or a NoFit's placeable ones, to hold their capacity),
    in the ledger and, given one, in the occupancy (`pool` then names the nodes)."""
    for member, node in plan.assignments if isinstance(plan, Plan) else plan.partial:
        ledger.reserve(member.uid, node, member.requests)
        if occupancy is not None:
            occupancy.place(member, pool.nodes[node], _devices_of(member, occupancy))
    if occupancy is not None:  # devices the claims now hold serve no extended resource there
        occupancy.serve_extended(ledger, pool.nodes)


@dataclass(slots=True)
class _Class:
    """Members with identical requests and constraints: they may go to the same nodes.

    `devices` is what their DRA claims ask for (or why that cannot be known), `unplaceable`
    why no node may take them whatever is free (a volume claim that does not exist)."""

    members: list[Member]
    demand: Mapping[str, Fraction]  # what each takes from a node (`Ledger.usage_of`)
    eligible: frozenset[str]
    accelerator: str | None
    per_member: int
    room: dict[int, tuple[str, ...]]
    devices: DeviceDemand | Unresolved = ()
    unplaceable: str | None = None
    extended: bool = False  # requests an extended resource a DeviceClass may serve


def _member_classes(members: Sequence[Member], pool: NodePool, ledger: Ledger,
                    occupancy: Occupancy | None) -> list[_Class]:
    """Identical members together, the hardest to place (most accelerators each) first.

    Members asking for the same mostly share one requests mapping (`model.member_from_api`): its
    items are sorted and hashed once per mapping (alive in its member, so that its id names no
    other), not once per member, and the members are told apart by the mapping's number."""
    alike: dict[tuple, list[Member]] = {}
    shapes: dict[tuple, int] = {}
    numbers: dict[int, int] = {}
    for member in members:
        shape = numbers.get(id(member.requests))
        if shape is None:
            shape = numbers[id(member.requests)] = shapes.setdefault(tuple(sorted(member.requests.items())), len(shapes))
        key = (shape, member.placement_key)
        if occupancy is not None:
            key += (member.rules, _devices_of(member, occupancy), member.volume_claims)
        alike.setdefault(key, []).append(member)
    classes = [_member_class(group, pool, ledger, occupancy) for group in alike.values()]
    return sorted(classes, key=lambda c: (-c.per_member, -len(c.members)))


def _devices_of(member: Member, occupancy: Occupancy) -> DeviceDemand | Unresolved:
    return occupancy.demand(member) if member.claims else ()


def _member_class(members: list[Member], pool: NodePool, ledger: Ledger, occupancy: Occupancy | None) -> _Class:
    requests = members[0].requests
    wanted = [(value, name) for name, value in requests.items() if ledger.is_accelerator(name)]
    eligible = pool.eligible(members[0])
    devices: DeviceDemand | Unresolved = ()
    unplaceable = None
    if occupancy is not None:
        devices = _devices_of(members[0], occupancy)
        limit = occupancy.volume_limit(members[0])
        if limit.missing:
            eligible, unplaceable = frozenset(), limit.missing
        elif limit.restricts:
            eligible = frozenset(name for name in eligible if limit.allows(pool.nodes[name]))
        if isinstance(devices, Unresolved):
            eligible, unplaceable = frozenset(), devices.reason
    extended = occupancy is not None and occupancy.devices.serves_extended(requests)
    if not wanted:
        return _Class(members, ledger.usage_of(requests), eligible, None, 0, {}, devices, unplaceable, extended)
    amount, accelerator = max(wanted)
    per_member = ceil(amount)
    return _Class(members, ledger.usage_of(requests), eligible, accelerator, per_member,
                  _room(pool, ledger, accelerator, eligible, lambda free: free >= per_member), devices,
                  unplaceable, extended)


def _room(pool: NodePool, ledger: Ledger, accelerator: str, eligible: frozenset[str],
          wanted: Callable[[int], bool]) -> dict[int, tuple[str, ...]]:
    """The eligible nodes by whole free amount of the accelerator, for the `wanted` amounts that
    have some, each amount's in name order: the ledger's order (`Ledger.names_by_free`), its
    eligible ones remembered by the pool while that amount's nodes stay the same
    (`NodePool.eligible_among`), so that groups planned one after the other neither sort nor
    filter the nodes again."""
    room: dict[int, tuple[str, ...]] = {}
    for free in ledger.nodes_by_free(accelerator):
        if wanted(free):
            names = pool.eligible_among(eligible, ledger.names_by_free(accelerator, free), (accelerator, free))
            if names:
                room[free] = names
    return room


def _fits_somewhere(classes: Sequence[_Class]) -> bool:
    """Whether each class finds accelerators for all its members in the whole cluster: when one
    does not, no domain holds the group, and working the domains out would be wasted."""
    return all(sum(free // c.per_member * len(names) for free, names in c.room.items()) >= len(c.members)
               for c in classes if c.accelerator)


def _domains(classes: Sequence[_Class], pool: NodePool, topology: Topology) -> list[Domain]:
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


def _place(classes: Sequence[_Class], pool: NodePool, ledger: Ledger, scope: Scope,
           occupancy: Occupancy | None) -> list[Assignment]:
    """As many members as fit, class by class, on nodes of the scope (None: anywhere).

    Members are counted in the occupancy as they are placed, so that later members see them
    (anti-affinity among a group's own members), and taken out again before returning; the
    last class placed in batches is not counted, as no member comes after it."""
    assignments: list[Assignment] = []
    try:
        _place_into(classes, pool, ledger, scope, occupancy, {}, assignments)
    finally:
        _uncount(assignments, occupancy)
    return assignments


def _place_into(classes: Sequence[_Class], pool: NodePool, ledger: Ledger, scope: Scope, occupancy: Occupancy | None,
                taken: dict[str, Resources], assignments: list[Assignment], count_last: bool = False) -> None:
    """`_place`, adding to `taken` (what this plan has put on each node) and `assignments`, and
    leaving the members counted in the occupancy (the last class too with `count_last`)."""
    for position, cls in enumerate(classes):
        if cls.unplaceable:
            continue
        if occupancy is not None and _one_by_one(cls, occupancy):
            placed = _place_one_by_one(cls, pool, ledger, taken, scope, occupancy)
        else:
            devices = occupancy if occupancy is not None and _device_bound(cls, occupancy) else None
            placed = _place_in_batches(cls, pool, ledger, taken, scope, devices)
            if occupancy is not None and (count_last or position < len(classes) - 1):  # else no one left to see it
                for member, node in placed:
                    occupancy.place(member, pool.nodes[node], cls.devices)
        assignments += placed


def _uncount(assignments: Iterable[Assignment], occupancy: Occupancy | None) -> None:
    if occupancy is not None:
        for member, _ in assignments:
            occupancy.uncount(member.uid)


def _device_bound(cls: _Class, occupancy: Occupancy) -> bool:
    """Whether devices decide where the class's members go, besides resources: claims of their
    own, or extended resources served by devices that claims take too."""
    return bool(cls.devices or (cls.extended and occupancy.devices.explicit_in_use))


def _one_by_one(cls: _Class, occupancy: Occupancy) -> bool:
    """Whether each member must be placed and counted before the next: pod rules, or devices
    that cannot be counted node by node (a shared claim, which every member must follow to the
    node its first member takes; slices serving many nodes, where one node's allocations change
    another's devices; claims beside extended resources, which the device rooms do not index)."""
    if occupancy.neighbours_matter(cls.members[0]):
        return True
    if not _device_bound(cls, occupancy):
        return False
    devices = occupancy.devices
    return (devices.serves_every_node or isinstance(cls.devices, Unresolved)
            or any(claim.shared is not None for claim in cls.devices)
            or bool(cls.devices and cls.accelerator is None and devices.serves_extended(cls.members[0].requests)))


def _place_in_batches(cls: _Class, pool: NodePool, ledger: Ledger, taken: dict[str, Resources],
                      scope: Scope, devices: Occupancy | None = None) -> list[Assignment]:
    """Members whose neighbours do not matter: as many to a node as it holds, by its resources
    and, given the occupancy, by the devices it can allocate them one after the other."""
    unplaced = list(cls.members)
    assignments: list[Assignment] = []
    candidates = _Candidates(cls, pool, ledger, taken, scope, devices)
    while unplaced:
        pick = candidates.pick(len(unplaced))
        if pick is None:
            break
        node, count = pick
        assignments += [(member, node) for member in unplaced[:count]]
        del unplaced[:count]
        add_into(taken.setdefault(node, {}), {r: value * count for r, value in cls.demand.items()})
    return assignments


def _place_one_by_one(cls: _Class, pool: NodePool, ledger: Ledger, taken: dict[str, Resources],
                      scope: Scope, occupancy: Occupancy) -> list[Assignment]:
    """Members whose devices or neighbours decide too: each to the first node in packing order
    that has the resources, can allocate its devices, and whose neighbours let it in; each is
    counted in the occupancy before the next is placed."""
    order = _one_by_one_order(cls, pool, ledger, taken, scope, occupancy)
    assignments: list[Assignment] = []
    rules = cls.members[0].rules
    prefers_spread = bool(rules and rules.soft_spread)
    # A node that cannot take a member cannot take the next one of the class either, as nodes only
    # fill up, unless a DoNotSchedule spread lets a domain in again once the others have caught up.
    rescan = bool(rules and rules.hard_spread)
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
        occupancy.place(member, pool.nodes[chosen], cls.devices)
    return assignments


_OUT_OF_ROOM = ("resources", "devices")  # refusals that placing more members of the class never lifts


def _least_skewed(member: Member, takers: Iterable[str], occupancy: Occupancy) -> str | None:
    """Of the first nodes in packing order that take the member, the one its ScheduleAnyway
    spread constraints prefer (lowest skew; the earlier node on a tie)."""
    rules, spread_nodes = member.rules, occupancy.scope.nodes_for(member)
    scored = [(spread_penalty(rules, member.namespace, member.labels, name, occupancy.placements, spread_nodes),
               position, name) for position, name in enumerate(takers)]
    return min(scored)[2] if scored else None


def _one_by_one_order(cls: _Class, pool: NodePool, ledger: Ledger, taken: Mapping[str, Resources],
                      scope: Scope, occupancy: Occupancy) -> list[str]:
    """The class's nodes in packing order: by the accelerator shelf when it asks for one; by
    devices otherwise, nodes that can take every member first (the tightest of them), then the
    ones taking most."""
    blocked = occupancy.mixed_holds(cls.devices, cls.members[0].requests, pool) if cls.devices or cls.extended else ()
    order = _unblocked_order(cls, pool, ledger, taken, scope, occupancy)
    return [name for name in order if name not in blocked] if blocked else order


def _unblocked_order(cls: _Class, pool: NodePool, ledger: Ledger, taken: Mapping[str, Resources],
                     scope: Scope, occupancy: Occupancy) -> list[str]:
    count = len(cls.members)
    devices = occupancy.devices
    room = occupancy.room(cls.members[0], cls.devices, pool) if cls.devices and cls.accelerator is None else None
    if room is not None:
        counts = sorted(c for c in room if c >= count) + sorted((c for c in room if c < count), reverse=True)
        return [name for c in counts for name in devices.room_order(cls.devices, c)
                if name in cls.eligible and (scope is None or name in scope)]
    names = [name for _, bucket in sorted(_shelf(cls, pool, ledger, taken, scope).items(), key=lambda item: item[0])
             for name in bucket]
    if not cls.devices or cls.accelerator is not None:
        return names
    room = {name: devices.fits(pool.nodes[name], devices.demand_on(pool.nodes[name], cls.devices,
                                                                     cls.members[0].requests), count)
            for name in names if name in devices.nodes_with_devices or devices.serves_every_node}
    return sorted((name for name, fits in room.items() if fits),
                  key=lambda name: (room[name] < count, room[name] if room[name] >= count else -room[name]))


def _refusal_of(cls: _Class, member: Member, name: str, pool: NodePool, ledger: Ledger,
                taken: Mapping[str, Resources], occupancy: Occupancy) -> str | None:
    """Why the node cannot take one more member of the class now; None when it can."""
    free = ledger.free(name)
    if name in taken:
        free = subtract(free, taken[name])
    if members_fitting(cls.demand, free, 1) < 1:
        return "resources"
    if cls.devices or cls.extended:
        if not occupancy.devices_fit(pool.nodes[name], cls.devices, member.requests):
            return "devices"
    return occupancy.refusal(member, name)


class _Candidates:
    """The nodes one class may use, handed out in packing order (module docstring, 2 and 3).

    A tier is 0 for partly used nodes, 1 for untouched ones (for a class without accelerators,
    see `_shelf`).

    Nodes wait in buckets keyed by (tier, −free accelerators), so that each pick looks at
    a handful of buckets rather than at every node; the buckets are filled as they are read
    (`_Bucket`), so that a pick that finds its node among the first few of the room has looked
    at those few alone. How many members a node really holds (every resource, pod slot
    included) is worked out only for the nodes actually considered.

    Given the occupancy, a node holds no more members than it can allocate devices for, one
    after the other, and nodes where members of another device demand hold devices are left
    out (`Occupancy.devices_fit`). A class whose devices come from claims alone is shelved by
    its device room instead (`_device_buckets`): one unit per member, and nodes outside its
    eligible ones or the domain are passed over as they are looked at.
    """

    __slots__ = ("_cls", "_pool", "_ledger", "_taken", "_occupancy", "_per_member", "_by_preference",
                 "_by_tightness", "_tiers", "_used", "_holds", "_checked", "_scope")

    def __init__(self, cls: _Class, pool: NodePool, ledger: Ledger, taken: Mapping[str, Resources], scope: Scope,
                 occupancy: Occupancy | None = None):
        self._cls, self._pool, self._ledger, self._taken, self._occupancy = cls, pool, ledger, taken, occupancy
        self._used: set[str] = set()
        self._holds: dict[str, int] = {}
        self._per_member = cls.per_member if cls.accelerator else None
        if occupancy is not None:
            self._used = set(occupancy.mixed_holds(cls.devices, cls.members[0].requests, pool))
        self._checked = False  # whether eligibility and the scope are checked as nodes are looked at
        self._scope = scope
        if occupancy is not None and cls.devices and cls.accelerator is None:
            buckets, self._per_member = _device_buckets(cls, pool, occupancy), 1
            self._checked = True
        else:
            buckets = _shelf(cls, pool, ledger, taken, scope)
        self._by_preference = sorted(buckets.items(), key=lambda item: item[0])
        self._by_tightness = sorted(((-negative_free, tier, names) for (tier, negative_free), names in buckets.items()),
                                    key=lambda item: item[:2])
        self._tiers = sorted({tier for tier, _ in buckets})

    def pick(self, unplaced: int) -> tuple[str, int] | None:
        """The next node and how many members it takes, or None when no node takes any."""
        for tier in self._tiers:
            chosen = self._tightest_holding_all(tier, unplaced) or self._holding_most(tier, unplaced)
            if chosen:
                return chosen
        return None

    def _tightest_holding_all(self, tier: int, unplaced: int) -> tuple[str, int] | None:
        if self._per_member is None:
            return None
        for free, node_tier, names in self._by_tightness:
            if node_tier == tier and free // self._per_member >= unplaced:
                for name in names:
                    if name not in self._used and self._holding(name) >= unplaced:
                        return self._take(name, unplaced)
        return None

    def _holding_most(self, tier: int, unplaced: int) -> tuple[str, int] | None:
        for (node_tier, _), names in self._by_preference:
            if node_tier != tier:
                continue
            for name in names:
                if name not in self._used:
                    holds = self._holding(name)
                    if holds:
                        return self._take(name, min(holds, unplaced))
                    self._used.add(name)
        return None

    def _holding(self, name: str) -> int:
        holds = self._holds.get(name)
        if holds is None and not self._inside(name):
            holds = self._holds[name] = 0
        if holds is None:
            free = self._ledger.free(name)
            if name in self._taken:
                free = subtract(free, self._taken[name])
            holds = members_fitting(self._cls.demand, free, len(self._cls.members))
            if holds and self._occupancy is not None:
                holds = self._allocatable(name, holds)
            self._holds[name] = holds
        return holds

    def _inside(self, name: str) -> bool:
        if not self._checked:
            return True  # the shelf holds only the class's nodes in the scope
        return name in self._cls.eligible and (self._scope is None or name in self._scope)

    def _allocatable(self, name: str, limit: int) -> int:
        """How many members, at most `limit`, get their devices on the node one after the other:
        for a class shelved by its device room, the room's count (read when shelved, and nothing
        is held while the class is placed), without asking the allocator again."""
        node, devices, member = self._pool.nodes[name], self._occupancy.devices, self._cls.members[0]
        if self._checked and limit <= ROOM_LIMIT:
            return min(limit, devices.room_count(self._cls.devices, name))
        demand = devices.demand_on(node, self._cls.devices, member.requests)
        return devices.fits(node, demand, limit) if demand else limit

    def _take(self, name: str, count: int) -> tuple[str, int]:
        self._used.add(name)
        return name, count


def _shelf(cls: _Class, pool: NodePool, ledger: Ledger, taken: Mapping[str, Resources],
           scope: Scope) -> dict[tuple[int, int], "_Bucket"]:
    """The class's nodes in the scope by preference key (lowest first), each key's in the order
    they come in here: room amount by amount, fewest free first, by name within an amount.

    With accelerators: partly used nodes (0) before untouched ones (1), most free first. A
    class without accelerators prefers the nodes this plan already uses, then nodes without
    accelerators, so that a launcher pod neither spreads the group nor takes a GPU node's slots.

    Each amount's nodes are dealt out to its buckets only as far as the buckets are read. A node
    this plan uses may have fewer free than its amount: it is in the bucket of what is left, in
    the place its amount gives it (`_Deal`), worked out up front (the plan's nodes are few).
    """
    buckets: dict[tuple[int, int], _Bucket] = {}
    if cls.accelerator is None:
        def cpu_key(name: str) -> tuple[int, int] | None:
            if name not in cls.eligible:
                return None
            if name in taken:
                return 0, 0
            return 1 + any(ledger.is_accelerator(r) for r in pool.nodes[name].allocatable), 0

        names = pool.nodes if scope is None else sorted(scope)
        _Deal(iter(names), cpu_key, {key: buckets.setdefault(key, _Bucket()) for key in ((0, 0), (1, 0), (2, 0))})
        return buckets
    accelerator, per_member = cls.accelerator, cls.per_member
    moved: dict[tuple[int, int], list[tuple[int, str]]] = {}  # (amount, name) of the plan's nodes left with less
    for name in taken if scope is None else [name for name in taken if name in scope]:
        amount = floor(ledger.free(name).get(accelerator, 0))
        if name in cls.eligible and amount in cls.room and name in ledger.nodes_by_free(accelerator).get(amount, ()):
            left = floor(ledger.free(name).get(accelerator, 0) - taken[name].get(accelerator, 0))
            if left != amount and left >= per_member:
                moved.setdefault((0, -left), []).append((amount, name))
    for amount, names in sorted(cls.room.items()):
        def key(name: str, amount: int = amount) -> tuple[int, int] | None:
            if name in taken:
                left = floor(ledger.free(name).get(accelerator, 0) - taken[name].get(accelerator, 0))
                return (0, -amount) if left == amount else None  # else moved, or too few left
            return int(amount >= pool.nodes[name].allocatable.get(accelerator, 0)), -amount

        dealt = {(tier, -amount): buckets.setdefault((tier, -amount), _Bucket()) for tier in (0, 1)}
        _Deal(_inside(names, scope), key, dealt)
    for key, entries in moved.items():
        bucket = buckets.setdefault(key, _Bucket())
        entries.sort()
        bucket.names += [name for amount, name in entries if amount < -key[1]]
        after = [name for amount, name in entries if amount > -key[1]]
        if bucket.deal is None:  # no node has that amount: the bucket holds these alone
            bucket.names += after
        else:
            bucket.after = after
    return buckets


def _inside(names: Sequence[str], scope: Scope) -> Iterator[str]:
    """The scope's names among `names`, in their order: picked out as they are read, or, for a
    scope much smaller than the names, its own names sorted (the same names, in the same order)."""
    if scope is None:
        return iter(names)
    if len(scope) * 8 < len(names):
        return iter(sorted(scope.intersection(names)))
    return (name for name in names if name in scope)


class _Bucket:
    """The names of one preference key in packing order, worked out as far as they are read:
    those known so far, then what its `_Deal` hands out, then `after` once the deal is done."""

    __slots__ = ("names", "deal", "after")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.deal: _Deal | None = None
        self.after: list[str] = []

    def __iter__(self) -> Iterator[str]:
        return iter(self.names) if self.deal is None else self._dealing()  # once dealt, the names are all there

    def _dealing(self) -> Iterator[str]:
        names, position = self.names, 0
        while True:
            if position < len(names):
                yield names[position]
                position += 1
            elif self.deal is not None:
                self.deal.next()
            else:
                return


class _Deal:
    """Hands the names of one source, in their order, to the buckets their keys name (None: to
    none), one at a time as a bucket asks for more; when the source is done, each bucket takes
    its `after` names and the deal leaves it."""

    __slots__ = ("_names", "_key_of", "_buckets")

    def __init__(self, names: Iterator[str], key_of: Callable[[str], tuple[int, int] | None],
                 buckets: Mapping[tuple[int, int], _Bucket]):
        self._names, self._key_of, self._buckets = names, key_of, buckets
        for bucket in buckets.values():
            bucket.deal = self

    def next(self) -> None:
        """Hand out the next name that has a bucket, or finish."""
        for name in self._names:
            key = self._key_of(name)
            if key is not None:
                self._buckets[key].names.append(name)
                return
        for bucket in self._buckets.values():
            bucket.names += bucket.after
            bucket.deal = None


def _device_buckets(cls: _Class, pool: NodePool, occupancy: Occupancy) -> dict[tuple[int, int], Sequence[str]]:
    """For a class whose devices all come from its claims: the nodes with devices for at least
    one member, keyed by how many members' devices each has (most first), by name within a key.
    Every node with devices is listed; eligibility and the domain are checked when one is looked at."""
    room = occupancy.room(cls.members[0], cls.devices, pool) or {}
    return {(0, -count): occupancy.devices.room_order(cls.devices, count) for count in room}


# --- a group's own topology rule (controller.topology) -----------------------------------------

ONE_BY_ONE_TRIES = 3  # domains tried at each level when members are placed one at a time
SLICE_TRIES = 8  # domains one slice is tried in, at most, in BestFit order


def _plan_by_rule(group: Group, classes: Sequence[_Class], pool: NodePool, ledger: Ledger,
                  occupancy: Occupancy | None) -> Plan | NoFit:
    """The group's rule instead of the cluster's `Topology` (module docstring, "Topology rules")."""
    one_by_one = occupancy is not None and any(_one_by_one(cls, occupancy) for cls in classes)
    if occupancy is not None and not one_by_one and not any(_device_bound(cls, occupancy) for cls in classes):
        occupancy = None  # only resources and node rules decide for every member
    return _RuleSearch(group, classes, pool, ledger, occupancy, one_by_one).plan()


class _RuleSearch:
    """The scopes a group with a rule is tried in, best first, and with slices a domain for each
    slice inside the scope; what each label's domains offer is counted once (`DomainRoom`)."""

    def __init__(self, group: Group, classes: Sequence[_Class], pool: NodePool, ledger: Ledger,
                 occupancy: Occupancy | None, one_by_one: bool):
        self.group, self.classes, self.pool, self.ledger, self.occupancy = group, classes, pool, ledger, occupancy
        self.rule = group.topology
        self.packed = [cls for cls in classes if cls.accelerator]  # the classes the rooms count
        self.need = [len(cls.members) for cls in self.packed]
        self.count = sum(len(cls.members) for cls in classes)
        self.tries = ONE_BY_ONE_TRIES if one_by_one else None
        self.best: list[Assignment] = []  # the attempt that placed the most members
        self.reason: Callable[[], str] | None = None  # why no domain holds the group, when the counts show it
        self.fallback: Scope = None  # where the members that fit would go when none holds the group
        self._rooms_of: dict[tuple[str, Scope], dict[str, DomainRoom]] = {}

    def plan(self) -> Plan | NoFit:
        if not self.count:
            return Plan(self.group.key, ())
        fits = _fits_somewhere(self.classes)
        if fits:
            for scope, domain in self._scopes():
                assignments = self._fill(scope)
                if len(assignments) == self.count:
                    return Plan(self.group.key, tuple(assignments), domain)
                if len(assignments) >= len(self.best):
                    self.best = assignments
        elif self.rule.required:
            self._outer()  # for the fallback alone (the roomiest domain)
        if not self.best and (self.reason is not None or not fits):  # what a starving head would hold
            self.best = (self._fill(self.fallback) if fits  # the counts bound these: never the whole group
                         else _place(self.classes, self.pool, self.ledger, self.fallback, self.occupancy))
        if self.reason is not None and fits:  # else the cluster's shortage explains it
            return NoFit(self.group.key, self.reason(), ("topology",), len(self.best), self.count, tuple(self.best))
        no_fit = _no_fit(self.group, self.classes, self.best, self.pool, self.ledger, self.occupancy)
        return replace(no_fit, reason=f"{self._rule_words()}: {no_fit.reason}") if fits else no_fit

    def _rule_words(self) -> str:
        rule = self.rule
        words = [f"{kind} {label}" for kind, label in (("required", rule.required), ("preferred", rule.preferred))
                 if label]
        if rule.slice_required:
            words.append(f"slices of {rule.slice_size or self.count} on {rule.slice_required}")
        return ", ".join(words)

    # --- which scopes, best first -----------------------------------------------------------

    def _scopes(self) -> Iterable[tuple[Scope, str | None]]:
        """Each scope once: with `preferred`, single domains of it that hold the group (BestFit,
        inside a domain of `required` when set), then per domain of `required` (or the whole
        cluster) as few domains of `preferred` as hold the group, then that whole domain."""
        outer = self._outer()
        if outer is None:
            return
        seen: set[Scope] = set()
        spread = any(cls.members[0].rules and cls.members[0].rules.spread for cls in self.classes)
        preferred = None if spread else self.rule.preferred  # asked to be spread: no domain is preferred
        tried: list[tuple[Scope, str | None]] = []
        if preferred:
            rooms, domains = self._rooms(preferred), self.pool.domains(preferred)
            for room in best_fit(rooms.values(), self.need)[:self.tries]:
                nodes = domains[room.value]
                inside = next((nodes if scope is None else nodes & scope
                               for scope, _ in outer if scope is None or not nodes.isdisjoint(scope)), None)
                if inside:
                    tried.append((inside, f"{preferred}={room.value}"))
        for scope, domain in outer:
            if preferred:
                domains = self.pool.domains(preferred)
                few = fewest(self._rooms(preferred, scope).values(), self.need)
                if few and len(few) > 1:
                    union = frozenset().union(*(domains[room.value] for room in few))
                    tried.append((union if scope is None else union & scope, domain))
            tried.append((scope, domain))
        for scope, domain in tried:
            if scope not in seen:
                seen.add(scope)
                yield scope, domain

    def _outer(self) -> list[tuple[Scope, str | None]] | None:
        """The domains of `required` that hold the group, best first (or the whole cluster
        without one); None, with the reason, when none does."""
        label = self.rule.required
        if not label:
            return [(None, None)]
        rooms = self._rooms(label)
        anchor = self._anchor_of(self.group.members, label)
        if anchor is not None:  # members reserved before a restart: the rest go where they are
            rooms = {anchor: rooms.get(anchor) or DomainRoom(anchor, [0] * len(self.packed))}
        domains = self.pool.domains(label)
        if rooms:
            roomiest = max(rooms.values(), key=lambda r: (r.room[:1], r.free, r.value))
            self.fallback = domains.get(roomiest.value, frozenset())
        else:
            self.fallback = frozenset()
        fitting = best_fit(rooms.values(), self.need)
        if not fitting:
            self.reason = lambda: self._shortage("required", label, rooms)
            return None
        return [(domains.get(room.value, frozenset()), f"{label}={room.value}") for room in fitting[:self.tries]]

    def _rooms(self, label: str, scope: Scope = None) -> dict[str, DomainRoom]:
        """What each domain of the label offers the group before it is placed, counting the nodes
        of the scope alone: members counted from each class's nodes by free accelerators, as
        `_domains` counts them; free accelerators on the nodes with room for one of the hardest
        class (what BestFit leaves stranded: choosing a domain changes nothing on the others)."""
        rooms = self._rooms_of.get((label, scope))
        if rooms is not None:
            return rooms
        rooms = self._rooms_of[label, scope] = {}
        if not self.packed:  # nothing to count: every domain with nodes each class may use
            for value, nodes in self.pool.domains(label).items():
                nodes = nodes if scope is None else nodes & scope
                if all(not cls.eligible.isdisjoint(nodes) for cls in self.classes):
                    rooms[value] = DomainRoom(value, [])
            return rooms
        for index, cls in enumerate(self.packed):
            for free, names in cls.room.items():
                counted = (self.pool.labelled(label, names, (cls.accelerator, free)) if scope is None
                           else self.pool.labelled(label, scope.intersection(names)))
                for value, nodes in counted.items():
                    if value is not None:
                        room = rooms.get(value) or rooms.setdefault(value, DomainRoom(value, [0] * len(self.packed)))
                        room.room[index] += free // cls.per_member * nodes
                        room.free += free * nodes if index == 0 else 0
        capacity = self.pool.capacity(label, self.packed[0].accelerator)
        for value, room in rooms.items():
            room.capacity = capacity.get(value, 0)
        return rooms

    def _shortage(self, kind: str, label: str, rooms: Mapping[str, DomainRoom], need: Sequence[int] | None = None,
                  what: str = "", after: str = "", every: bool = True) -> str:
        """`topology.shortage` for the hardest class; `every` lists the label's domains without room too."""
        need = self.need if need is None else need
        if not self.packed:
            return f"{kind} {label}: no {noun(label)} has nodes every member{what} may run on"
        cls = self.packed[0]
        units = sum(count * c.per_member for count, c in zip(need, self.packed) if c.accelerator == cls.accelerator)
        listed = {value: DomainRoom(value, room.room, room.free) for value, room in rooms.items()}
        for value in self.pool.domains(label) if every else ():
            listed.setdefault(value, DomainRoom(value, [0] * len(self.packed)))
        values = self.pool.label_values(label)  # free accelerators too few for one member are free too
        for free, names in self.ledger.nodes_by_free(cls.accelerator).items():
            if 0 < free < cls.per_member:
                for value, nodes in Counter(map(values.get, names & cls.eligible)).items():
                    if value in listed:
                        listed[value].free += free * nodes
        return shortage(kind, label, f"{units} {cls.accelerator}{what}", listed.values(), need[0], units, after)

    # --- placing inside a scope ------------------------------------------------------------

    def _fill(self, scope: Scope) -> list[Assignment]:
        if not self.rule.slice_required:
            return _place(self.classes, self.pool, self.ledger, scope, self.occupancy)
        return self._fill_slices(scope)

    def _fill_slices(self, scope: Scope) -> list[Assignment]:
        """Slice by slice in rank order, each in the BestFit domain of the slice label inside the
        scope that takes it (the domain of its members already reserved, if any), counting what
        the earlier slices took."""
        label, pool = self.rule.slice_required, self.pool
        domains = pool.domains(label)
        rooms = {value: DomainRoom(value, list(room.room), room.free, room.capacity)
                 for value, room in self._rooms(label, scope).items()}
        waiting = {member.uid for cls in self.classes for member in cls.members}
        runs = slices(self.group.members, self.rule.slice_size)
        taken: dict[str, Resources] = {}
        assignments: list[Assignment] = []
        try:
            for position, run in enumerate(runs):
                uids = {member.uid for member in run if member.uid in waiting}
                if not uids:
                    continue
                classes = [replace(cls, members=[m for m in cls.members if m.uid in uids]) for cls in self.classes]
                classes = [cls for cls in classes if cls.members]
                need = [sum(1 for m in cls.members if m.uid in uids) for cls in self.packed]
                anchor = self._anchor_of(run, label)
                candidates = ([rooms.get(anchor) or DomainRoom(anchor, [0] * len(self.packed))] if anchor
                              else best_fit(rooms.values(), need)[:self.tries or SLICE_TRIES])
                placed = None
                for room in candidates:
                    nodes = domains.get(room.value, frozenset())
                    trial_taken = {node: dict(resources) for node, resources in taken.items()}
                    trial: list[Assignment] = []
                    _place_into(classes, pool, self.ledger, nodes if scope is None else nodes & scope,
                                self.occupancy, trial_taken, trial, count_last=True)
                    if len(trial) == len(uids):
                        placed = trial
                        self._take_room(room, {node for _, node in trial}, taken, trial_taken)
                        taken = trial_taken
                        break
                    _uncount(trial, self.occupancy)
                if placed is None:
                    if self.reason is None and not best_fit(rooms.values(), need):
                        after = f", {position} of {len(runs)} slices placed" if position else ""
                        what = f" for each slice of {self.rule.slice_size or self.count} members"
                        self.reason = partial(self._shortage, "slice-required", label, rooms, need, what, after,
                                              every=scope is None)
                    break
                assignments += placed
        finally:
            _uncount(assignments, self.occupancy)
        return assignments

    def _anchor_of(self, run: Sequence[Member], label: str) -> str | None:
        """The domain of `label` holding most of the members of `run` already reserved or bound."""
        values = self.pool.label_values(label)
        held = Counter(values.get(node) for node in _booked_nodes(run))
        held.pop(None, None)
        return held.most_common(1)[0][0] if held else None

    def _take_room(self, room: DomainRoom, nodes: Iterable[str], before: Mapping[str, Resources],
                   after: Mapping[str, Resources]) -> None:
        """Count in the domain's room what a slice took on `nodes` (this plan's use `before` and `after` it)."""
        for name in nodes:
            free_on = self.ledger.free(name)
            for index, cls in enumerate(self.packed):
                if name not in cls.eligible:
                    continue
                was, now = (max(0, floor(free_on.get(cls.accelerator, 0) - taken.get(name, {}).get(cls.accelerator, 0)))
                            for taken in (before, after))
                room.room[index] += now // cls.per_member - was // cls.per_member
                if index == 0:  # the free accelerators of nodes with room for a member, as `_rooms` counts them
                    room.free += (now if now >= cls.per_member else 0) - (was if was >= cls.per_member else 0)


def _booked_nodes(members: Iterable[Member]) -> list[str]:
    """The nodes of the live members already reserved or bound."""
    return [member.reserved_node or member.node for member in members
            if not member.waiting and not member.terminal and (member.reserved_node or member.node)]


def _no_fit(group: Group, classes: Sequence[_Class], partial: list[Assignment],
            pool: NodePool, ledger: Ledger, occupancy: Occupancy | None) -> NoFit:
    placed = {member.uid for member, _ in partial}
    needed = sum(len(c.members) for c in classes)
    short = next(c for c in classes if any(m.uid not in placed for m in c.members))
    why, limiting = _why(short, partial, pool, ledger, occupancy)
    reason = f"{len(partial)} of {needed} waiting members placeable: {why}"
    return NoFit(group.key, reason, limiting, len(partial), needed, tuple(partial))


def _why(cls: _Class, partial: list[Assignment], pool: NodePool, ledger: Ledger,
         occupancy: Occupancy | None) -> tuple[str, tuple[str, ...]]:
    """Which filter or resource keeps the class out, with the numbers that show it."""
    member = cls.members[0]
    if cls.unplaceable:
        return f"no node may run {member.name}: {cls.unplaceable}", ("devices" if cls.devices else "volumes",)
    if not cls.eligible:
        refusals = _most_common(pool.refusals(member))
        return f"no node may run {member.name} ({refusals or 'there are no nodes'})", ("eligibility",)
    if cls.accelerator is not None:
        explained = _accelerator_shortage(cls, pool, ledger)
        if explained:
            return explained, (cls.accelerator,)
    if occupancy is not None and (_device_bound(cls, occupancy) or _one_by_one(cls, occupancy)):
        explained = _occupancy_shortage(cls, partial, pool, ledger, occupancy)
        if explained:
            return explained
    return _resource_shortage(cls, partial, ledger)


_RULES = {ANTI_AFFINITY_REFUSAL: "anti-affinity", EXISTING_ANTI_AFFINITY_REFUSAL: "existing pods' anti-affinity",
          AFFINITY_REFUSAL: "pod affinity", SPREAD_REFUSAL: "topology spread", SPREAD_LABEL_REFUSAL: "topology spread",
          PORTS_REFUSAL: "host ports", BINDING_ORDER_REFUSAL: "pod affinity"}


EXPLAINED_NODES = 128  # nodes a NoFit's explanation examines one by one, at most
EXPLAINED_DEVICE_NODES = 32  # of which the allocator is asked why it refuses, at most


def _occupancy_shortage(cls: _Class, partial: list[Assignment], pool: NodePool, ledger: Ledger,
                        occupancy: Occupancy) -> tuple[str, tuple[str, ...]] | None:
    """Devices or neighbours that keep the rest of the class out, after the placeable members.
    Nodes are examined one by one only up to `EXPLAINED_NODES`, and the words say so."""
    placed = {member.uid for member, _ in partial}
    rest = [member for member in cls.members if member.uid not in placed]
    room = occupancy.room(rest[0], cls.devices, pool) if cls.devices else None
    if room is not None:
        eligible_room = {count: names & cls.eligible for count, names in room.items()}
        if sum(count * len(names) for count, names in eligible_room.items()) < len(cls.members):
            return _device_room_shortage(cls, eligible_room, pool, occupancy), ("devices",)  # before this plan
        candidates = sorted(name for names in eligible_room.values() for name in names)
    elif cls.accelerator is not None:
        candidates = sorted(name for names in cls.room.values() for name in names)
    else:
        candidates = sorted(cls.eligible)
    examined = candidates[:EXPLAINED_NODES]
    scope = "" if len(examined) == len(candidates) else f" (of the first {len(examined)} of {len(candidates)})"
    taken: dict[str, Resources] = {}
    for member, node in partial:
        add_into(taken.setdefault(node, {}), usage(member.requests))
        occupancy.place(member, pool.nodes[node], _devices_of(member, occupancy))
    try:
        roomy = [name for name in examined
                 if members_fitting(cls.demand, subtract(ledger.free(name), taken.get(name, {})), 1) >= 1]
        if cls.devices or cls.extended:
            with_devices = [name for name in roomy if occupancy.devices_fit(pool.nodes[name], cls.devices, rest[0].requests)]
            if not with_devices:
                asked = roomy[:EXPLAINED_DEVICE_NODES]
                reasons = _device_refusals((pool.nodes[name] for name in asked), cls, rest[0], occupancy)
                if None in reasons:  # the allocator would, but another demand's holds keep it off (devices_fit)
                    reasons["another member's devices on the node differ"] = reasons.pop(None)
                sample = "" if len(asked) == len(roomy) else f" (the first {len(asked)}: "
                return (f"none of the {len(roomy)} eligible nodes with room{scope} can allocate the claims of "
                        f"{rest[0].name} {sample or '('}{_most_common(reasons)})"), ("devices",)
            roomy = with_devices
        refusals = Counter(occupancy.refusal(rest[0], name) for name in roomy)
        allowed = refusals.pop(None, 0)
        if not refusals:
            return (f"{len(rest)} more members like {rest[0].name} do not fit: {len(roomy)} of the "
                    f"{len(examined)} nodes with room{scope} take one of them alone, not all"), ("capacity",)
        reason, _ = refusals.most_common(1)[0]
        rule = _RULES.get(reason, reason)
        need = f"{len(rest)} members need {len(rest)} nodes"
        if cls.accelerator is not None:
            need += f" with {cls.per_member} free {cls.accelerator} each"
        nodes = len(roomy)
        refused = _most_common(refusals)
        return (f"{rule}: {need}, {nodes}{scope} {'has' if nodes == 1 else 'have'} room and {allowed} of them "
                f"{'admits' if allowed == 1 else 'admit'} one ({refused})"), (rule,)
    finally:
        for member, _ in partial:
            occupancy.uncount(member.uid)


def _device_room_shortage(cls: _Class, room: Mapping[int, set[str]], pool: NodePool, occupancy: Occupancy) -> str:
    """Too few devices for the class (`room`: its eligible nodes by how many members' devices
    each has): the allocator's words for a few nodes, the room's figures for many."""
    candidates = occupancy.devices.nodes_with_devices_among(cls.eligible, EXPLAINED_DEVICE_NODES)
    if candidates is not None:
        nodes = [pool.nodes[name] for name in candidates]
        explained = occupancy.devices.shortage(nodes, cls.devices, len(cls.members))
        if explained:
            return explained
        reasons = _device_refusals(nodes, cls, cls.members[0], occupancy)
        reasons.pop(None, None)
        if reasons:
            return (f"no eligible node with devices can allocate the claims of {cls.members[0].name} "
                    f"({_most_common(reasons)})")
    most = max((count for count, names in room.items() if names), default=None)
    at_most = f", at most {most} on one node ({max(room[most])})" if most else ""
    nodes, members = sum(len(names) for names in room.values()), sum(c * len(names) for c, names in room.items())
    return (f"needs devices for {len(cls.members)} members like {cls.members[0].name}; the {nodes} eligible nodes "
            f"with devices have room for {members}{at_most}")


def _device_refusals(nodes: Iterable[Node], cls: _Class, member: Member, occupancy: Occupancy) -> Counter:
    """Why the allocator would refuse one more member of the class on each node (None: it would not)."""
    devices = occupancy.devices
    return Counter(devices.refusal(node, devices.demand_on(node, cls.devices, member.requests)) for node in nodes)


def _most_common(reasons: Counter) -> str:
    """The three most frequent reasons with their counts: `4 not Ready, 1 cordoned`."""
    return ", ".join(f"{n} {reason}" for reason, n in reasons.most_common(3))


def _accelerator_shortage(cls: _Class, pool: NodePool, ledger: Ledger) -> str | None:
    """Too few free accelerators on the eligible nodes for the class, or None when there are enough.
    The class's room holds the amounts that take a member (counted from the same ledger when the
    plan began); the nodes with fewer free are looked at only to say how short the class is."""
    name, per_member, count = cls.accelerator, cls.per_member, len(cls.members)
    room = sum(free // per_member * len(names) for free, names in cls.room.items())
    if room >= count:
        return None
    fewer = _room(pool, ledger, name, cls.eligible, lambda free: 0 < free < per_member)
    free_on = [(free, len(names)) for free, names in (*cls.room.items(), *fewer.items())]
    total = sum(free * nodes for free, nodes in free_on)
    most = max((free for free, _ in free_on), default=0)
    return (f"needs {count} × {per_member} {name} ({count * per_member} in all, {per_member} on one node each); "
            f"eligible nodes have {total} free, at most {most} on one node, room for {room} such members")


def _resource_shortage(cls: _Class, partial: list[Assignment], ledger: Ledger) -> tuple[str, tuple[str, ...]]:
    """The resource most often short for one more member on the eligible nodes, after `partial`."""
    taken: dict[str, Resources] = {}
    for member, node in partial:
        add_into(taken.setdefault(node, {}), usage(member.requests))
    short: Counter = Counter()
    for name in cls.eligible:
        free = subtract(ledger.free(name), taken.get(name, {}))
        short.update(resource for resource, value in cls.demand.items() if value > free.get(resource, 0))
    if not short:
        return f"the {len(cls.eligible)} eligible nodes have room for fewer members", ()
    resource, nodes = max(short.items(), key=lambda item: (item[1], item[0]))
    return (f"each member needs {_amount(cls.demand[resource])} {resource}; "
            f"{nodes} of {len(cls.eligible)} eligible nodes have less free"), (resource,)


def _amount(value: Fraction | int) -> str:
    """Bytes in Gi/Mi when they divide evenly, everything else as the API writes it."""
    value = Fraction(value)  # the ledger's whole amounts are ints
    for suffix, unit in (("Gi", 2**30), ("Mi", 2**20)):
        if value >= unit and (value / unit).denominator == 1:
            return f"{value // unit}{suffix}"
    return format_quantity(value)
