"""The planner's index of devices per demand: for each demand asked about, how many of its pods
each node with devices of its own takes now, and the nodes by that count (`Room`), as the
ledger's `nodes_by_free` is for an accelerator. Kept by the inventory (`Rooms`): made on first
use, brought up to date with the nodes whose devices were taken or freed since it was last read,
copied on write like the inventory's tables.
"""

from collections.abc import Callable, Hashable, Mapping, Set

from gangkeeper.controller.model.claims import DeviceDemand
from gangkeeper.controller.model.nodes import Node

ROOM_LIMIT = 1024  # pods of one demand a node is counted as taking, at most

Fits = Callable[[Node, DeviceDemand, dict[Hashable, int]], int]  # pods of a demand a node takes, up to ROOM_LIMIT


class Room:
    """How many pods of one demand each node with devices takes now, and the nodes by that count:
    the planner's index for a demand, as the ledger's `nodes_by_free` is for an accelerator."""

    __slots__ = ("nodes", "counts", "by_count", "_ordered")

    def __init__(self, nodes: Mapping[str, Node], counts: Mapping[str, int]):
        self.nodes = dict(nodes)
        self.counts = dict(counts)
        self._ordered: dict[int, list[str]] = {}  # by_count's sets by name, sorted when first asked
        self.by_count: dict[int, set[str]] = {}
        for name, count in self.counts.items():
            if count:
                self.by_count.setdefault(count, set()).add(name)

    def set(self, name: str, count: int) -> None:
        before = self.counts.get(name, 0)
        if before == count:
            return
        self._ordered.pop(before, None)
        self._ordered.pop(count, None)
        if before:
            bucket = self.by_count[before]
            bucket.discard(name)
            if not bucket:
                del self.by_count[before]
        if count:
            self.by_count.setdefault(count, set()).add(name)
        self.counts[name] = count

    def copy(self) -> "Room":
        clone = Room.__new__(Room)
        clone.nodes, clone.counts = self.nodes, dict(self.counts)
        clone.by_count = {count: set(names) for count, names in self.by_count.items()}
        clone._ordered = dict(self._ordered)
        return clone

    def ordered(self, count: int) -> list[str]:
        names = self._ordered.get(count)
        if names is None:
            names = self._ordered[count] = sorted(self.by_count.get(count, ()))
        return names


class Rooms:
    """The rooms made so far, by demand, and the nodes whose devices changed since they were last
    read (`unrecounted`). Copy-on-write: `copy` shares the table and each room with the source;
    whichever of the two changes the table or a room first takes a private copy of it."""

    __slots__ = ("_rooms", "_owned", "_private", "unrecounted")

    def __init__(self) -> None:
        self._rooms: dict[DeviceDemand, Room] = {}
        self._owned = True  # whether the table is ours alone
        self._private: set[DeviceDemand] | None = None  # rooms that are ours alone; None: all of them
        self.unrecounted: set[str] = set()  # nodes whose devices changed since the rooms were last read

    def __bool__(self) -> bool:
        return bool(self._rooms)

    def __getitem__(self, demand: DeviceDemand) -> Room:
        return self._rooms[demand]

    def get(self, demand: DeviceDemand) -> Room | None:
        return self._rooms.get(demand)

    def add(self, demand: DeviceDemand, room: Room) -> None:
        self._table()[demand] = room
        if self._private is not None:
            self._private.add(demand)

    def changed(self, nodes: Set[str]) -> None:
        """These nodes' devices were taken or freed: their counts are brought up to date when next read."""
        self.unrecounted |= nodes

    def recount(self, fits: Fits) -> None:
        """Move the nodes whose devices changed since a room was last read to their new counts in
        every room: a plan holds and drops devices many times between two reads."""
        nodes, self.unrecounted = self.unrecounted, set()
        rooms = list(self._rooms.items())
        for name in nodes:
            free: dict[Hashable, int] = {}  # demands differing only in counts share the node's free devices
            for demand, room in rooms:
                node = room.nodes.get(name)
                if node is not None:
                    self._own_room(demand).set(name, fits(node, demand, free))

    def forget(self) -> None:
        """The nodes changed (labels, allocatable): rooms are made again on next use."""
        if self._rooms:
            self._table().clear()
        self.unrecounted = set()

    def copy(self) -> "Rooms":
        clone = Rooms.__new__(Rooms)
        clone._rooms = self._rooms
        self._owned = clone._owned = False
        self._private, clone._private = set(), set()
        clone.unrecounted = set(self.unrecounted)
        return clone

    def _table(self) -> dict[DeviceDemand, Room]:
        if not self._owned:
            self._rooms = self._rooms.copy()
            self._owned = True
        return self._rooms

    def _own_room(self, demand: DeviceDemand) -> Room:
        rooms = self._table()
        if self._private is not None and demand not in self._private:
            rooms[demand] = rooms[demand].copy()
            self._private.add(demand)
        return rooms[demand]
