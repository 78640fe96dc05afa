"""Free capacity per node, kept up to date one pod at a time (docs/design.md, "Capacity").

    free(node) = allocatable − Σ requests of non-terminal pods bound to it
                             − Σ requests of members reserved on it but not yet bound

Every pod takes its requests plus one pod slot (`pods: 1`), as the kube-scheduler counts it.
The ledger is incremental so that planning never rescans the 50,000 pods of a large cluster:
the cache tells it about each pod once, and about each change. A pod is in the ledger at most
once, keyed by uid: when a reserved member binds, its reservation becomes a bound pod, it is
never counted as both.

Free accelerators are also indexed by amount (`nodes_by_free`), so that the planner finds the
nodes with room for an 8-GPU member without looking at the thousands that have none; and, once
the planner has asked for them, in name order (`names_by_free`), kept in order as nodes move
between amounts, so that a plan walks the nodes in its packing order without sorting them. The
names handed out carry the journal of the nodes that came and left since
(`model.names_in_order`), so that what the node pool works out from them follows the few nodes
an admitted plan moves rather than counting every node again.

Every pass plans on a copy, so a copy must be cheap: the per-node usage and free capacity are
shared copy-on-write (the source and the copy each take a private copy of a node's figures
the first time they change them), which makes a copy cost O(nodes) pointer copies rather than
O(nodes × resources) new dicts. The table of counted pods is copied whole, which CPython does
with one memory copy as long as no entry was ever deleted from it (otherwise it rehashes every
key: 5 ms at 50,000 pods), so a forgotten pod leaves a None behind, and the table is rebuilt
without them once they are half of it.

Quantities are exact: `Fraction`s from the API. Inside the ledger a whole amount (bytes, whole
CPUs, accelerators, pod slots: nearly all of them) is kept as an `int`, which is equal to its
Fraction, compares and adds exactly with Fractions, and costs a tenth of a Fraction to add; a
rebuild of 150,000 pods is mostly these additions. Readers get ints or Fractions alike.
"""

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from fractions import Fraction
from functools import cache
from math import floor

from gangkeeper.controller.model.names_in_order import Move, NamesInOrder, full, move_into
from gangkeeper.controller.model.nodes import Node
from gangkeeper.names import DEFAULT_ACCELERATORS
from gangkeeper.resources import PODS, Amount, Resources, is_accelerator

ZERO = Fraction(0)
MAPPINGS_KEPT = 4096  # requests mappings whose usage is known by identity, then forgotten all at once
Figures = dict[str, Amount]  # a node's usage or free capacity, by resource
_NO_RESOURCES: Mapping[str, Amount] = {}


def usage(requests: Mapping[str, Fraction]) -> Resources:
    """What a pod takes from a node's allocatable: its requests plus one pod slot."""
    return {**requests, PODS: requests.get(PODS, ZERO) + 1}


def members_fitting(demand: Mapping[str, Amount], free: Mapping[str, Amount], limit: int) -> int:
    """How many pods taking `demand` each fit in `free`, at most `limit`.

    Only resources the pod asks for are compared, as in the scheduler's NodeResourcesFit: a
    node already over-committed on memory still takes a pod that requests no memory.
    """
    if limit == 1:  # the planner's most frequent question: no division needed
        return int(all(value <= 0 or free.get(name, ZERO) >= value for name, value in demand.items()))
    count = limit
    for name, value in demand.items():
        if value > 0:
            count = min(count, free.get(name, 0) // value)
            if count <= 0:
                return 0
    return count


class Ledger:
    """Allocatable, usage and free capacity of every node, changed pod by pod."""

    __slots__ = ("_allocatable", "_used", "_free", "_pods", "_forgotten", "_by_free", "_is_accelerator", "_usages",
                 "_by_mapping", "_private", "_in_order", "_deferred")

    def __init__(self, nodes: Iterable[Node] = (), accelerator_patterns: Iterable[str] = DEFAULT_ACCELERATORS):
        patterns = tuple(accelerator_patterns)
        self._allocatable: dict[str, Mapping[str, Amount]] = {}
        self._used: dict[str, Figures] = {}
        self._free: dict[str, Figures] = {}
        self._pods: dict[str, tuple[str, Mapping[str, Amount], bool] | None] = {}
        self._forgotten = 0
        self._by_free: dict[str, dict[int, set[str]]] = {}
        # (resource, amount) → the names of `_by_free`'s set in name order, for the amounts asked
        # for (`names_by_free`).
        self._in_order: dict[tuple[str, int], _InOrder] = {}
        # Resource names are few and pattern matching is not free: remember each answer.
        self._is_accelerator = cache(lambda resource: is_accelerator(resource, patterns))
        self._usages: dict[tuple, Mapping[str, Amount]] = {}
        self._by_mapping: dict[int, tuple[Mapping[str, Fraction], Mapping[str, Amount]]] = {}
        self._private: set[str] | None = None  # nodes whose figures are ours alone; None: all of them
        # While in one go (`in_one_go`): node → id of a usage → [that usage, how many more pods take it].
        self._deferred: dict[str, dict[int, list]] | None = None
        for node in nodes:
            self.set_node(node)

    # --- nodes -------------------------------------------------------------------------------

    def set_node(self, node: Node) -> None:
        """Add a node or take its new allocatable; pods already counted on it stay counted."""
        if self._allocatable.get(node.name) == node.allocatable:
            return
        self._allocatable[node.name] = {resource: _whole(value) for resource, value in node.allocatable.items()}
        self._refresh(node.name, set(node.allocatable) | set(self._free.get(node.name, ())))

    def remove_node(self, name: str) -> None:
        """Forget a deleted node's capacity; its pods stay counted until they are forgotten too."""
        self._allocatable.pop(name, None)
        for resource, amount in self._free.pop(name, {}).items():
            self._unindex(resource, amount, name)

    # --- pods ----------------------------------------------------------------------------------

    def bind(self, uid: str, node: str, requests: Mapping[str, Fraction]) -> None:
        """A non-terminal pod bound to `node`; replaces any reservation of the same pod."""
        self._record(uid, node, requests, bound=True)

    def reserve(self, uid: str, node: str, requests: Mapping[str, Fraction]) -> None:
        """A gated member reserved on `node` (or released and not yet bound)."""
        self._record(uid, node, requests, bound=False)

    def forget(self, uid: str) -> None:
        """The pod is gone, terminal, or its reservation was rolled back."""
        entry = self._pods.get(uid)
        if entry is not None:
            node, taken, _ = entry
            self._pods[uid] = None
            self._forgotten += 1
            self._change(node, taken, -1)
            if self._forgotten > len(self._pods) // 2:
                self._pods = {uid: entry for uid, entry in self._pods.items() if entry is not None}
                self._forgotten = 0

    @contextmanager
    def in_one_go(self) -> Iterator[None]:
        """Pods bound, reserved and forgotten meanwhile change their nodes' figures when it ends,
        once per node and distinct usage, rather than pod by pod: a relist binds 150,000 pods,
        nearly all of a few usages, on their nodes. Meanwhile the nodes' figures (`free`,
        `nodes_by_free`) are those from before it; which pods are counted is up to date."""
        if self._deferred is not None:
            yield
            return
        self._deferred = {}
        try:
            yield
        finally:
            deferred, self._deferred = self._deferred, None
            for node, usages in deferred.items():
                self._own(node)
                used = self._used.setdefault(node, {})
                for taken, count in usages.values():
                    for resource, value in taken.items():
                        used[resource] = _whole(used.get(resource, 0) + value * count)
                if node in self._allocatable:
                    self._refresh(node, {resource for taken, _ in usages.values() for resource in taken})

    def is_bound(self, uid: str) -> bool | None:
        """True when counted as bound, False when counted as reserved, None when not counted."""
        entry = self._pods.get(uid)
        return None if entry is None else entry[2]

    # --- reading -------------------------------------------------------------------------------

    def free(self, node: str) -> Mapping[str, Amount]:
        """Free capacity of a known node, pod slots included (read only; empty for unknown nodes)."""
        return self._free.get(node, _NO_RESOURCES)

    def nodes_by_free(self, resource: str) -> Mapping[int, set[str]]:
        """Known nodes by whole free amount of an accelerator resource (read only)."""
        return self._by_free.get(resource, {})

    def names_by_free(self, resource: str, amount: int) -> NamesInOrder:
        """`nodes_by_free(resource)[amount]` in name order, empty when there is none: the same
        tuple as long as that set does not change, so that a reader may remember what it
        worked out from it by the tuple's identity, and update it by what moved from one tuple
        to the next (`names_in_order.moves_between`)."""
        key = (resource, amount)
        in_order = self._in_order.get(key)
        if in_order is None:
            in_order = self._in_order[key] = _InOrder()
        return in_order.hand_out(lambda: sorted(self.nodes_by_free(resource).get(amount, ())))

    def counted(self) -> dict[str, tuple[str, bool]]:
        """uid → (node, bound) of every pod counted: what a consistency check compares."""
        return {uid: (entry[0], entry[2]) for uid, entry in self._pods.items() if entry is not None}

    def usage_of(self, requests: Mapping[str, Fraction]) -> Mapping[str, Amount]:
        """`usage(requests)` as the ledger counts it: whole amounts as ints, which the planner
        multiplies, adds and divides a tenth as dearly as Fractions; shared by every pod that
        asks for the same (read only)."""
        return self._usage(requests)

    def is_accelerator(self, resource: str) -> bool:
        return self._is_accelerator(resource)

    def copy(self) -> "Ledger":
        """An independent ledger to try plans on; the source is left as it is (module docstring)."""
        clone = Ledger.__new__(Ledger)
        clone._allocatable = dict(self._allocatable)
        clone._used = dict(self._used)
        clone._free = dict(self._free)
        clone._pods, clone._forgotten = self._pods.copy(), self._forgotten
        clone._by_free = {r: {a: set(n) for a, n in buckets.items()} for r, buckets in self._by_free.items()}
        clone._in_order = {key: in_order.copy() for key, in_order in self._in_order.items()}
        clone._is_accelerator = self._is_accelerator
        clone._usages, clone._by_mapping = self._usages, self._by_mapping
        clone._deferred = None
        self._private, clone._private = set(), set()
        return clone

    # --- bookkeeping ---------------------------------------------------------------------------

    def _record(self, uid: str, node: str, requests: Mapping[str, Fraction], bound: bool) -> None:
        self.forget(uid)
        if uid in self._pods:
            self._forgotten -= 1
        taken = self._usage(requests)
        self._pods[uid] = (node, taken, bound)
        self._change(node, taken, +1)

    def _usage(self, requests: Mapping[str, Fraction]) -> Mapping[str, Amount]:
        """The pod's usage, shared with every pod that asks for the same (most pods do).

        Pods asking for the same share one requests mapping (`reading.pods.member_from_api`), so the
        usage is found first by that mapping's identity (kept alive beside it, so that its id
        names no other), and only then by its sorted items, which hashes every Fraction."""
        known = self._by_mapping.get(id(requests))
        if known is not None and known[0] is requests:
            return known[1]
        key = tuple(sorted(requests.items()))
        taken = self._usages.get(key)
        if taken is None:
            taken = self._usages[key] = {resource: _whole(value) for resource, value in usage(requests).items()}
        if len(self._by_mapping) >= MAPPINGS_KEPT:
            self._by_mapping.clear()
        self._by_mapping[id(requests)] = (requests, taken)
        return taken

    def _change(self, node: str, taken: Mapping[str, Amount], sign: int) -> None:
        if self._deferred is not None:
            usages = self._deferred.setdefault(node, {})
            deferred = usages.get(id(taken))
            if deferred is None:
                usages[id(taken)] = [taken, sign]
            else:
                deferred[1] += sign
            return
        self._own(node)
        used = self._used.setdefault(node, {})
        for resource, value in taken.items():
            used[resource] = _whole(used.get(resource, 0) + value if sign > 0 else used.get(resource, 0) - value)
        if node in self._allocatable:
            self._refresh(node, taken.keys())

    def _own(self, node: str) -> None:
        """Take a private copy of a node's figures before changing them, if a copy may share them."""
        if self._private is None or node in self._private:
            return
        if node in self._used:
            self._used[node] = dict(self._used[node])
        if node in self._free:
            self._free[node] = dict(self._free[node])
        self._private.add(node)

    def _refresh(self, node: str, resources: Iterable[str]) -> None:
        self._own(node)
        allocatable = self._allocatable[node]
        used = self._used.get(node, _NO_RESOURCES)
        free = self._free.setdefault(node, {})
        for resource in resources:
            before = free.get(resource)
            after = free[resource] = _whole(allocatable.get(resource, 0) - used.get(resource, 0))
            if self._is_accelerator(resource) and before != after:
                if before is not None:
                    self._unindex(resource, before, node)
                self._index(resource, after, node)

    def _index(self, resource: str, amount: Amount, node: str) -> None:
        bucket = self._by_free.setdefault(resource, {}).setdefault(floor(amount), set())
        if node not in bucket:
            bucket.add(node)
            in_order = self._in_order.get((resource, floor(amount)))
            if in_order is not None:
                in_order.move(node, +1)

    def _unindex(self, resource: str, amount: Amount, node: str) -> None:
        buckets = self._by_free.get(resource)
        if buckets is None:
            return
        bucket = buckets.get(floor(amount))
        if bucket is not None and node in bucket:
            bucket.discard(node)
            in_order = self._in_order.get((resource, floor(amount)))
            if in_order is not None:
                in_order.move(node, -1)
            if not bucket:
                del buckets[floor(amount)]


class _InOrder:
    """One amount's names in name order (`Ledger.names_by_free`), brought up to date when asked.

    The nodes that come and go are journaled (`names_in_order`) and made in the list only when
    the names are asked for, so that a pass that asks for none (every answer reused) pays
    nothing for them; a copy shares the list until either side makes its moves in it. A full
    journal is dropped with the list, which the next ask sorts again from the ledger's set."""

    __slots__ = ("names", "shared", "journal", "applied", "handed")

    def __init__(self) -> None:
        self.names: list[str] | None = None  # None: to be sorted again from the set
        self.shared = False  # whether a copy may hold the same list
        self.journal: list[Move] = []
        self.applied = 0  # how much of the journal `names` has made
        self.handed: NamesInOrder | None = None  # the tuple last handed out, while nothing moved

    def move(self, node: str, sign: int) -> None:
        self.handed = None
        if full(self.journal, len(self.names or ())):
            self.names, self.journal, self.applied = None, [], 0
        self.journal.append((node, sign))

    def hand_out(self, ordered: Callable[[], list[str]]) -> NamesInOrder:
        if self.handed is None:
            if self.names is None:
                self.names, self.shared, self.applied = ordered(), False, len(self.journal)
            elif self.applied < len(self.journal):
                if self.shared:
                    self.names, self.shared = list(self.names), False
                move_into(self.names, self.journal[self.applied:])
                self.applied = len(self.journal)
            self.handed = NamesInOrder(self.names, self.journal)
        return self.handed

    def copy(self) -> "_InOrder":
        """The same names, sharing the list; the copy journals its own moves, after those not yet made."""
        clone = _InOrder()
        clone.names, clone.journal = self.names, self.journal[self.applied:]
        clone.handed = self.handed  # nothing moved since it was handed out: the same names
        self.shared = clone.shared = self.names is not None
        return clone


def _whole(value: Amount) -> Amount:
    """The same amount, as an int when it is whole (module docstring)."""
    return value.numerator if type(value) is Fraction and value.denominator == 1 else value
