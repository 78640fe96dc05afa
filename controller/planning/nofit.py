"""Why a group cannot be placed now (`NoFit`), in words its owner can act on: which filter or
resource keeps the first class short of room out, with the numbers that show it."""

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

from gangkeeper.controller.cache.capacity import Ledger, members_fitting, usage
from gangkeeper.controller.cache.occupancy import Occupancy
from gangkeeper.controller.checks.eligibility import NodePool
from gangkeeper.controller.checks.interpod.refusal import (
    AFFINITY_REFUSAL,
    ANTI_AFFINITY_REFUSAL,
    BINDING_ORDER_REFUSAL,
    EXISTING_ANTI_AFFINITY_REFUSAL,
    SPREAD_LABEL_REFUSAL,
    SPREAD_REFUSAL,
)
from gangkeeper.controller.checks.ports import REFUSAL as PORTS_REFUSAL
from gangkeeper.controller.model.members import Group, Member
from gangkeeper.controller.model.nodes import Node
from gangkeeper.controller.planning.classes import MemberClass, accelerator_room, device_bound, devices_of, one_by_one
from gangkeeper.controller.planning.plans import Assignment, NoFit
from gangkeeper.quantity import format_quantity
from gangkeeper.resources import Resources, add_into, subtract


def no_fit(group: Group, classes: Sequence[MemberClass], partial: list[Assignment],
           pool: NodePool, ledger: Ledger, occupancy: Occupancy | None) -> NoFit:
    placed = {member.uid for member, _ in partial}
    needed = sum(len(c.members) for c in classes)
    short = next(c for c in classes if any(m.uid not in placed for m in c.members))
    why, limiting = _why(short, partial, pool, ledger, occupancy)
    reason = f"{len(partial)} of {needed} waiting members placeable: {why}"
    fixed = bool(short.unplaceable) or any(rule in _BOUND_TO_WHAT_EXISTS for rule in limiting)
    return NoFit(group.key, reason, limiting, len(partial), needed, tuple(partial), fixed)


def _why(cls: MemberClass, partial: list[Assignment], pool: NodePool, ledger: Ledger,
         occupancy: Occupancy | None) -> tuple[str, tuple[str, ...]]:
    """Which filter or resource keeps the class out, with the numbers that show it."""
    member = cls.members[0]
    if cls.unplaceable:
        return f"no node may run {member.name}: {cls.unplaceable}", ("devices" if cls.devices else "volumes",)
    if not cls.eligible:
        refusals = _most_common(pool.refusals(member))
        return f"no node may run {member.name} ({refusals or 'there are no nodes'})", ("eligibility",)
    if cls.accelerator is not None:
        explained = _accelerator_shortage(cls, cls.accelerator, pool, ledger)
        if explained:
            return explained, (cls.accelerator,)
    if occupancy is not None and (device_bound(cls, occupancy) or one_by_one(cls, occupancy)):
        found = _occupancy_shortage(cls, partial, pool, ledger, occupancy)
        if found:
            return found
    return _resource_shortage(cls, partial, ledger)


_RULES = {ANTI_AFFINITY_REFUSAL: "anti-affinity", EXISTING_ANTI_AFFINITY_REFUSAL: "existing pods' anti-affinity",
          AFFINITY_REFUSAL: "pod affinity", SPREAD_REFUSAL: "topology spread", SPREAD_LABEL_REFUSAL: "topology spread",
          PORTS_REFUSAL: "host ports", BINDING_ORDER_REFUSAL: "pod affinity"}


# What keeps a member out because of pods that exist: a new node has none of them.
_BOUND_TO_WHAT_EXISTS = frozenset({"pod affinity"})

EXPLAINED_NODES = 128  # nodes a NoFit's explanation examines one by one, at most
EXPLAINED_DEVICE_NODES = 32  # of which the allocator is asked why it refuses, at most


def _occupancy_shortage(cls: MemberClass, partial: list[Assignment], pool: NodePool, ledger: Ledger,
                        occupancy: Occupancy) -> tuple[str, tuple[str, ...]] | None:
    """Devices or neighbours that keep the rest of the class out, after the placeable members.
    Nodes are examined one by one only up to `EXPLAINED_NODES`, and the words say so."""
    placed = {member.uid for member, _ in partial}
    rest = [member for member in cls.members if member.uid not in placed]
    room = occupancy.room(rest[0], cls.device_demand, pool) if cls.devices else None
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
        occupancy.place(member, pool.nodes[node], devices_of(member, occupancy))
    try:
        roomy = [name for name in examined
                 if members_fitting(cls.demand, subtract(ledger.free(name), taken.get(name, {})), 1) >= 1]
        if not roomy:
            return None  # no node has the resources for one more: what is short says why (`_resource_shortage`)
        if cls.devices or cls.extended:
            with_devices = [name for name in roomy
                            if occupancy.devices_fit(pool.nodes[name], cls.device_demand, rest[0].requests)]
            if not with_devices:
                asked = roomy[:EXPLAINED_DEVICE_NODES]
                reasons = _device_refusals((pool.nodes[name] for name in asked), cls, rest[0], occupancy)
                if None in reasons:  # the allocator would, but another demand's holds keep it off (devices_fit)
                    reasons["another member's devices on the node differ"] = reasons.pop(None)
                sample = "" if len(asked) == len(roomy) else f" (the first {len(asked)}: "
                return (f"none of the {len(roomy)} eligible nodes with room{scope} can allocate the claims of "
                        f"{rest[0].name} {sample or '('}{_most_common(reasons)})"), ("devices",)
            roomy = with_devices
        refused_by = [occupancy.refusal(rest[0], name) for name in roomy]
        refusals = Counter(reason for reason in refused_by if reason is not None)
        allowed = refused_by.count(None)
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


def _device_room_shortage(cls: MemberClass, room: Mapping[int, set[str]], pool: NodePool, occupancy: Occupancy) -> str:
    """Too few devices for the class (`room`: its eligible nodes by how many members' devices
    each has): the allocator's words for a few nodes, the room's figures for many."""
    candidates = occupancy.devices.nodes_with_devices_among(cls.eligible, EXPLAINED_DEVICE_NODES)
    if candidates is not None:
        examined = [pool.nodes[name] for name in candidates]
        explained = occupancy.devices.shortage(examined, cls.device_demand, len(cls.members))
        if explained:
            return explained
        reasons = _device_refusals(examined, cls, cls.members[0], occupancy)
        reasons.pop(None, None)
        if reasons:
            return (f"no eligible node with devices can allocate the claims of {cls.members[0].name} "
                    f"({_most_common(reasons)})")
    most = max((count for count, names in room.items() if names), default=None)
    at_most = f", at most {most} on one node ({max(room[most])})" if most else ""
    nodes, members = sum(len(names) for names in room.values()), sum(c * len(names) for c, names in room.items())
    return (f"needs devices for {len(cls.members)} members like {cls.members[0].name}; the {nodes} eligible nodes "
            f"with devices have room for {members}{at_most}")


def _device_refusals(nodes: Iterable[Node], cls: MemberClass, member: Member, occupancy: Occupancy) -> Counter:
    """Why the allocator would refuse one more member of the class on each node (None: it would not)."""
    devices = occupancy.devices
    return Counter(devices.refusal(node, devices.demand_on(node, cls.device_demand, member.requests)) for node in nodes)


def _most_common(reasons: Counter) -> str:
    """The three most frequent reasons with their counts: `4 not Ready, 1 cordoned`."""
    return ", ".join(f"{n} {reason}" for reason, n in reasons.most_common(3))


def _accelerator_shortage(cls: MemberClass, name: str, pool: NodePool, ledger: Ledger) -> str | None:
    """Too few free accelerators on the eligible nodes for the class, or None when there are enough.
    The class's room holds the amounts that take a member (counted from the same ledger when the
    plan began); the nodes with fewer free are looked at only to say how short the class is."""
    per_member, count = cls.per_member, len(cls.members)
    room = sum(free // per_member * len(names) for free, names in cls.room.items())
    if room >= count:
        return None
    fewer = accelerator_room(pool, ledger, name, cls.eligible, lambda free: 0 < free < per_member)
    free_on = [(free, len(names)) for free, names in (*cls.room.items(), *fewer.items())]
    total = sum(free * nodes for free, nodes in free_on)
    most = max((free for free, _ in free_on), default=0)
    return (f"needs {count} × {per_member} {name} ({count * per_member} in all, {per_member} on one node each); "
            f"eligible nodes have {total} free, at most {most} on one node, room for {room} such members")


def _resource_shortage(cls: MemberClass, partial: list[Assignment], ledger: Ledger) -> tuple[str, tuple[str, ...]]:
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
