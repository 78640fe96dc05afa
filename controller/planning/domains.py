"""Which topology domains a group with a rule (`model.members.TopologyRule`) is tried in, in which order,
and how to say that none holds it. Pure arithmetic over what each domain offers; the planner
places the members (`planning.rule_search`).

A domain is the set of nodes sharing one value of a node label. What a domain offers a group is
counted as the planner counts a whole cluster before placing (`_fits_somewhere`): per class of
identical members, how many the free accelerators of its eligible nodes hold, node by node.
Other resources, devices and neighbours are left to the placement, which moves on to the next
domain when one does not take the group after all.

BestFit: among the domains that hold the group, partly used ones before untouched ones, so that
whole domains stay free for the next large job; then the one left with the fewest free
accelerators (fewest stranded); then by value, so that a pass is deterministic.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import ge

from gangkeeper.controller.model.members import Member, rank_order

NAMED = 10  # domains a message names at most


@dataclass(slots=True)
class DomainRoom:
    """What one domain offers: `room[i]` members of the i-th class with accelerators fit there;
    `free` accelerators of the hardest class's kind are free on the nodes it may use, of the
    `capacity` its nodes have in all."""

    value: str
    room: list[int]
    free: int = 0
    capacity: int = 0

    def holds(self, need: Sequence[int]) -> bool:
        return all(map(ge, self.room, need))

    @property
    def untouched(self) -> bool:
        return self.free >= self.capacity


def best_fit(rooms: Iterable[DomainRoom], need: Sequence[int]) -> list[DomainRoom]:
    """The domains that hold `need`, best first (module docstring)."""
    return sorted((room for room in rooms if room.holds(need)), key=lambda r: (r.untouched, r.free, r.value))


def fewest(rooms: Iterable[DomainRoom], need: Sequence[int]) -> list[DomainRoom] | None:
    """As few domains as hold `need` together, or None when all of them do not: the roomiest
    first, and for the last one the tightest that completes the set. With one class this is the
    fewest domains there are; with several, the first class decides the order."""
    ranked = sorted(rooms, key=lambda r: (-r.room[0] if r.room else 0, r.value))
    chosen: list[DomainRoom] = []
    total = [0] * len(need)
    for position, room in enumerate(ranked):
        if all(t >= wanted for t, wanted in zip(total, need)):
            break
        rest = [max(0, wanted - t) for t, wanted in zip(total, need)]
        completing = best_fit(ranked[position:], rest)
        room = completing[0] if completing else room
        chosen.append(room)
        total = [t + r for t, r in zip(total, room.room)]
        if completing:
            break
    return chosen if all(t >= wanted for t, wanted in zip(total, need)) else None


def slices(members: Iterable[Member], size: int | None) -> list[tuple[Member, ...]]:
    """The group's live members in consecutive runs of `size`, in their order (`model.members.rank_order`:
    by rank, then by name); the last run is shorter when `size` does not divide the
    group. Without a size the group is one slice."""
    ordered = rank_order(member for member in members if not member.terminal)
    size = size if size and size > 0 else max(len(ordered), 1)
    return [tuple(ordered[start:start + size]) for start in range(0, len(ordered), size)]


def noun(label: str) -> str:
    """What one domain of the label is called in a message: `zone` for topology.kubernetes.io/zone."""
    return label.rsplit("/", 1)[-1]


def shortage(kind: str, label: str, needs: str, rooms: Iterable[DomainRoom], count: int, needed: int,
             after: str = "") -> str:
    """Why no domain of `label` holds the group (or a slice of it): what it `needs` in one domain,
    then the domains' free accelerators, the freest first, at most `NAMED` of them. A domain with
    the `needed` accelerators free, but on nodes with room for fewer than the `count` members of
    the hardest class, says how many."""
    rooms = sorted(rooms, key=lambda r: (-r.free, r.value))
    shown = [f"{room.value}: {room.free} free" + (f" (room for {room.room[0]} of {count} members)"
                                                   if room.room and room.free >= needed else "")
             for room in rooms[:NAMED]]
    more = f" and {len(rooms) - NAMED} more" if len(rooms) > NAMED else ""
    listed = "; " + ", ".join(shown) + more if shown else f"; no eligible node has the label {label}"
    return f"{kind} {label}: needs {needs} in one {noun(label)}{after}{listed}"
