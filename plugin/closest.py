"""Which nodes came closest to taking a waiting group's members, and what each lacks.

The planner's NoFit says which filter or resource keeps the group out, over all nodes; a user
deciding what to free, or where to ask for room, wants the nodes one by one. The members are
taken as the planner takes them (`planning.classes`: the class of the members hardest to place,
with the most accelerators each), and every node is ranked: those that take one or more of them
first (kept out, if they are, by the pods around them), then those that may run one but lack room,
the least short first, then those a filter refuses, with the filter's words. Read on the ledger
the controller holds: bound pods and reservations counted.
"""

from collections.abc import Mapping
from fractions import Fraction

from gangkeeper.controller.cache.capacity import Ledger, members_fitting
from gangkeeper.controller.cache.occupancy import Occupancy
from gangkeeper.controller.checks.eligibility import NodePool, refusal
from gangkeeper.controller.model.members import Group
from gangkeeper.controller.planning.classes import member_classes
from gangkeeper.quantity import format_quantity
from gangkeeper.resources import PODS, Amount

CLOSEST = 5  # nodes named, at most
_BYTES = ("memory", "ephemeral-storage", "hugepages-")
TAKES, SHORT, REFUSED = 0, 1, 2  # how close a node came, in rank order


def closest_nodes(group: Group, pool: NodePool, ledger: Ledger, occupancy: Occupancy | None,
                  at_most: int = CLOSEST) -> list[dict]:
    """The `at_most` nodes closest to taking the group's hardest waiting members: node, what it
    has free of what they ask, how many it takes, and what keeps it from taking one ("" when
    nothing does)."""
    members = group.waiting_members
    if not members:
        return []
    hardest = member_classes(members, pool, ledger, None)[0]
    member, demand = hardest.members[0], hardest.demand
    ranked: list[tuple[tuple, dict]] = []
    for name, node in pool.nodes.items():
        free = ledger.free(name)
        refused = refusal(member, node, free)
        if refused is not None:
            ranked.append(((REFUSED, 0, name), _row(name, free, demand, 0, refused)))
            continue
        missing = {resource: value - free.get(resource, 0) for resource, value in demand.items()
                   if value > free.get(resource, 0)}
        if missing:
            short = sum(Fraction(value) / Fraction(demand[resource]) for resource, value in missing.items())
            ranked.append(((SHORT, short, name), _row(name, free, demand, 0, f"lacks {amounts(missing)}")))
            continue
        around = (occupancy.refusal(member, name)
                  if occupancy is not None and occupancy.neighbours_matter(member) else None)
        takes = 0 if around else members_fitting(demand, free, len(hardest.members))
        ranked.append(((TAKES, -takes, name), _row(name, free, demand, takes, around or "")))
    return [row for _, row in sorted(ranked)[:at_most]]


def _row(node: str, free: Mapping[str, Amount], demand: Mapping[str, Amount], takes: int, lacks: str) -> dict:
    asked = {resource: amount(resource, free.get(resource, 0)) for resource in demand if resource != PODS}
    return {"node": node, "free": asked, "takes": takes, "lacks": lacks}


def amounts(figures: Mapping[str, Amount]) -> str:
    """`8 nvidia.com/gpu, 16Gi memory`, pod slots as `a pod slot`."""
    return ", ".join("a pod slot" if resource == PODS else f"{amount(resource, value)} {resource}"
                     for resource, value in sorted(figures.items()))


def amount(resource: str, value: Amount) -> str:
    """Bytes in Gi or Mi when they divide evenly, everything else as the API writes it."""
    value = Fraction(value)
    if resource.startswith(_BYTES):
        for suffix, unit in (("Gi", 2**30), ("Mi", 2**20)):
            if abs(value) >= unit and (value / unit).denominator == 1:
                return f"{value // unit}{suffix}"
    return format_quantity(value)
