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
milliseconds.
"""

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import ceil, floor

from gangkeeper.controller.capacity import Ledger, members_fitting, usage
from gangkeeper.controller.eligibility import NodePool
from gangkeeper.controller.model import Group, GroupKey, Member
from gangkeeper.quantity import format_quantity
from gangkeeper.resources import Resources, add_into, subtract

ZONE_LABEL = "topology.kubernetes.io/zone"

Assignment = tuple[Member, str]
Domain = tuple[str, str] | None


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


def plan_group(group: Group, pool: NodePool, ledger: Ledger, topology: Topology = Topology()) -> Plan | NoFit:
    members = group.waiting_members
    classes = _member_classes(members, pool, ledger)
    assignments: list[Assignment] = []
    for domain in _domains(classes, pool, topology):
        assignments = _place(classes, pool, ledger, domain)
        if len(assignments) == len(members):
            return Plan(group.key, tuple(assignments), None if domain is None else "=".join(domain))
    return _no_fit(group, classes, assignments, pool, ledger)


def apply(plan: Plan | NoFit, ledger: Ledger) -> None:
    """Count a plan's members as reserved (or a NoFit's placeable ones, to hold their capacity)."""
    for member, node in plan.assignments if isinstance(plan, Plan) else plan.partial:
        ledger.reserve(member.uid, node, member.requests)


@dataclass(slots=True)
class _Class:
    """Members with identical requests and constraints: they may go to the same nodes."""

    members: list[Member]
    demand: Mapping[str, Fraction]
    eligible: frozenset[str]
    accelerator: str | None
    per_member: int
    room: dict[int, list[str]]


def _member_classes(members: Sequence[Member], pool: NodePool, ledger: Ledger) -> list[_Class]:
    """Identical members together, the hardest to place (most accelerators each) first."""
    alike: dict[tuple, list[Member]] = {}
    for member in members:
        alike.setdefault((tuple(sorted(member.requests.items())), member.placement_key), []).append(member)
    classes = [_member_class(group, pool, ledger) for group in alike.values()]
    return sorted(classes, key=lambda c: (-c.per_member, -len(c.members)))


def _member_class(members: list[Member], pool: NodePool, ledger: Ledger) -> _Class:
    requests = members[0].requests
    wanted = [(value, name) for name, value in requests.items() if ledger.is_accelerator(name)]
    eligible = pool.eligible(members[0])
    if not wanted:
        return _Class(members, usage(requests), eligible, None, 0, {})
    amount, accelerator = max(wanted)
    per_member = ceil(amount)
    room = {free: sorted(names & eligible)
            for free, names in ledger.nodes_by_free(accelerator).items() if free >= per_member}
    return _Class(members, usage(requests), eligible, accelerator, per_member,
                  {free: names for free, names in room.items() if names})


def _domains(classes: Sequence[_Class], pool: NodePool, topology: Topology) -> list[Domain]:
    """Domains with enough free accelerators for every class, preferred first; then anywhere."""
    packed = [c for c in classes if c.accelerator]
    preferred: list[Domain] = []
    for label in topology.labels:
        values = pool.label_values(label)
        members_room: dict[str, list[int]] = {}
        spare: Counter = Counter()
        for index, cls in enumerate(packed):
            for free, names in cls.room.items():
                for value, nodes in Counter(map(values.get, names)).items():
                    if value is not None:
                        members_room.setdefault(value, [0] * len(packed))[index] += free // cls.per_member * nodes
                        spare[value] += free * nodes
        fitting = [value for value, room in members_room.items()
                   if all(r >= len(c.members) for r, c in zip(room, packed))]
        preferred += [(label, value) for value in sorted(fitting, key=lambda v: (spare[v], v))]
    return preferred + [None]


def _place(classes: Sequence[_Class], pool: NodePool, ledger: Ledger, domain: Domain) -> list[Assignment]:
    """As many members as fit, class by class; `taken` is what this plan has put on each node."""
    taken: dict[str, Resources] = {}
    assignments: list[Assignment] = []
    for cls in classes:
        unplaced = list(cls.members)
        candidates = _Candidates(cls, pool, ledger, taken, domain)
        while unplaced:
            pick = candidates.pick(len(unplaced))
            if pick is None:
                break
            node, count = pick
            assignments += [(member, node) for member in unplaced[:count]]
            del unplaced[:count]
            add_into(taken.setdefault(node, {}), {r: value * count for r, value in cls.demand.items()})
    return assignments


class _Candidates:
    """The nodes one class may use, handed out in packing order (module docstring, 2 and 3).

    A tier is 0 for partly used nodes, 1 for untouched ones (for a class without accelerators,
    see `_shelf`).

    Nodes wait in buckets keyed by (tier, −free accelerators), so that each pick looks at
    a handful of buckets rather than at every node. How many members a node really holds (every
    resource, pod slot included) is worked out only for the nodes actually considered.
    """

    __slots__ = ("_cls", "_ledger", "_taken", "_by_preference", "_by_tightness", "_tiers", "_used", "_holds")

    def __init__(self, cls: _Class, pool: NodePool, ledger: Ledger, taken: Mapping[str, Resources], domain: Domain):
        self._cls, self._ledger, self._taken = cls, ledger, taken
        self._used: set[str] = set()
        self._holds: dict[str, int] = {}
        buckets: dict[tuple[int, int], list[str]] = {}
        for name, key in _shelf(cls, pool, ledger, taken, domain):
            buckets.setdefault(key, []).append(name)
        self._by_preference = sorted(buckets.items())
        self._by_tightness = sorted((-negative_free, tier, names) for (tier, negative_free), names in buckets.items())
        self._tiers = sorted({tier for tier, _ in buckets})

    def pick(self, unplaced: int) -> tuple[str, int] | None:
        """The next node and how many members it takes, or None when no node takes any."""
        for tier in self._tiers:
            chosen = self._tightest_holding_all(tier, unplaced) or self._holding_most(tier, unplaced)
            if chosen:
                return chosen
        return None

    def _tightest_holding_all(self, tier: int, unplaced: int) -> tuple[str, int] | None:
        if self._cls.accelerator is None:
            return None
        for free, node_tier, names in self._by_tightness:
            if node_tier == tier and free // self._cls.per_member >= unplaced:
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
        if holds is None:
            free = self._ledger.free(name)
            if name in self._taken:
                free = subtract(free, self._taken[name])
            holds = self._holds[name] = members_fitting(self._cls.demand, free, len(self._cls.members))
        return holds

    def _take(self, name: str, count: int) -> tuple[str, int]:
        self._used.add(name)
        return name, count


def _shelf(cls: _Class, pool: NodePool, ledger: Ledger, taken: Mapping[str, Resources],
           domain: Domain) -> Iterable[tuple[str, tuple[int, int]]]:
    """The class's nodes in the domain, each with its preference key (lowest first).

    With accelerators: partly used nodes (0) before untouched ones (1), most free first. A
    class without accelerators prefers the nodes this plan already uses, then nodes without
    accelerators, so that a launcher pod neither spreads the group nor takes a GPU node's slots.
    """
    values = pool.label_values(domain[0]) if domain else {}

    def inside(names: Iterable[str]) -> list[str]:
        return list(names) if domain is None else [name for name in names if values.get(name) == domain[1]]

    if cls.accelerator is None:
        for name in inside(name for name in pool.nodes if name in cls.eligible):
            has_accelerators = any(ledger.is_accelerator(r) for r in pool.nodes[name].allocatable)
            yield name, (0 if name in taken else 1 + has_accelerators, 0)
        return
    for room_free, names in sorted(cls.room.items()):
        for name in inside(names):
            if name in taken:
                free = floor(ledger.free(name).get(cls.accelerator, 0) - taken[name].get(cls.accelerator, 0))
                if free >= cls.per_member:
                    yield name, (0, -free)
            else:
                untouched = room_free >= pool.nodes[name].allocatable.get(cls.accelerator, 0)
                yield name, (int(untouched), -room_free)


def _no_fit(group: Group, classes: Sequence[_Class], partial: list[Assignment],
            pool: NodePool, ledger: Ledger) -> NoFit:
    placed = {member.uid for member, _ in partial}
    needed = sum(len(c.members) for c in classes)
    short = next(c for c in classes if any(m.uid not in placed for m in c.members))
    why, limiting = _why(short, partial, pool, ledger)
    reason = f"{len(partial)} of {needed} waiting members placeable: {why}"
    return NoFit(group.key, reason, limiting, len(partial), needed, tuple(partial))


def _why(cls: _Class, partial: list[Assignment], pool: NodePool, ledger: Ledger) -> tuple[str, tuple[str, ...]]:
    """Which filter or resource keeps the class out, with the numbers that show it."""
    member = cls.members[0]
    if not cls.eligible:
        refusals = ", ".join(f"{n} {reason}" for reason, n in pool.refusals(member).most_common(3))
        return f"no node may run {member.name} ({refusals or 'there are no nodes'})", ("eligibility",)
    if cls.accelerator is not None:
        explained = _accelerator_shortage(cls, ledger)
        if explained:
            return explained, (cls.accelerator,)
    return _resource_shortage(cls, partial, ledger)


def _accelerator_shortage(cls: _Class, ledger: Ledger) -> str | None:
    name, per_member, count = cls.accelerator, cls.per_member, len(cls.members)
    free_on = [(free, len(names & cls.eligible)) for free, names in ledger.nodes_by_free(name).items()]
    free_on = [(free, nodes) for free, nodes in free_on if nodes and free > 0]
    room = sum(free // per_member * nodes for free, nodes in free_on)
    if room >= count:
        return None
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


def _amount(value: Fraction) -> str:
    """Bytes in Gi/Mi when they divide evenly, everything else as the API writes it."""
    for suffix, unit in (("Gi", 2**30), ("Mi", 2**20)):
        if value >= unit and (value / unit).denominator == 1:
            return f"{value // unit}{suffix}"
    return format_quantity(value)
