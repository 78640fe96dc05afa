"""The DRA allocator as the kube-scheduler runs it (`k8s.io/dynamic-resource-allocation/structured`),
predicted for one pod on one node, and for pods of one demand bound one after the other.

One pod (`Allocator.attempt`): claims in the pod's order, requests in order, devices in allocator
order, backtracking within the pod (`_Search`); the first solution found wins, as the real
allocator's does. Within one request the model tries devices in increasing order only: the
allocator's first solution is the same (a request's devices are interchangeable among
themselves), and a failure is found after combinations rather than permutations. A claim already
allocated is met by its allocation (on the nodes it is available on); a shared claim reserved
members already hold (`PendingClaim`), by the devices the first of them found, on the nodes
those devices all reach (as the allocator will write the allocation's node selector).

A shared claim is allocated by whichever of its pods the scheduler binds first, from that pod's
node, and the allocator takes pools and slices in an order that is not fixed: a pod joins a
claim on another node than its first holder's only when the devices it may take on either node
all reach the same nodes (`mixed`), and bound first there its allocation would admit the same
nodes (else where the others may go would depend on the binding order).

Pods in turn: where the order of the slices could change the outcome (devices that match some
requests and not others, or `matchAttribute` constraints, spread over several slices), every
order of those slices is checked (`Allocator.orders`), up to `MAX_DEVICE_ORDERS`; members of
different demands on one node, in every order the scheduler may bind them (`Interleavings`),
each allocation state once, up to `MAX_STATES`. Beyond the bounds the model refuses rather than
guess.
"""

from collections import Counter
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import permutations
from math import factorial

from gangkeeper.controller.checks.dra.demand import exclusive, plain_request, variants_of
from gangkeeper.controller.checks.dra.devices import Device, NodeDevices, Shape, allocation_reach, qualified
from gangkeeper.controller.checks.dra.matching import Matching
from gangkeeper.controller.checks.dra.published import Published
from gangkeeper.controller.checks.eligibility import affinity_matches
from gangkeeper.controller.model.claims import (
    ALL,
    EXACT_COUNT,
    Allocation,
    Claim,
    ClaimKey,
    ClaimResult,
    DeviceDemand,
    DeviceKey,
    DeviceRequest,
    DeviceResult,
    MatchAttribute,
)
from gangkeeper.controller.model.nodes import Node
from gangkeeper.controller.model.selectors import Term

# The scheduler's words (DynamicResources Filter).
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"
MAX_RESULTS_PER_CLAIM = 32
# The model's words: a shared claim whose allocation, and so the nodes it admits, would depend on
# which member binds first, or on the order the allocator takes pools and slices in (not fixed).
OTHER_NODES = "claim {claim} would admit other nodes if this member were bound first"
MIXED_REACH = "claim {claim} may be allocated devices that reach different nodes {where}, as the allocator's order falls"
ON_FIRST_NODE = "on {node}, its first member's node"
BOUND_FIRST = "{refusal} if this member were bound first"
# How far the model looks before it refuses rather than guess.
MAX_DEVICE_ORDERS = 24  # orders of the slices holding devices some request wants
MAX_STATES = 4096  # allocation states `colocatable` explores
MAX_STEPS = 100_000  # devices one allocation tries


@dataclass(frozen=True, slots=True)
class PendingClaim:
    """A shared claim reserved members hold before the scheduler allocates it: the devices found
    for it on the first holder's `node`, the nodes the allocation will admit (`available_on`, the
    devices' reach; None: every node), whether the devices it could take on that node reach
    different nodes (`mixed`: as the allocator's order falls), and the devices its holders take for
    their own claims (`beside`), which are free were another of them bound first."""

    node: str
    results: ClaimResult
    available_on: tuple[Term, ...] | None
    mixed: bool
    extended: bool
    holders: frozenset[str]
    beside: frozenset[DeviceKey]


class InUse:
    """Devices in use: the inventory's, and those a caller or a simulation adds (`plus`) or frees
    (`minus`). When nothing is added, the inventory's own table stands for it (`Inventory._busy`)."""

    __slots__ = ("_taken", "_extra", "_freed")

    def __init__(self, taken: Mapping[DeviceKey, int], extra: Collection[DeviceKey],
                 freed: Collection[DeviceKey] = frozenset()):
        self._taken, self._extra, self._freed = taken, extra, freed

    def __contains__(self, key: object) -> bool:
        return (key in self._taken or key in self._extra) and key not in self._freed


Busy = InUse | Mapping[DeviceKey, int]


def plus(busy: Busy, keys: Iterable[DeviceKey]) -> InUse:
    if isinstance(busy, InUse):
        return InUse(busy._taken, frozenset(busy._extra).union(keys), busy._freed)
    return InUse(busy, frozenset(keys))


def minus(busy: Busy, keys: Iterable[DeviceKey]) -> InUse:
    if isinstance(busy, InUse):
        return InUse(busy._taken, busy._extra, frozenset(busy._freed).union(keys))
    return InUse(busy, frozenset(), frozenset(keys))


def allocation_of(claim: Claim, claims: Mapping[ClaimKey, Claim]) -> Allocation | None:
    """The claim's allocation as the pod saw it, or as the inventory knows it now (`claims`)."""
    if claim.allocation is not None:
        return claim.allocation
    known = claims.get(claim.shared) if claim.shared is not None else None
    return None if known is None else known.allocation


class Allocator:
    """The allocator on the inventory as it stands: what the cluster offers (`Published`: the
    device classes, which nodes reach a device), what its claims are allocated, and which devices
    match what (`Matching`). Made for each question asked; the devices each node sees, those in
    use and the shared claims held are given with the question."""

    __slots__ = ("_published", "_classes", "_claims", "_matching")

    def __init__(self, published: Published, claims: Mapping[ClaimKey, Claim], matching: Matching):
        self._published, self._classes, self._claims, self._matching = published, published.classes, claims, matching

    # --- one pod ---------------------------------------------------------------------------------

    def attempt(self, node: Node, devices: NodeDevices, demand: DeviceDemand, busy: Busy,
                pending: Mapping[ClaimKey, PendingClaim]) -> tuple[tuple[ClaimResult, ...] | None, str | None]:
        """The pod's claims on the node: (results per claim, None) or (None, the refusal)."""
        # A claim without requests keeps its (): it needs nothing (the API: "if empty, nothing
        # needs to be allocated"). Every other claim's result is found below.
        results: list[ClaimResult] = [()] * len(demand)
        unavailable, blocks, constraints, elsewhere = False, [], {}, []
        for index, claim in enumerate(demand):
            allocation = allocation_of(claim, self._claims)
            if allocation is not None:
                unavailable |= not affinity_matches(allocation.available_on, node)
                results[index] = allocation.results
            elif claim.shared is not None and claim.shared in pending:
                held = pending[claim.shared]
                unavailable |= not affinity_matches(held.available_on, node)
                if held.node != node.name:
                    elsewhere.append(index)
                results[index] = held.results
            else:
                claim_blocks = self._blocks(index, claim, devices, busy)
                if isinstance(claim_blocks, str):
                    return None, claim_blocks
                blocks += claim_blocks
                constraints[index] = claim.constraints
        quick = first_free(devices, blocks, constraints)
        if quick is not None:
            if not quick:
                return None, CANNOT_ALLOCATE
            results[blocks[0].claim] = quick
        elif blocks:
            search = _Search(devices.devices, self._matching.shapes.shapes, busy, blocks, constraints)
            found = search.run()
            if found is None:
                return None, f"more than {MAX_STEPS} devices to try: the allocation is not predicted"
            if not found:
                return None, CANNOT_ALLOCATE
            for index, result in search.results.items():
                results[index] = tuple(result)
        if unavailable:
            return None, NOT_AVAILABLE
        if elsewhere:
            differs = self._bound_first(node, devices, demand, busy, pending, elsewhere)
            if differs is not None:
                return None, differs
        return tuple(results), None

    def _bound_first(self, node: Node, devices: NodeDevices, demand: DeviceDemand, busy: Busy,
                     pending: Mapping[ClaimKey, PendingClaim], indices: Sequence[int]) -> str | None:
        """Why the pod, bound on this node before the other holders of these pending shared claims
        (`indices` in its demand, found on other nodes; their devices and those of the holders' own
        claims free again), would not get an allocation admitting the nodes theirs admits: the
        allocation is made by whichever holder binds first. None when it would."""
        held = {index: pending[key] for index in indices if (key := demand[index].shared) is not None}
        for index, claim_held in held.items():
            if claim_held.mixed:
                return MIXED_REACH.format(claim=demand[index].name, where=ON_FIRST_NODE.format(node=claim_held.node))
        keys = {demand[index].shared for index in held}
        free = minus(busy, {key for claim_held in held.values()
                            for key in exclusive(claim_held.results) + list(claim_held.beside)})
        results, refusal = self.attempt(node, devices, demand, free, {k: v for k, v in pending.items() if k not in keys})
        if results is None:
            return BOUND_FIRST.format(refusal=refusal)
        for index, claim_held in held.items():
            if self.reach(results[index]) != claim_held.available_on:
                return OTHER_NODES.format(claim=demand[index].name)
            if self.mixed(demand[index], devices, free):
                return MIXED_REACH.format(claim=demand[index].name, where="here")
        return None

    def _blocks(self, index: int, claim: Claim, devices: NodeDevices, busy: Busy) -> list["_Block"] | str:
        """The claim's requests with their candidate devices, or why it cannot be allocated."""
        blocks, fewest = [], 0
        for request in claim.requests:
            variants = []
            for name, variant in variants_of(request):
                cls = self._classes.get(variant.device_class)
                if cls is None:
                    return f"request {name}: device class {variant.device_class} does not exist"
                candidates = self._matching.candidates(cls, variant, devices, busy)
                if isinstance(candidates, str):
                    return f"claim {claim.name}, request {name}: {candidates}"
                variants.append((name, variant, candidates))
            fewest += min(len(c) if v.mode == ALL else v.count for _, v, c in variants)
            blocks.append(_Block(index, request.name, tuple(variants)))
        if fewest > MAX_RESULTS_PER_CLAIM:
            return f"claim {claim.name}: number of requested devices {fewest} exceeds the claim limit of " \
                   f"{MAX_RESULTS_PER_CLAIM}"
        return blocks

    def mixed(self, claim: Claim, devices: NodeDevices, busy: Busy) -> bool:
        """Whether the devices the claim may take on a node seeing these reach different nodes:
        which of them it gets, and so which nodes its allocation admits, is the allocator's order's."""
        blocks = self._blocks(0, claim, devices, busy)
        placements = set() if isinstance(blocks, str) else {
            self._published.placement(devices.devices[position])
            for block in blocks for _, _, candidates in block.variants for position in candidates}
        return len({allocation_reach((placement,)) for placement in placements if placement is not None}) > 1

    # --- pods one after the other ----------------------------------------------------------------

    def one_request_fit(self, devices: NodeDevices, demand: DeviceDemand, busy: Busy,
                        free: dict[Hashable, int] | None = None) -> int | None:
        """How many pods fit, worked out by division for the common demand of one plain request
        (`demand.plain_request`). Its candidates are the free devices its class, selectors and
        tolerations match, whatever its count: `free` keeps them per these, for the same node
        and devices in use."""
        request = plain_request(demand)
        if request is None:
            return None
        key = (request.device_class, request.selectors, request.tolerations)
        available = None if free is None else free.get(key)
        if available is None:
            cls = self._classes.get(request.device_class)
            candidates = "" if cls is None else self._matching.candidates(cls, request, devices, busy)
            available = -1 if isinstance(candidates, str) else len(candidates)
            if free is not None:
                free[key] = available
        if available < 0 or request.count > MAX_RESULTS_PER_CLAIM:
            return 0
        return available // request.count

    def placed_in_turn(self, node: Node, devices: NodeDevices, demand: DeviceDemand, count: int, busy: Busy,
                       held: Mapping[ClaimKey, PendingClaim]) -> int:
        """How many pods of the demand (at most `count`) the node takes one after the other, the
        shared claims `held` by reserved members as they are."""
        pending = dict(held)
        for placed in range(count):
            results, _ = self.attempt(node, devices, demand, busy, pending)
            if results is None:
                return placed
            busy = plus(busy, self.new_devices(node, devices, demand, results, busy, pending))
        return count

    def new_devices(self, node: Node, devices: NodeDevices, demand: DeviceDemand, results: Sequence[ClaimResult],
                    busy: Busy, pending: dict[ClaimKey, PendingClaim]) -> list[DeviceKey]:
        """The devices one more pod takes on the node (seeing `devices`, `busy` in use before it); a
        shared claim it allocated is pending from now on, and the devices of its own claims are
        beside every shared claim it holds."""
        new: list[DeviceKey] = []
        own: list[DeviceKey] = []
        shared: dict[ClaimKey, tuple[Claim, ClaimResult] | None] = {}  # None: pending already
        for claim, result in zip(demand, results):
            if allocation_of(claim, self._claims) is not None:
                continue
            if claim.shared is None:
                own += exclusive(result)
            elif claim.shared in pending or claim.shared in shared:
                shared.setdefault(claim.shared, None)
                continue
            else:
                shared[claim.shared] = (claim, result)
            new += exclusive(result)
        for key, allocated in shared.items():
            if allocated is None:
                pending[key] = replace(pending[key], beside=pending[key].beside | frozenset(own))
            else:
                claim, result = allocated
                pending[key] = PendingClaim(node.name, result, self.reach(result), self.mixed(claim, devices, busy),
                                            claim.extended, frozenset(), frozenset(own))
        return new

    def reach(self, result: ClaimResult) -> tuple[Term, ...] | None:
        """The nodes an allocation of these results admits (None: every node)."""
        return self._published.reach(r.device for r in result)

    def orders(self, devices: NodeDevices, demands: Sequence[DeviceDemand],
               busy: Busy) -> list[NodeDevices] | str:
        """The device orders to check: one when the order cannot matter, else every slice order."""
        wanted: list[frozenset[int]] = []
        constrained = False
        for demand in demands:
            for claim in demand:
                constrained |= bool(claim.constraints)
                for request in claim.requests:
                    for _, variant in variants_of(request):
                        cls = self._classes.get(variant.device_class)
                        candidates = self._matching.candidates(cls, variant, devices, busy) if cls else []
                        wanted.append(frozenset(candidates) if not isinstance(candidates, str) else frozenset())
        if not constrained and len(set(wanted)) <= 1:
            return [devices]
        positions = frozenset().union(*wanted)
        runs: dict[str, list[Device]] = {}
        wanted_in: set[str] = set()
        for position, device in enumerate(devices.devices):
            runs.setdefault(device.slice, []).append(device)
            if position in positions:
                wanted_in.add(device.slice)
        slices = [name for name in runs if name in wanted_in]
        if len(slices) <= 1:
            return [devices]
        if factorial(len(slices)) > MAX_DEVICE_ORDERS:
            return f"the devices wanted lie in {len(slices)} slices: too many orders to check"
        rest = [d for name, run in runs.items() if name not in slices for d in run]
        return [NodeDevices(tuple(d for name in order for d in runs[name]) + tuple(rest), devices.problems)
                for order in permutations(slices)]

    def request_shortage(self, nodes: Sequence[Node], claim: Claim, request: DeviceRequest, members: int,
                         busy: Busy, devices_of: Callable[[Node], NodeDevices]) -> str | None:
        """Which devices keep `members` pods of the claim's request out of these nodes (each seeing
        `devices_of(node)`), with the numbers; None when the request has room."""
        cls = self._classes.get(request.device_class)
        if cls is None:
            return f"request {request.name}: device class {request.device_class} does not exist"
        free = {}
        for node in nodes:
            candidates = self._matching.candidates(cls, request, devices_of(node), busy)
            if isinstance(candidates, str):
                return f"claim {claim.name}, request {request.name}: {candidates}"
            free[node.name] = len(candidates)
        pods = 1 if claim.shared is not None else members
        needed = pods * request.count
        room = sum(n // request.count for n in free.values())
        if room >= pods:
            return None
        matching = f" matching {' && '.join(request.selectors)}" if request.selectors else ""
        what = f"{needed} device{'s' if needed != 1 else ''} of class {cls.name}{matching}"
        if len(free) == 1:
            (name, count), = free.items()
            return f"needs {what} on one node; {name} has {count}"
        best = max(sorted(free), key=lambda n: free[n], default=None)
        if best is None:
            return f"needs {what}; there are no eligible nodes"
        return (f"needs {what} ({pods} × {request.count}); {len(free)} eligible nodes have {sum(free.values())} "
                f"free, at most {free[best]} on one node ({best})")


def first_free(devices: NodeDevices, blocks: Sequence["_Block"],
               constraints: Mapping[int, tuple[MatchAttribute, ...]]) -> ClaimResult | None:
    """The allocator's answer without a search, for the common pod of one claim with one plain
    request (ExactCount, no subrequests, no admin access, no constraints): the first free
    candidates, in the slices' order, as the search would pick them; () when there are too few.
    None when the pod asks for more than that and must be searched."""
    if len(blocks) != 1 or len(blocks[0].variants) != 1 or any(constraints.values()):
        return None
    name, variant, candidates = blocks[0].variants[0]
    if variant.mode != EXACT_COUNT or variant.admin_access or variant.count > MAX_STEPS:
        return None
    if not 0 < variant.count <= len(candidates):  # the search, too, finds nothing for a count of 0
        return ()
    return tuple(DeviceResult(name, devices.devices[position].key) for position in candidates[:variant.count])


# --- the search ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Block:
    """One request of one claim, with each variant's candidate positions (a firstAvailable
    request has one variant per subrequest, tried in order)."""

    claim: int
    request: str
    variants: tuple[tuple[str, DeviceRequest, list[int]], ...]


@dataclass(slots=True)
class _ConstraintState:
    attribute: tuple[str, str]
    requests: frozenset[str]
    value: object = None
    devices: int = 0


class _Search:
    """The allocator's backtracking over one pod's blocks: the first solution found wins."""

    __slots__ = ("_devices", "_shapes", "_busy", "_blocks", "_constraints", "_allocating", "_steps", "results")

    def __init__(self, devices: Sequence[Device], shapes: Sequence[Shape], busy: Busy, blocks: Sequence[_Block],
                 constraints: Mapping[int, tuple[MatchAttribute, ...]]):
        self._devices, self._shapes, self._busy, self._blocks = devices, shapes, busy, blocks
        self._constraints = {claim: [_ConstraintState(qualified(c.attribute, ""), frozenset(c.requests))
                                     for c in of_claim] for claim, of_claim in constraints.items()}
        self._allocating: dict[DeviceKey, set[int]] = {}
        self._steps = 0
        self.results: dict[int, list[DeviceResult]] = {claim: [] for claim in constraints}

    def run(self) -> bool | None:
        """True when every block got its devices; None when the search grew too large."""
        if any(all(len(c) < (1 if v.mode == ALL else v.count) for _, v, c in block.variants) for block in self._blocks):
            return False
        try:
            return self._block(0)
        except _TooLarge:
            return None

    def _block(self, index: int) -> bool:
        if index == len(self._blocks):
            return True
        block = self._blocks[index]
        for name, variant, candidates in block.variants:
            need = len(candidates) if variant.mode == ALL else variant.count
            if need and self._pick(index, block, name, variant, candidates, need, 0):
                return True
        return False

    def _pick(self, index: int, block: _Block, name: str, variant: DeviceRequest, candidates: list[int],
              need: int, start: int) -> bool:
        if need == 0:
            return self._block(index + 1)
        for position in range(start, len(candidates) - need + 1):
            self._steps += 1
            if self._steps > MAX_STEPS:
                raise _TooLarge
            device = self._devices[candidates[position]]
            if not self._free(device.key, block.claim, variant.admin_access):
                continue
            if not self._constrain(block, name, device):
                continue
            self._allocating.setdefault(device.key, set()).add(block.claim)
            self.results[block.claim].append(DeviceResult(name, device.key, variant.admin_access))
            if self._pick(index, block, name, variant, candidates, need - 1, position + 1):
                return True
            self.results[block.claim].pop()
            self._allocating[device.key].discard(block.claim)
            self._release(block, name)
        return False

    def _free(self, key: DeviceKey, claim: int, admin_access: bool) -> bool:
        if admin_access:
            return claim not in self._allocating.get(key, ())
        return key not in self._busy and not self._allocating.get(key)

    def _applying(self, block: _Block, name: str) -> list[_ConstraintState]:
        return [c for c in self._constraints[block.claim] if not c.requests or block.request in c.requests
                or name in c.requests]

    def _constrain(self, block: _Block, name: str, device: Device) -> bool:
        applying = self._applying(block, name)
        if not applying:
            return True
        attributes = dict(self._shapes[device.shape].attributes)
        for state in applying:
            value = attributes.get(state.attribute)
            if value is None or (state.devices and value != state.value):
                return False
        for state in applying:
            state.value, state.devices = attributes[state.attribute], state.devices + 1
        return True

    def _release(self, block: _Block, name: str) -> None:
        for state in self._applying(block, name):
            state.devices -= 1


class _TooLarge(Exception):
    pass


class Interleavings:
    """Every order of binding a multiset of demands on one node, each allocation state once."""

    def __init__(self, allocator: Allocator, node: Node, devices: NodeDevices, demands: Counter,
                 held: Mapping[ClaimKey, PendingClaim]):
        self._allocator, self._node, self._devices, self._held = allocator, node, devices, held
        self._demands = list(demands)
        self._seen: set[tuple] = set()
        self._start = tuple(demands[d] for d in self._demands)

    def refusal(self, busy: Busy) -> str | None:
        return self._explore(self._start, busy, dict(self._held), frozenset())

    def _explore(self, remaining: tuple[int, ...], busy: Busy, pending: dict, new: frozenset) -> str | None:
        state = (remaining, new, frozenset(pending))
        if state in self._seen or not any(remaining):
            return None
        if len(self._seen) >= MAX_STATES:
            return f"more than {MAX_STATES} binding orders to check on {self._node.name}"
        self._seen.add(state)
        for index, demand in enumerate(self._demands):
            if not remaining[index]:
                continue
            results, reason = self._allocator.attempt(self._node, self._devices, demand, busy, pending)
            if results is None:
                placed = sum(self._start) - sum(remaining)
                return reason if not placed else f"{reason} for a member bound after {placed} of the others"
            after = dict(pending)
            taken = self._allocator.new_devices(self._node, self._devices, demand, results, busy, after)
            left = remaining[:index] + (remaining[index] - 1,) + remaining[index + 1:]
            reason = self._explore(left, plus(busy, taken), after, new | frozenset(taken))
            if reason is not None:
                return reason
        return None

