"""The nodes one class of members may use, in packing order (`planning.packing`): partly used
nodes before untouched ones, and within each by free accelerators, worked out only as far as a
plan reads them.

The ledger keeps each amount's nodes in name order (`Ledger.names_by_free`): those nodes are
taken in packing order only as far as the plan reads them (`_Bucket`), and what a plan works out
from one amount's nodes (which are eligible, how many each domain has) the node pool keeps until
they change, so that planning every group after a restart costs what each plan reads, not the
nodes times the groups. Ties break as the full sort would: by name within an amount.
"""

import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from math import floor

from gangkeeper.controller.cache.capacity import Ledger, members_fitting
from gangkeeper.controller.cache.occupancy import Occupancy
from gangkeeper.controller.checks.dra.rooms import ROOM_LIMIT
from gangkeeper.controller.checks.eligibility import NodePool
from gangkeeper.controller.planning.classes import MemberClass
from gangkeeper.controller.planning.plans import Scope
from gangkeeper.resources import Resources, subtract


class Candidates:
    """The nodes one class may use, handed out in packing order (`planning.packing`'s module docstring).

    A tier is 0 for partly used nodes, 1 for untouched ones (for a class without accelerators,
    see `shelf`).

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

    def __init__(self, cls: MemberClass, pool: NodePool, ledger: Ledger, taken: Mapping[str, Resources], scope: Scope,
                 occupancy: Occupancy | None = None):
        self._cls, self._pool, self._ledger, self._taken, self._occupancy = cls, pool, ledger, taken, occupancy
        self._used: set[str] = set()
        self._holds: dict[str, int] = {}
        self._per_member = cls.per_member if cls.accelerator else None
        if occupancy is not None:
            self._used = set(occupancy.mixed_holds(cls.device_demand, cls.members[0].requests, pool))
        self._checked = False  # whether eligibility and the scope are checked as nodes are looked at
        self._scope = scope
        buckets: Mapping[tuple[int, int], Iterable[str]]
        if occupancy is not None and cls.devices and cls.accelerator is None:
            buckets, self._per_member = _device_buckets(cls, pool, occupancy), 1
            self._checked = True
        else:
            buckets = shelf(cls, pool, ledger, taken, scope)
        self._by_preference: list[tuple[tuple[int, int], Iterable[str]]] = sorted(buckets.items(),
                                                                                  key=lambda item: item[0])
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
                holds = self._allocatable(name, holds, self._occupancy)
            self._holds[name] = holds
        return holds

    def _inside(self, name: str) -> bool:
        if not self._checked:
            return True  # the shelf holds only the class's nodes in the scope
        return name in self._cls.eligible and (self._scope is None or name in self._scope)

    def _allocatable(self, name: str, limit: int, occupancy: Occupancy) -> int:
        """How many members, at most `limit`, get their devices on the node one after the other:
        for a class shelved by its device room, the room's count (read when shelved, and nothing
        is held while the class is placed), without asking the allocator again."""
        node, devices, member = self._pool.nodes[name], occupancy.devices, self._cls.members[0]
        if self._checked and limit <= ROOM_LIMIT:
            return min(limit, devices.room_count(self._cls.device_demand, name))
        demand = devices.demand_on(node, self._cls.device_demand, member.requests)
        return devices.fits(node, demand, limit) if demand else limit

    def _take(self, name: str, count: int) -> tuple[str, int]:
        self._used.add(name)
        return name, count


def shelf(cls: MemberClass, pool: NodePool, ledger: Ledger, taken: Mapping[str, Resources],
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

        nodes = iter(pool.nodes) if scope is None else iter(sorted(scope))
        _Deal(nodes, cpu_key, {key: buckets.setdefault(key, _Bucket()) for key in ((0, 0), (1, 0), (2, 0))})
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
        def key_of(name: str, amount: int = amount) -> tuple[int, int] | None:
            if name in taken:
                left = floor(ledger.free(name).get(accelerator, 0) - taken[name].get(accelerator, 0))
                return (0, -amount) if left == amount else None  # else moved, or too few left
            return int(amount >= pool.nodes[name].allocatable.get(accelerator, 0)), -amount

        # Partly used: a node of the plan's, or one with more than the amount. With neither, every node
        # of the amount is untouched, and a tier 0 bucket would read them all to find none.
        tiers = (0, 1) if taken or pool.most(accelerator) > amount else (1,)
        dealt = {(tier, -amount): buckets.setdefault((tier, -amount), _Bucket()) for tier in tiers}
        _Deal(_inside(names, scope, pool, (accelerator, amount)), key_of, dealt)
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


def _inside(names: tuple[str, ...], scope: Scope, pool: NodePool, slot: tuple[str, int]) -> Iterator[str]:
    """The scope's names among `names` (one amount's), in their order: for a scope much smaller
    than the names, its own names sorted (the same names, in the same order); otherwise those
    the pool keeps for the scope and the amount, which follow the nodes that move between
    amounts (`NodePool.eligible_among`): a domain may have few of an amount's names, or none,
    and picking them out as they are read would read every name of the amount for each group."""
    if scope is None:
        return iter(names)
    if len(scope) * 8 < len(names):
        return iter(sorted(scope.intersection(names)))
    return iter(pool.eligible_among(scope, names, (*slot, scope)))


class _Bucket:
    """The names of one preference key in packing order, worked out as far as they are read:
    those known so far, then what its `_Deal` hands out, then `after` once the deal is done."""

    __slots__ = ("names", "deal", "after", "__weakref__")

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
    its `after` names and the deal leaves it.

    The buckets hold their deal, the deal only weak references to them: no reference cycle, so
    that a plan's shelf is freed as soon as the plan is made (a pass holds the cyclic garbage
    collector off: `deciding.reconciler.reconcile`). A bucket no one reads any more is dealt nothing."""

    __slots__ = ("_names", "_key_of", "_buckets")

    def __init__(self, names: Iterator[str], key_of: Callable[[str], tuple[int, int] | None],
                 buckets: Mapping[tuple[int, int], _Bucket]):
        self._names, self._key_of = names, key_of
        self._buckets = {key: weakref.ref(bucket) for key, bucket in buckets.items()}
        for bucket in buckets.values():
            bucket.deal = self

    def next(self) -> None:
        """Hand out the next name that has a bucket, or finish."""
        for name in self._names:
            key = self._key_of(name)
            if key is not None:
                bucket = self._buckets[key]()
                if bucket is not None:
                    bucket.names.append(name)
                return
        for ref in self._buckets.values():
            bucket = ref()
            if bucket is not None:
                bucket.names += bucket.after
                bucket.deal = None


def _device_buckets(cls: MemberClass, pool: NodePool, occupancy: Occupancy) -> dict[tuple[int, int], Sequence[str]]:
    """For a class whose devices all come from its claims: the nodes with devices for at least
    one member, keyed by how many members' devices each has (most first), by name within a key.
    Every node with devices is listed; eligibility and the domain are checked when one is looked at."""
    room = occupancy.room(cls.members[0], cls.device_demand, pool) or {}
    return {(0, -count): occupancy.devices.room_order(cls.device_demand, count) for count in room}
