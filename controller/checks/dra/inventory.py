"""The DRA objects the cluster holds and what is taken of its devices, one change at a time, and
the questions the planner asks of them (docs/design.md, "Devices").

An `Inventory` holds the DeviceClasses and ResourceSlices (`Published`: what the cluster offers),
the ResourceClaims (their allocations take devices), and the devices that reserved members hold
(`hold`/`forget`) until the scheduler allocates them; `copy` is cheap (copy-on-write), so a pass
tries its plans on a copy. It answers for one pod on one node (`allocate`, `refusal`), for pods
of one demand one after the other (`fits`), for members of different demands in every order the
scheduler may bind them (`colocatable`), and why a group's devices are short (`shortage`), through
the allocator (`checks.dra.allocator`); it keeps, per demand, the nodes by how many of its pods
each takes (`room`, `checks.dra.rooms`).

Extended resources served through DRA (KEP-5004): a pod requesting `example.com/gpu` on a node
that lists it in its allocatable is counted by NodeResourcesFit as before; on a node that does not,
by DRA. `extended_allocatable` is what a node serves of each DeviceClass's `extendedResourceName`
it does not list in its allocatable, for the resource ledger; `extended_claim` is the claim the
scheduler makes for such requests. The scheduler's claim for them carries the annotation
`resource.kubernetes.io/extended-resource-claim: "true"` (pod `status.extendedResourceClaimStatus`
names it). `extended_allocatable` leaves the devices of such claims, and of held extended claims,
out of what it subtracts, because the ledger already counts the requests of the pods that hold them.
"""

from collections import Counter
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from math import ceil

from gangkeeper.controller.checks.dra.allocator import (
    Allocator,
    Busy,
    Interleavings,
    InUse,
    PendingClaim,
    allocation_of,
)
from gangkeeper.controller.checks.dra.cel import Broken
from gangkeeper.controller.checks.dra.demand import exclusive, extended_claim, interned
from gangkeeper.controller.checks.dra.devices import NodeDevices
from gangkeeper.controller.checks.dra.matching import Matching
from gangkeeper.controller.checks.dra.published import Published
from gangkeeper.controller.checks.dra.rooms import ROOM_LIMIT, Room, Rooms
from gangkeeper.controller.model.claims import ALL, Claim, ClaimKey, ClaimResult, DeviceDemand, DeviceKey, DeviceRequest
from gangkeeper.controller.model.nodes import Node
from gangkeeper.controller.reading.claims import Unsupported, allocation_from_api, claim_from_api
from gangkeeper.names import EXTENDED_RESOURCE_CLAIM_ANNOTATION

_COPIED = ("_claims", "_taken", "_extended", "_holds", "_pending")


@dataclass(frozen=True, slots=True)
class _Hold:
    node: str
    devices: tuple[tuple[DeviceKey, bool], ...]  # (device, for an extended-resource claim)
    shared: tuple[ClaimKey, ...]  # shared claims this member holds (allocated by the first holder)


class Inventory:
    """DeviceClasses, ResourceSlices, ResourceClaims and held devices, changed one object at a time.

    Copy-on-write: `copy` shares every table with the source; whichever of the two changes a
    table first takes a private copy of it (a shallow one: the values are immutable). What CEL
    said of a device shape, and which devices of a sequence of shapes a request may take, is
    knowledge, not state: the copies share it for good (`Matching`).
    """

    def __init__(self) -> None:
        self._matching = Matching()
        self._published = Published(self._matching.shapes)
        self._claims: dict[ClaimKey, Claim] = {}
        self._taken: dict[DeviceKey, int] = {}  # holders of each device in use
        self._extended: dict[DeviceKey, int] = {}  # of which extended-resource claims
        self._holds: dict[str, _Hold] = {}
        self._pending: dict[ClaimKey, PendingClaim] = {}
        self._rooms = Rooms()
        self._explicit = 0  # devices taken by explicit claims and holds (not for extended resources)
        self._explicit_changed: set[str] = set()  # nodes whose explicitly taken devices changed since asked
        self._owned: set[str] = set(_COPIED)

    # --- objects from the API -----------------------------------------------------------------

    def put_device_class(self, obj: Mapping) -> None:
        self._published.put_device_class(obj)
        self.forget_rooms()

    def remove_device_class(self, name: str) -> None:
        if self._published.remove_device_class(name):
            self.forget_rooms()

    def put_slice(self, obj: Mapping) -> None:
        self._published.put_slice(obj)
        self.forget_rooms()

    def remove_slice(self, name: str) -> None:
        if self._published.remove_slice(name):
            self.forget_rooms()

    def put_claim(self, obj: Mapping) -> None:
        metadata = obj.get("metadata") or {}
        key = (metadata.get("namespace", ""), metadata.get("name", ""))
        self.remove_claim(*key)
        try:
            claim = claim_from_api(obj, key[1], key)
        except Unsupported:  # its devices are still taken; no pod of ours can be planned with it
            annotations = metadata.get("annotations") or {}
            claim = Claim(key[1], (), shared=key, allocation=allocation_from_api(obj),
                          extended=annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true")
        self._own("_claims")[key] = claim
        if claim.allocation is not None:
            self._take(exclusive(claim.allocation.results), claim.extended, +1)

    def remove_claim(self, namespace: str, name: str) -> None:
        old = self._claims.get((namespace, name))
        if old is not None:
            del self._own("_claims")[(namespace, name)]
            if old.allocation is not None:
                self._take(exclusive(old.allocation.results), old.extended, -1)

    # --- members the planner reserved -----------------------------------------------------------

    def hold(self, uid: str, node: Node, demand: DeviceDemand) -> tuple[ClaimResult, ...] | None:
        """Take the devices the member would get on the node, until `forget`; None if it does not fit.

        Forget a member once it is bound and its claims are allocated: until then its devices
        count twice (the hold and the claim), which errs on the safe side.
        """
        self.forget(uid)
        allocator, devices, busy = self._allocator(), self._devices(node), self._busy()
        results, _ = allocator.attempt(node, devices, demand, busy, self._pending)
        if results is None:
            return None
        taken, shared = [], []
        for claim, result in zip(demand, results):
            if allocation_of(claim, self._claims) is None:
                if claim.shared is not None:
                    shared.append((claim, claim.shared, result))
                else:
                    taken += [(key, claim.extended) for key in exclusive(result)]
        own = frozenset(key for key, _ in taken)
        for claim, key, result in shared:
            pending = self._pending.get(key)
            if pending is None:
                pending = PendingClaim(node.name, result, allocator.reach(result), allocator.mixed(claim, devices, busy),
                                       claim.extended, frozenset(), frozenset())
                self._take(exclusive(result), claim.extended, +1)
            self._own("_pending")[key] = replace(pending, holders=pending.holders | {uid}, beside=pending.beside | own)
        self._take_all(taken, +1)
        self._own("_holds")[uid] = _Hold(node.name, tuple(taken), tuple(key for _, key, _ in shared))
        return results

    def forget(self, uid: str) -> None:
        hold = self._holds.get(uid)
        if hold is None:
            return
        del self._own("_holds")[uid]
        self._take_all(hold.devices, -1)
        for key in hold.shared:
            pending = self._pending[key]
            if pending.holders == {uid}:
                del self._own("_pending")[key]
                self._take(exclusive(pending.results), pending.extended, -1)
            else:
                holders = pending.holders - {uid}
                beside = frozenset(device for holder in holders for device, _ in self._holds[holder].devices)
                self._own("_pending")[key] = replace(pending, holders=holders, beside=beside)

    def held(self, uid: str) -> str | None:
        """The node on which the member holds devices, if it does."""
        hold = self._holds.get(uid)
        return None if hold is None else hold.node

    # --- the allocator ---------------------------------------------------------------------------

    def allocate(self, node: Node, demand: DeviceDemand,
                 taken: Collection[DeviceKey] = frozenset()) -> tuple[ClaimResult, ...] | None:
        """The devices the scheduler would give one pod on the node, per claim, or None."""
        return self._allocator().attempt(node, self._devices(node), demand, self._busy(taken), self._pending)[0]

    def refusal(self, node: Node, demand: DeviceDemand, taken: Collection[DeviceKey] = frozenset()) -> str | None:
        """Why the scheduler would not bind one pod of this demand on the node, in its words."""
        return self._allocator().attempt(node, self._devices(node), demand, self._busy(taken), self._pending)[1]

    def fits(self, node: Node, demand: DeviceDemand, count: int, taken: Collection[DeviceKey] = frozenset(),
             free: dict[Hashable, int] | None = None) -> int:
        """How many pods of this demand (at most `count`) the node takes, one after the other.
        `free`, given, remembers the node's free devices per plain request (`one_request_fit`)
        for other demands asked about on the node before its devices change."""
        if count <= 0 or not demand:
            return max(count, 0)
        devices, busy, allocator = self._devices(node), self._busy(taken), self._allocator()
        simple = allocator.one_request_fit(devices, demand, busy, free)
        if simple is not None:
            return min(count, simple)
        orders = allocator.orders(devices, [demand], busy)
        if isinstance(orders, str):
            return 0
        return min(allocator.placed_in_turn(node, order, demand, count, busy, self._pending) for order in orders)

    def colocatable(self, node: Node, demands: Sequence[DeviceDemand],
                    taken: Collection[DeviceKey] = frozenset()) -> str | None:
        """None when these members fit on the node in every order the scheduler may bind them.

        The scheduler binds a group's pods in an order gangkeeper does not choose and allocates
        first-fit, so members of different demands that fit in one order may not in another.
        Every interleaving is checked, each allocation state once; beyond `MAX_STATES` states, or
        `MAX_DEVICE_ORDERS` device orders, co-location is refused rather than guessed.
        """
        distinct = Counter(demand for demand in demands if demand)
        if not distinct:
            return None
        devices, busy, allocator = self._devices(node), self._busy(taken), self._allocator()
        orders = allocator.orders(devices, list(distinct), busy)
        if isinstance(orders, str):
            return orders
        for order in orders:
            reason = Interleavings(allocator, node, order, distinct, self._pending).refusal(busy)
            if reason is not None:
                return reason
        return None

    def shortage(self, nodes: Iterable[Node], demand: DeviceDemand, members: int,
                 taken: Collection[DeviceKey] = frozenset()) -> str | None:
        """Which devices keep `members` pods of this demand out of these nodes, with the numbers.

        e.g. `needs 6 devices of class gpu.example.com on one node; dra-1 has 4`. None when
        every request has room on its own (then another rule or the order keeps them out).
        """
        nodes, busy, allocator = list(nodes), self._busy(taken), self._allocator()
        for claim in demand:
            if allocation_of(claim, self._claims) is not None or claim.shared in self._pending:
                continue
            for request in claim.requests:
                variant = request.first_available[0] if request.first_available else request
                if variant.mode == ALL:
                    continue
                explained = allocator.request_shortage(nodes, claim, variant, members, busy, self._devices)
                if explained:
                    return explained
        return None

    # --- extended resources (KEP-5004) -----------------------------------------------------------

    def extended_allocatable(self, node: Node) -> dict[str, int]:
        """Per extended resource the node does not list (or lists as 0) but a DeviceClass serves:
        how many of the class's devices the node has that no explicit claim or hold takes.

        Add it to the node's allocatable in the ledger, which counts the pods' requests of it.
        Holding explicit claims on a node lowers it: a plan that holds them and also places
        extended-resource members on the same node must look at it again after the holds.
        A class whose selectors fail on the node's devices serves 0 there (the scheduler errs).
        """
        devices, served = self._devices(node), {}
        for resource, class_name in self._published.extended_names.items():
            if node.allocatable.get(resource, 0) != 0:
                continue
            cls, request = self._published.classes[class_name], DeviceRequest(resource, class_name)
            matching = self._matching.matching_of(cls, request, devices)
            if isinstance(matching, Broken):  # served 0 where some device matches, nothing where none does
                if any(self._matching.selectable(cls, request, d) for d in devices.devices):
                    served[resource] = 0
            elif matching:
                listed = devices.devices
                served[resource] = sum(1 for position in matching if not self._taken_explicitly(listed[position].key))
        return served

    def extended_claim(self, requests: Mapping[str, Fraction], node: Node) -> Claim | None:
        """The claim the scheduler makes on this node for the pod's requests of extended resources
        that a DeviceClass serves and the node's allocatable does not list; None if there are none."""
        names = self._published.extended_names  # asked first: a quantity's comparison costs more than a name's look-up
        served = tuple((resource, names[resource], ceil(value)) for resource, value in requests.items()
                       if resource in names and value > 0 and node.allocatable.get(resource, 0) == 0)
        return extended_claim(tuple(sorted(served))) if served else None

    def explicit_changes(self) -> set[str]:
        """The nodes with devices of their own on which explicit claims or holds took or gave back
        devices since the last call: what DRA serves of extended resources there may have changed."""
        changed, self._explicit_changed = self._explicit_changed, set()
        return changed

    @property
    def explicit_in_use(self) -> bool:
        """Whether some device is taken by an explicit claim or hold: extended-resource pods then
        share devices with claims, and the ledger's count of the resource is not enough to go by."""
        return self._explicit > 0

    def serves_extended(self, requests: Mapping[str, Fraction]) -> bool:
        """Whether some of these requests name an extended resource a DeviceClass serves."""
        names = self._published.extended_names
        return any(resource in names and value > 0 for resource, value in requests.items())

    def demand_on(self, node: Node, demand: DeviceDemand, requests: Mapping[str, Fraction]) -> DeviceDemand:
        """The pod's demand on this node: its claims, then the extended-resource claim if any."""
        extended = self.extended_claim(requests, node)
        return demand if extended is None else interned(demand + (extended,))

    # --- reading ---------------------------------------------------------------------------------

    def room(self, demand: DeviceDemand, nodes: Iterable[Node]) -> Mapping[int, set[str]] | None:
        """The nodes with devices of their own by how many pods of this demand each takes now
        (at least one), brought up to date when read with the nodes whose devices were taken or
        freed since; made on first use from `nodes`. None when a slice serves nodes by selector or
        to all nodes (ask `fits` per node). Read only. Forget the rooms (`forget_rooms`) when the nodes themselves change."""
        if self._published.serves_every_node or not demand:
            return None
        if self._rooms.unrecounted:
            self._rooms.recount(lambda node, counted, free: self.fits(node, counted, ROOM_LIMIT, free=free))
        room = self._rooms.get(demand)
        if room is None:
            local = {node.name: node for node in nodes if self._published.sees_devices(node.name)}
            room = Room(local, {name: self.fits(node, demand, ROOM_LIMIT) for name, node in local.items()})
            self._rooms.add(demand, room)
        return room.by_count

    def room_order(self, demand: DeviceDemand, count: int) -> Sequence[str]:
        """The nodes the demand's `room` (read just before) lists with this count, by name."""
        return self._rooms[demand].ordered(count)

    def room_count(self, demand: DeviceDemand, name: str) -> int:
        """How many pods of the demand the node takes (at most `ROOM_LIMIT`), as its `room`, read
        just before, counts them: `fits` without asking the allocator again."""
        return self._rooms[demand].counts.get(name, 0)

    def forget_rooms(self) -> None:
        """The nodes changed (labels, allocatable): rooms are made again on next use."""
        self._rooms.forget()

    @property
    def nodes_with_devices(self) -> Collection[str]:
        """Nodes with devices of their own (slices naming them); see `serves_every_node` for the rest."""
        return self._published.nodes_with_devices

    def nodes_with_devices_among(self, names: Collection[str], limit: int) -> list[str] | None:
        """`Published.nodes_with_devices_among`."""
        return self._published.nodes_with_devices_among(names, limit)

    @property
    def serves_every_node(self) -> bool:
        """Whether some slice serves nodes by selector or to all nodes, so any node may have devices."""
        return self._published.serves_every_node

    @property
    def cel_evaluations(self) -> int:
        """How many times a CEL expression was evaluated (every answer is remembered)."""
        return self._matching.cel.evaluations

    def copy(self) -> "Inventory":
        """An independent inventory to try plans on (class docstring)."""
        clone = Inventory.__new__(Inventory)
        clone._matching = self._matching
        clone._published = self._published.copy()
        for name in _COPIED:
            setattr(clone, name, getattr(self, name))
        self._owned, clone._owned = set(), set()
        clone._rooms = self._rooms.copy()
        clone._explicit = self._explicit
        clone._explicit_changed = set()
        return clone

    # --- bookkeeping -----------------------------------------------------------------------------

    def _own(self, name: str) -> dict:
        """The table `name`, private to this inventory (copied the first time after a copy)."""
        table = getattr(self, name)
        if name not in self._owned:
            table = table.copy()
            setattr(self, name, table)
            self._owned.add(name)
        return table

    def _allocator(self) -> Allocator:
        return Allocator(self._published, self._claims, self._matching)

    def _devices(self, node: Node) -> NodeDevices:
        return self._published.devices(node)

    def _take_all(self, devices: Sequence[tuple[DeviceKey, bool]], sign: int) -> None:
        """`_take` for devices each marked whether an extended-resource claim takes it."""
        for extended in (False, True):
            keys = [key for key, of_extended in devices if of_extended is extended]
            if keys:
                self._take(keys, extended, sign)

    def _take(self, keys: Iterable[DeviceKey], extended: bool, sign: int) -> None:
        tables = (self._own("_taken"), self._own("_extended")) if extended else (self._own("_taken"),)
        keys = tuple(keys)
        if not extended:
            self._explicit += sign * len(keys)
        for key in keys:
            for table in tables:
                count = table.get(key, 0) + sign
                if count > 0:
                    table[key] = count
                else:
                    table.pop(key, None)
        watched = not extended and self._published.extended_names
        if self._rooms or watched:
            nodes = frozenset().union(*map(self._published.nodes_of_pool, {(key[0], key[1]) for key in keys}))
            if self._rooms:
                self._rooms.changed(nodes)
            if watched:
                self._explicit_changed |= nodes

    def _taken_explicitly(self, key: DeviceKey) -> bool:
        return self._taken.get(key, 0) > self._extended.get(key, 0)

    def _busy(self, taken: Collection[DeviceKey] = frozenset()) -> Busy:
        return InUse(self._taken, taken) if taken else self._taken
