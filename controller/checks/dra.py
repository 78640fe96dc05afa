"""Devices as the kube-scheduler allocates them (DRA, `resource.k8s.io/v1`), so that a plan holds.

A pod that names ResourceClaims binds only where the scheduler's DynamicResources filter can
allocate every claim it still needs, with the structured allocator
(`k8s.io/dynamic-resource-allocation/structured`). This module predicts that allocator for
the planner, on plain data:

  - `device_demand` reads what a pod asks for: one `Claim` per `spec.resourceClaims` entry, a
    per-pod claim from its template (or the claim generated from it), or a shared ResourceClaim;
    a claim already allocated is demanded as that allocation (the pod holds those devices).
  - `Inventory` holds the DeviceClasses, ResourceSlices and ResourceClaims, one watch event at a
    time, and the devices that reserved members hold (`hold`/`forget`) until the scheduler
    allocates them; `copy` is cheap (copy-on-write), so a pass tries its plans on a copy.
  - `allocate` is the allocator for one pod on one node: claims in the pod's order, requests in
    order, devices in allocator order, backtracking within the pod; `fits` counts the pods of
    one demand a node takes; `colocatable` checks that members with different demands fit in
    every order in which the scheduler may bind them; `refusal` says why not, in the
    scheduler's words; `shortage` explains a group that does not fit.
  - Extended resources served through DRA (KEP-5004): `extended_allocatable` is what a node
    serves of each DeviceClass's `extendedResourceName` it does not list in its allocatable,
    for the resource ledger; `extended_claim` is the claim the scheduler makes for such requests.

Allocator order. The allocator walks the node's pools, each pool's slices, each slice's devices
in the order the driver published them: the recordings show gpu-0, gpu-1, … chosen in turn. The
real allocator takes pools and slices in Go map and informer order, which is not fixed; this
model takes them by (driver, pool) and slice name. Where the order could change the outcome
(devices that match some requests and not others, or `matchAttribute` constraints, spread over
several slices) `fits` and `colocatable` check every order of those slices, up to
`MAX_DEVICE_ORDERS`. Within one request the model tries devices in increasing order only: the
allocator's first solution is the same (a request's devices are interchangeable among
themselves), and a failure is found after combinations rather than permutations.

A device matches a request when every selector of its DeviceClass and then of the request
evaluates true. CEL runs on celpy with the DRA environment: `device.driver`,
`device.attributes['<domain>'].<name>` (an unqualified attribute belongs to the driver's
domain; an unknown domain is an empty map), `device.capacity` (quantities), `quantity()`,
`isQuantity()`, `semver()`, `isSemver()`, their comparison methods, `lowerAscii`/`upperAscii`
and celpy's standard library. `cel.bind` and the other Kubernetes extension libraries are not
available: such an expression fails. Each expression is compiled once, and its answer is
remembered per device shape (driver, attributes, capacity), so that 40,000 identical devices
cost one evaluation. An expression that fails to compile or evaluate on a free device makes the
allocation on that node fail with the error as the reason: the real allocator stops there too
(it returns the error as soon as it reaches that device; the model, without knowing the exact
path, refuses the node).

Modelled besides: ExactCount and All, `firstAvailable` subrequests, `matchAttribute`
constraints, `adminAccess` (does not take the device), device taints with NoSchedule/NoExecute
and request tolerations, pools over several slices (only the newest `pool.generation` counts;
an incomplete pool is skipped, and fails an All request), slices for one node (`nodeName`),
all nodes, a node selector, or per device; shared claims (already allocated: only the nodes
its `allocation.nodeSelector` admits, no new devices; not yet: the first member to hold it
allocates it, the others must land on that node); at most 32 devices per claim and 256
consumers of a claim (`resourceclaim in use`).

Not modelled: partitionable devices (a device that consumes counters is never chosen: it
might over-commit the counters otherwise), consumable capacity (every device is exclusive),
binding conditions (such devices are never chosen), DeviceTaintRules, the extended-resource
claim's request names (one request per resource, named after it), prioritising among several
DeviceClasses' slices on shared (network-attached) pools beyond the order above.

Extended resources and the ledger. A pod requesting `example.com/gpu` on a node that lists it
in its allocatable is counted by NodeResourcesFit as before; on a node that does not, by DRA.
The scheduler's claim for it carries the annotation `resource.kubernetes.io/extended-resource-claim:
"true"` (pod `status.extendedResourceClaimStatus` names it). `extended_allocatable` leaves the
devices of such claims, and of held extended claims, out of what it subtracts, because the
ledger already counts the requests of the pods that hold them.
"""

import re
from collections import Counter
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from functools import lru_cache
from itertools import islice, permutations
from math import ceil, factorial

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError

from gangkeeper.cel import error_message
from gangkeeper.controller.checks.eligibility import affinity_matches, tolerates
from gangkeeper.controller.model.nodes import Node, Taint, Toleration
from gangkeeper.controller.model.selectors import Requirement, Term
from gangkeeper.names import EXTENDED_RESOURCE_CLAIM_ANNOTATION, IMPLICIT_EXTENDED_RESOURCE_PREFIX
from gangkeeper.quantity import parse_quantity

EXACT_COUNT, ALL = "ExactCount", "All"
# The scheduler's words (DynamicResources Filter and PreFilter).
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"
IN_USE = "resourceclaim in use"
EXTENDED_CLAIM_NAME = "<extended-resources>"
MAX_RESULTS_PER_CLAIM = 32
MAX_RESERVED_FOR = 256
# How far the model looks before it refuses rather than guess.
MAX_DEVICE_ORDERS = 24  # orders of the slices holding devices some request wants
MAX_STATES = 4096  # allocation states `colocatable` explores
MAX_STEPS = 100_000  # devices one allocation tries

DeviceKey = tuple[str, str, str]  # (driver, pool, device)
ClaimKey = tuple[str, str]  # (namespace, name)
_BLOCKING_TAINTS = frozenset({"NoSchedule", "NoExecute"})


# --- what a pod asks for ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """One request of a claim: `count` devices of a class (or all of them), or the first of
    `first_available` subrequests that can be satisfied (then class and selectors are unused)."""

    name: str
    device_class: str = ""
    selectors: tuple[str, ...] = ()
    count: int = 1
    mode: str = EXACT_COUNT
    admin_access: bool = False
    tolerations: tuple[Toleration, ...] = ()
    first_available: tuple["DeviceRequest", ...] = ()


@dataclass(frozen=True, slots=True)
class MatchAttribute:
    """Every device of the named requests (all requests when empty) has the same value of it."""

    attribute: str
    requests: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceResult:
    request: str
    device: DeviceKey
    admin_access: bool = False


ClaimResult = tuple[DeviceResult, ...]


@dataclass(frozen=True, slots=True)
class Allocation:
    """A claim's devices, and the nodes that may use them (`None`: every node)."""

    results: ClaimResult
    available_on: tuple[Term, ...] | None = None


@dataclass(frozen=True, slots=True)
class Claim:
    """One claim a pod needs. `name` is the pod's name for it (`spec.resourceClaims[].name`);
    `shared` is the ResourceClaim's key when several pods may name it, None for the pod's own."""

    name: str
    requests: tuple[DeviceRequest, ...]
    constraints: tuple[MatchAttribute, ...] = ()
    shared: ClaimKey | None = None
    allocation: Allocation | None = None
    extended: bool = False


DeviceDemand = tuple[Claim, ...]


@dataclass(frozen=True, slots=True)
class Unresolved:
    """The pod's claims cannot be known yet: the scheduler would not schedule it either."""

    reason: str


class _Unsupported(Exception):
    """A claim uses an API field the allocator does not know (it refuses such claims too)."""


def device_demand(pod: Mapping, templates: Mapping[ClaimKey, Mapping],
                  claims: Mapping[ClaimKey, Mapping]) -> DeviceDemand | Unresolved:
    """The claims the pod needs, in its order; empty for a pod without `spec.resourceClaims`."""
    metadata = pod.get("metadata") or {}
    namespace, uid = metadata.get("namespace", ""), metadata.get("uid", "")
    generated = {status.get("name"): status.get("resourceClaimName")
                 for status in (pod.get("status") or {}).get("resourceClaimStatuses") or ()}
    demand = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or ():
        name, shared = entry.get("name", ""), entry.get("resourceClaimName")
        template = entry.get("resourceClaimTemplateName")
        if shared:
            obj = claims.get((namespace, shared))
            if obj is None:
                return Unresolved(f'resourceclaim.resource.k8s.io "{shared}" not found')
            source, key = obj, (namespace, shared)
        elif template:
            if name in generated and generated[name] is None:
                continue  # the claim controller decided that no claim is needed for it
            obj = claims.get((namespace, generated.get(name) or ""))
            if obj is None:
                obj = templates.get((namespace, template))
                if obj is None:
                    return Unresolved(f'resourceclaimtemplate.resource.k8s.io "{template}" not found')
                obj = {"spec": (obj.get("spec") or {}).get("spec") or {}}
            source, key = obj, None
        else:
            continue
        try:
            claim = claim_from_api(source, name, key)
        except _Unsupported as unsupported:
            return Unresolved(f"claim {name}: {unsupported}")
        if claim.allocation is not None and _in_use_by_others(source, uid):
            return Unresolved(IN_USE)
        demand.append(claim)
    return _interned(tuple(demand))


def claim_from_api(obj: Mapping, name: str, shared: ClaimKey | None = None) -> Claim:
    """A ResourceClaim (or a template's claim spec) as the pod's claim `name`."""
    devices = (obj.get("spec") or {}).get("devices") or {}
    requests = tuple(_request(raw) for raw in devices.get("requests") or ())
    constraints = []
    for index, raw in enumerate(devices.get("constraints") or ()):
        if not raw.get("matchAttribute"):
            raise _Unsupported(f"constraint #{index}: only matchAttribute is supported")
        constraints.append(MatchAttribute(raw["matchAttribute"], tuple(raw.get("requests") or ())))
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return Claim(name, requests, tuple(constraints), shared, allocation_from_api(obj),
                 annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true")


def allocation_from_api(obj: Mapping) -> Allocation | None:
    allocation = (obj.get("status") or {}).get("allocation")
    if not allocation:
        return None
    results = tuple(DeviceResult(r.get("request", ""), (r.get("driver", ""), r.get("pool", ""), r.get("device", "")),
                                 bool(r.get("adminAccess")))
                    for r in (allocation.get("devices") or {}).get("results") or ())
    return Allocation(results, _terms(allocation.get("nodeSelector")))


def _request(raw: Mapping) -> DeviceRequest:
    name = raw.get("name", "")
    if raw.get("firstAvailable"):
        return DeviceRequest(name, first_available=tuple(_exact(sub.get("name", ""), sub)
                                                         for sub in raw["firstAvailable"]))
    if not raw.get("exactly"):
        raise _Unsupported(f"request {name}: neither exactly nor firstAvailable")
    return _exact(name, raw["exactly"])


def _exact(name: str, raw: Mapping) -> DeviceRequest:
    selectors = []
    for index, selector in enumerate(raw.get("selectors") or ()):
        expression = (selector.get("cel") or {}).get("expression")
        if expression is None:
            raise _Unsupported(f"request {name}, selector #{index}: CEL expression empty (unsupported selector type?)")
        selectors.append(expression)
    tolerations = tuple(Toleration(t.get("key", ""), t.get("operator", ""), t.get("value", ""), t.get("effect", ""))
                        for t in raw.get("tolerations") or ())
    return DeviceRequest(name, raw.get("deviceClassName", ""), tuple(selectors), int(raw.get("count") or 1),
                         raw.get("allocationMode") or EXACT_COUNT, bool(raw.get("adminAccess")), tolerations)


def _in_use_by_others(obj: Mapping, uid: str) -> bool:
    consumers = (obj.get("status") or {}).get("reservedFor") or ()
    return len(consumers) >= MAX_RESERVED_FOR and all(c.get("uid") != uid for c in consumers)


def _terms(selector: Mapping | None) -> tuple[Term, ...] | None:
    if selector is None:
        return None
    return tuple(Term(_requirements(term.get("matchExpressions")), _requirements(term.get("matchFields")))
                 for term in selector.get("nodeSelectorTerms") or ())


def _requirements(raw: Sequence[Mapping] | None) -> tuple[Requirement, ...]:
    return tuple(Requirement(r.get("key", ""), r.get("operator", ""), tuple(r.get("values") or ())) for r in raw or ())


@lru_cache(maxsize=4096)
def _interned(demand: DeviceDemand) -> DeviceDemand:
    """The first equal demand seen: members of one group share one."""
    return demand


# --- what the cluster offers -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Shape:
    """What decides whether a device matches a request, apart from its name."""

    driver: str
    attributes: tuple[tuple[tuple[str, str], tuple[str, object]], ...]  # ((domain, id), (type, value))
    capacity: tuple[tuple[tuple[str, str], Fraction], ...]
    taints: tuple[Taint, ...]
    refused: str | None  # why the model never chooses such a device


@dataclass(frozen=True, slots=True)
class _Device:
    key: DeviceKey
    shape: int  # index in the inventory's shape registry
    slice: str


@dataclass(frozen=True, slots=True)
class _Placement:
    """Which nodes see a slice (or, with per-device node selection, one device)."""

    node: str | None
    all_nodes: bool
    terms: tuple[Term, ...] | None

    def admits(self, node: Node) -> bool:
        if self.node:
            return self.node == node.name
        return self.all_nodes or (self.terms is not None and affinity_matches(self.terms, node))


@dataclass(frozen=True, slots=True)
class _Slice:
    name: str
    pool: tuple[str, str]
    generation: int
    count: int  # resourceSliceCount
    placement: _Placement | None  # None: per device
    devices: tuple[tuple[_Device, _Placement | None], ...]


@dataclass(frozen=True, slots=True)
class _Pool:
    slices: tuple[_Slice, ...]  # the newest generation, by name
    problem: str | None  # incomplete or invalid: no device is taken from it


@dataclass(frozen=True, slots=True)
class _NodeDevices:
    devices: tuple[_Device, ...]  # in allocator order, from usable pools
    problems: tuple[str, ...]  # pools the node sees but the allocator skips
    shapes: tuple[int, ...] = ()  # the devices' shapes, in order: what a request's candidates depend on

    def __post_init__(self) -> None:
        object.__setattr__(self, "shapes", tuple(device.shape for device in self.devices))


_PoolPart = tuple[tuple[str, str], tuple[_Device, ...], str | None]  # (pool, devices the node sees, problem)


def _node_view(parts: Iterable[_PoolPart]) -> _NodeDevices:
    parts = tuple(parts)
    problems = tuple(f"resource pool {'/'.join(pool_id)} {problem}" for pool_id, _, problem in parts if problem)
    return _NodeDevices(tuple(d for _, devices, problem in parts if not problem for d in devices), problems)


@dataclass(frozen=True, slots=True)
class _DeviceClass:
    name: str
    selectors: tuple[str, ...]
    extended_resource: str | None
    created: float


@dataclass(frozen=True, slots=True)
class _Hold:
    node: str
    devices: tuple[tuple[DeviceKey, bool], ...]  # (device, for an extended-resource claim)
    shared: tuple[ClaimKey, ...]  # shared claims this member holds (allocated by the first holder)


@dataclass(frozen=True, slots=True)
class _PendingClaim:
    """A shared claim a reserved member holds before the scheduler allocates it."""

    node: str
    results: ClaimResult
    extended: bool
    holders: frozenset[str]


class _Busy:
    """Devices in use: the inventory's, and those a caller or a simulation adds (`_plus`). When
    nothing is added, the inventory's own table stands for it (`Inventory._busy`)."""

    __slots__ = ("_taken", "_extra")

    def __init__(self, taken: Mapping[DeviceKey, int], extra: Collection[DeviceKey]):
        self._taken, self._extra = taken, extra

    def __contains__(self, key: DeviceKey) -> bool:
        return key in self._taken or key in self._extra


Busy = _Busy | Mapping[DeviceKey, int]


def _plus(busy: Busy, keys: Iterable[DeviceKey]) -> _Busy:
    if isinstance(busy, _Busy):
        return _Busy(busy._taken, frozenset(busy._extra).union(keys))
    return _Busy(busy, frozenset(keys))


_COPIED = ("_classes", "_extended_names", "_slices", "_pool_slices", "_pools", "_local", "_shared_pools",
           "_node_devices", "_claims", "_taken", "_extended", "_holds", "_pending", "_rooms")
ROOM_LIMIT = 1024  # pods of one demand a node is counted as taking, at most


class _Room:
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

    def copy(self) -> "_Room":
        clone = _Room.__new__(_Room)
        clone.nodes, clone.counts = self.nodes, dict(self.counts)
        clone.by_count = {count: set(names) for count, names in self.by_count.items()}
        clone._ordered = dict(self._ordered)
        return clone

    def ordered(self, count: int) -> list[str]:
        names = self._ordered.get(count)
        if names is None:
            names = self._ordered[count] = sorted(self.by_count.get(count, ()))
        return names


class Inventory:
    """DeviceClasses, ResourceSlices, ResourceClaims and held devices, changed one object at a time.

    Copy-on-write: `copy` shares every table with the source; whichever of the two changes a
    table first takes a private copy of it (a shallow one: the values are immutable). What CEL
    said of a device shape, and which devices of a sequence of shapes a request may take, is
    knowledge, not state: the copies share it for good.
    """

    def __init__(self) -> None:
        self._cel = _Cel()
        self._matching: dict[tuple, tuple[int, ...] | _Broken] = {}  # (shapes, selectors, tolerations) → positions
        self._shape_ids: dict[_Shape, int] = {}
        self._shapes: list[_Shape] = []
        self._classes: dict[str, _DeviceClass] = {}
        self._extended_names: dict[str, str] = {}  # extended resource → device class
        self._slices: dict[str, _Slice] = {}
        self._pool_slices: dict[tuple[str, str], frozenset[str]] = {}
        self._pools: dict[tuple[str, str], _Pool] = {}
        self._local: dict[str, frozenset[tuple[str, str]]] = {}  # node → pools only for named nodes
        self._shared_pools: frozenset[tuple[str, str]] = frozenset()
        self._node_devices: dict[str, tuple[tuple[_PoolPart, ...], _NodeDevices]] = {}  # node-name pools only
        self._claims: dict[ClaimKey, Claim] = {}
        self._taken: dict[DeviceKey, int] = {}  # holders of each device in use
        self._extended: dict[DeviceKey, int] = {}  # of which extended-resource claims
        self._holds: dict[str, _Hold] = {}
        self._pending: dict[ClaimKey, _PendingClaim] = {}
        self._rooms: dict[DeviceDemand, _Room] = {}
        self._explicit = 0  # devices taken by explicit claims and holds (not for extended resources)
        self._unrecounted: set[str] = set()  # nodes whose devices changed since the rooms were last read
        self._explicit_changed: set[str] = set()  # nodes whose explicitly taken devices changed since asked
        self._private_rooms: set[DeviceDemand] | None = None  # rooms that are ours alone; None: all of them
        self._pool_nodes: dict[tuple[str, str], frozenset[str]] | None = None  # derived from `_local`
        self._device_nodes: frozenset[str] | None = None  # derived from `_local`
        self._owned: frozenset[str] | set[str] = frozenset(_COPIED)

    # --- objects from the API -----------------------------------------------------------------

    def put_device_class(self, obj: Mapping) -> None:
        metadata, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        selectors = tuple((s.get("cel") or {}).get("expression", "") for s in spec.get("selectors") or ())
        created = metadata.get("creationTimestamp")
        self._own("_classes")[metadata.get("name", "")] = _DeviceClass(
            metadata.get("name", ""), selectors, spec.get("extendedResourceName"),
            datetime.fromisoformat(created).timestamp() if created else 0.0)
        self._resolve_extended_names()
        self.forget_rooms()

    def remove_device_class(self, name: str) -> None:
        if name in self._classes:
            del self._own("_classes")[name]
            self._resolve_extended_names()
            self.forget_rooms()

    def put_slice(self, obj: Mapping) -> None:
        parsed = self._parse_slice(obj)
        old = self._slices.get(parsed.name)
        self._own("_slices")[parsed.name] = parsed
        if old is not None and old.pool != parsed.pool:
            self._repool(old.pool, old, None)
        self._repool(parsed.pool, old if old is not None and old.pool == parsed.pool else None, parsed)

    def remove_slice(self, name: str) -> None:
        old = self._slices.get(name)
        if old is not None:
            del self._own("_slices")[name]
            self._repool(old.pool, old, None)

    def put_claim(self, obj: Mapping) -> None:
        metadata = obj.get("metadata") or {}
        key = (metadata.get("namespace", ""), metadata.get("name", ""))
        self.remove_claim(*key)
        try:
            claim = claim_from_api(obj, key[1], key)
        except _Unsupported:  # its devices are still taken; no pod of ours can be planned with it
            annotations = metadata.get("annotations") or {}
            claim = Claim(key[1], (), shared=key, allocation=allocation_from_api(obj),
                          extended=annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true")
        self._own("_claims")[key] = claim
        if claim.allocation is not None:
            self._take(_exclusive(claim.allocation.results), claim.extended, +1)

    def remove_claim(self, namespace: str, name: str) -> None:
        old = self._claims.get((namespace, name))
        if old is not None:
            del self._own("_claims")[(namespace, name)]
            if old.allocation is not None:
                self._take(_exclusive(old.allocation.results), old.extended, -1)

    # --- members the planner reserved -----------------------------------------------------------

    def hold(self, uid: str, node: Node, demand: DeviceDemand) -> tuple[ClaimResult, ...] | None:
        """Take the devices the member would get on the node, until `forget`; None if it does not fit.

        Forget a member once it is bound and its claims are allocated: until then its devices
        count twice (the hold and the claim), which errs on the safe side.
        """
        self.forget(uid)
        results, _ = self._attempt(node, self._devices(node), demand, self._busy(), self._pending)
        if results is None:
            return None
        taken, shared = [], []
        for claim, result in zip(demand, results):
            if self._allocation_of(claim) is not None:
                continue
            if claim.shared is not None:
                shared.append(claim.shared)
                self._join_pending(claim, node.name, result, uid)
            else:
                taken += [(key, claim.extended) for key in _exclusive(result)]
        self._take_all(taken, +1)
        self._own("_holds")[uid] = _Hold(node.name, tuple(taken), tuple(shared))
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
                self._take(_exclusive(pending.results), pending.extended, -1)
            else:
                self._own("_pending")[key] = _PendingClaim(pending.node, pending.results, pending.extended,
                                                           pending.holders - {uid})

    def held(self, uid: str) -> str | None:
        """The node on which the member holds devices, if it does."""
        hold = self._holds.get(uid)
        return None if hold is None else hold.node

    # --- the allocator ---------------------------------------------------------------------------

    def allocate(self, node: Node, demand: DeviceDemand,
                 taken: Collection[DeviceKey] = frozenset()) -> tuple[ClaimResult, ...] | None:
        """The devices the scheduler would give one pod on the node, per claim, or None."""
        return self._attempt(node, self._devices(node), demand, self._busy(taken), self._pending)[0]

    def refusal(self, node: Node, demand: DeviceDemand, taken: Collection[DeviceKey] = frozenset()) -> str | None:
        """Why the scheduler would not bind one pod of this demand on the node, in its words."""
        return self._attempt(node, self._devices(node), demand, self._busy(taken), self._pending)[1]

    def fits(self, node: Node, demand: DeviceDemand, count: int, taken: Collection[DeviceKey] = frozenset(),
             free: dict[Hashable, int] | None = None) -> int:
        """How many pods of this demand (at most `count`) the node takes, one after the other.
        `free`, given, remembers the node's free devices per plain request (`_one_request_fit`)
        for other demands asked about on the node before its devices change."""
        if count <= 0 or not demand:
            return max(count, 0)
        devices, busy = self._devices(node), self._busy(taken)
        simple = self._one_request_fit(devices, demand, busy, free)
        if simple is not None:
            return min(count, simple)
        orders = self._orders(devices, [demand], busy)
        if isinstance(orders, str):
            return 0
        return min(self._placed_in_turn(node, order, demand, count, busy) for order in orders)

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
        devices, busy = self._devices(node), self._busy(taken)
        orders = self._orders(devices, list(distinct), busy)
        if isinstance(orders, str):
            return orders
        for order in orders:
            reason = _Interleavings(self, node, order, distinct).refusal(busy)
            if reason is not None:
                return reason
        return None

    def shortage(self, nodes: Iterable[Node], demand: DeviceDemand, members: int,
                 taken: Collection[DeviceKey] = frozenset()) -> str | None:
        """Which devices keep `members` pods of this demand out of these nodes, with the numbers.

        e.g. `needs 6 devices of class gpu.example.com on one node; dra-1 has 4`. None when
        every request has room on its own (then another rule or the order keeps them out).
        """
        nodes, busy = list(nodes), self._busy(taken)
        for claim in demand:
            if self._allocation_of(claim) is not None or claim.shared in self._pending:
                continue
            for request in claim.requests:
                variant = request.first_available[0] if request.first_available else request
                if variant.mode == ALL:
                    continue
                explained = self._request_shortage(nodes, claim, variant, members, busy)
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
        for resource, class_name in self._extended_names.items():
            if node.allocatable.get(resource, 0) != 0:
                continue
            cls, request = self._classes[class_name], DeviceRequest(resource, class_name)
            matching = self._matching_of(cls, request, devices)
            if isinstance(matching, _Broken):  # served 0 where some device matches, nothing where none does
                if any(self._selectable(cls, request, d) for d in devices.devices):
                    served[resource] = 0
            elif matching:
                listed = devices.devices
                served[resource] = sum(1 for position in matching if not self._taken_explicitly(listed[position].key))
        return served

    def extended_claim(self, requests: Mapping[str, Fraction], node: Node) -> Claim | None:
        """The claim the scheduler makes on this node for the pod's requests of extended resources
        that a DeviceClass serves and the node's allocatable does not list; None if there are none."""
        names = self._extended_names  # asked first: a quantity's comparison costs more than a name's look-up
        served = tuple((resource, names[resource], ceil(value)) for resource, value in requests.items()
                       if resource in names and value > 0 and node.allocatable.get(resource, 0) == 0)
        return _extended_claim(tuple(sorted(served))) if served else None

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
        return any(resource in self._extended_names and value > 0 for resource, value in requests.items())

    def demand_on(self, node: Node, demand: DeviceDemand, requests: Mapping[str, Fraction]) -> DeviceDemand:
        """The pod's demand on this node: its claims, then the extended-resource claim if any."""
        extended = self.extended_claim(requests, node)
        return demand if extended is None else _interned(demand + (extended,))

    # --- reading ---------------------------------------------------------------------------------

    def room(self, demand: DeviceDemand, nodes: Iterable[Node]) -> Mapping[int, set[str]] | None:
        """The nodes with devices of their own by how many pods of this demand each takes now
        (at least one), brought up to date when read with the nodes whose devices were taken or
        freed since; made on first use from `nodes`. None when a slice serves nodes by selector or to all nodes (ask `fits` per node).
        Read only. Forget the rooms (`forget_rooms`) when the nodes themselves change."""
        if self._shared_pools or not demand:
            return None
        if self._unrecounted:
            self._recount()
        room = self._rooms.get(demand)
        if room is None:
            local = {node.name: node for node in nodes if node.name in self._local}
            room = _Room(local, {name: self.fits(node, demand, ROOM_LIMIT) for name, node in local.items()})
            self._own("_rooms")[demand] = room
            if self._private_rooms is not None:
                self._private_rooms.add(demand)
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
        if self._rooms:
            self._own("_rooms").clear()
        self._unrecounted = set()

    @property
    def nodes_with_devices(self) -> Collection[str]:
        """Nodes with devices of their own (slices naming them); see `serves_every_node` for the rest."""
        if self._device_nodes is None:
            self._device_nodes = frozenset(self._local)
        return self._device_nodes

    def nodes_with_devices_among(self, names: Collection[str], limit: int) -> list[str] | None:
        """The nodes of `names` with devices of their own, by name, when there are at most
        `limit` of them; None when there are more. Found without building the intersection of
        two large sets (5,000 nodes each: half a millisecond), which a NoFit asks for again and again."""
        devices = self.nodes_with_devices
        small, large = (names, devices) if len(names) <= len(devices) else (devices, names)
        found = list(islice((name for name in small if name in large), limit + 1))
        return None if len(found) > limit else sorted(found)

    @property
    def serves_every_node(self) -> bool:
        """Whether some slice serves nodes by selector or to all nodes, so any node may have devices."""
        return bool(self._shared_pools)

    @property
    def cel_evaluations(self) -> int:
        """How many times a CEL expression was evaluated (every answer is remembered)."""
        return self._cel.evaluations

    def copy(self) -> "Inventory":
        """An independent inventory to try plans on (class docstring)."""
        clone = Inventory.__new__(Inventory)
        clone._cel, clone._shape_ids, clone._shapes = self._cel, self._shape_ids, self._shapes
        clone._matching = self._matching
        for name in _COPIED:
            setattr(clone, name, getattr(self, name))
        self._owned, clone._owned = set(), set()
        self._private_rooms, clone._private_rooms = set(), set()
        clone._pool_nodes, clone._device_nodes = self._pool_nodes, self._device_nodes
        clone._explicit = self._explicit
        clone._unrecounted = set(self._unrecounted)
        clone._explicit_changed = set()
        return clone

    # --- bookkeeping -----------------------------------------------------------------------------

    def _own(self, name: str):
        """The table `name`, private to this inventory (copied the first time after a copy)."""
        table = getattr(self, name)
        if name not in self._owned:
            table = table.copy()
            setattr(self, name, table)
            self._owned.add(name)
        return table

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
        watched = not extended and self._extended_names
        if self._rooms or watched:
            nodes = frozenset().union(*map(self._nodes_of_pool, {(key[0], key[1]) for key in keys}))
            if self._rooms:
                self._unrecounted |= nodes
            if watched:
                self._explicit_changed |= nodes

    def _recount(self) -> None:
        """Move the nodes whose devices changed since a room was last read to their new counts in
        every room: a plan holds and drops devices many times between two reads."""
        nodes, self._unrecounted = self._unrecounted, set()
        rooms = list(self._rooms.items())
        for name in nodes:
            free: dict[Hashable, int] = {}  # demands differing only in counts share the node's free devices
            for demand, room in rooms:
                node = room.nodes.get(name)
                if node is not None:
                    self._own_room(demand).set(name, self.fits(node, demand, ROOM_LIMIT, free=free))

    def _own_room(self, demand: DeviceDemand) -> _Room:
        rooms = self._own("_rooms")
        if self._private_rooms is not None and demand not in self._private_rooms:
            rooms[demand] = rooms[demand].copy()
            self._private_rooms.add(demand)
        return rooms[demand]

    def _nodes_of_pool(self, pool_id: tuple[str, str]) -> frozenset[str]:
        if self._pool_nodes is None:
            by_pool: dict[tuple[str, str], set[str]] = {}
            for node, pools in self._local.items():
                for pool in pools:
                    by_pool.setdefault(pool, set()).add(node)
            self._pool_nodes = {pool: frozenset(nodes) for pool, nodes in by_pool.items()}
        return self._pool_nodes.get(pool_id, frozenset())

    def _taken_explicitly(self, key: DeviceKey) -> bool:
        return self._taken.get(key, 0) > self._extended.get(key, 0)

    def _busy(self, taken: Collection[DeviceKey] = frozenset()) -> Busy:
        return _Busy(self._taken, taken) if taken else self._taken

    def _join_pending(self, claim: Claim, node: str, result: ClaimResult, uid: str) -> None:
        pending = self._pending.get(claim.shared)
        if pending is None:
            self._own("_pending")[claim.shared] = _PendingClaim(node, result, claim.extended, frozenset({uid}))
            self._take(_exclusive(result), claim.extended, +1)
        else:
            self._own("_pending")[claim.shared] = _PendingClaim(pending.node, pending.results, pending.extended,
                                                                pending.holders | {uid})

    def _allocation_of(self, claim: Claim) -> Allocation | None:
        """The claim's allocation as the pod saw it, or as the inventory knows it now."""
        if claim.allocation is not None:
            return claim.allocation
        known = self._claims.get(claim.shared) if claim.shared is not None else None
        return None if known is None else known.allocation

    def _resolve_extended_names(self) -> None:
        """Explicit names go to the newest class (then the first by name); implicit ones always map."""
        names: dict[str, str] = {}
        for cls in sorted(self._classes.values(), key=lambda c: (-c.created, c.name)):
            if cls.extended_resource and cls.extended_resource not in names:
                names[cls.extended_resource] = cls.name
        for cls in self._classes.values():
            names[IMPLICIT_EXTENDED_RESOURCE_PREFIX + cls.name] = cls.name
        self._extended_names = names  # a new table: a copy sharing the old one keeps it

    # --- slices and pools ------------------------------------------------------------------------

    def _parse_slice(self, obj: Mapping) -> _Slice:
        metadata, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        driver, pool = spec.get("driver", ""), spec.get("pool") or {}
        pool_id, name = (driver, pool.get("name", "")), metadata.get("name", "")
        per_device = bool(spec.get("perDeviceNodeSelection"))
        devices = tuple((_Device((driver, pool_id[1], raw.get("name", "")), self._shape_id(driver, raw), name),
                         _placement(raw) if per_device else None)
                        for raw in spec.get("devices") or ())
        return _Slice(name, pool_id, int(pool.get("generation") or 0), int(pool.get("resourceSliceCount") or 1),
                      None if per_device else _placement(spec), devices)

    def _shape_id(self, driver: str, raw: Mapping) -> int:
        shape = _shape(driver, raw)
        shape_id = self._shape_ids.get(shape)
        if shape_id is None:
            shape_id = self._shape_ids[shape] = len(self._shapes)
            self._shapes.append(shape)
        return shape_id

    def _repool(self, pool_id: tuple[str, str], old: _Slice | None, new: _Slice | None) -> None:
        members = set(self._pool_slices.get(pool_id, ()))
        if old is not None:
            members.discard(old.name)
        if new is not None:
            members.add(new.name)
        before = self._pools.get(pool_id)
        touched = {s.placement.node for s in before.slices if s.placement and s.placement.node} if before else set()
        pools, pool_slices = self._own("_pools"), self._own("_pool_slices")
        if members:
            pool_slices[pool_id] = frozenset(members)
            pools[pool_id] = _pool([self._slices[name] for name in members])
        else:
            pool_slices.pop(pool_id, None)
            pools.pop(pool_id, None)
        after = pools.get(pool_id)
        local = after is not None and all(s.placement is not None and s.placement.node for s in after.slices)
        nodes = {s.placement.node for s in after.slices if s.placement and s.placement.node} if after else set()
        self._shared_pools = (self._shared_pools - {pool_id}) | ({pool_id} if after and not local else set())
        table = self._own("_local")
        for node in touched | nodes:
            pools_of = set(table.get(node, ())) - {pool_id}
            if local and node in nodes:
                pools_of.add(pool_id)
            if pools_of:
                table[node] = frozenset(pools_of)
            else:
                table.pop(node, None)
        cache = self._own("_node_devices")
        for node in touched | nodes:
            cache.pop(node, None)
        self._pool_nodes = self._device_nodes = None
        self.forget_rooms()

    def _devices(self, node: Node) -> _NodeDevices:
        """The devices the node sees, in allocator order, and the pools the allocator skips."""
        local = self._node_devices.get(node.name)
        if local is None:
            parts = tuple(self._pool_part(pool_id, node) for pool_id in sorted(self._local.get(node.name, ())))
            local = self._own("_node_devices")[node.name] = (parts, _node_view(parts))
        if not self._shared_pools:
            return local[1]
        shared = tuple(part for part in (self._pool_part(pool_id, node) for pool_id in self._shared_pools) if part[1])
        return _node_view(sorted(local[0] + shared, key=lambda part: part[0]))

    def _pool_part(self, pool_id: tuple[str, str], node: Node) -> "_PoolPart":
        pool = self._pools[pool_id]
        devices = []
        for s in pool.slices:
            if s.placement is not None:
                if s.placement.admits(node):
                    devices += [device for device, _ in s.devices]
            else:
                devices += [device for device, placement in s.devices if placement.admits(node)]
        return pool_id, tuple(devices), pool.problem if devices else None

    # --- one pod ---------------------------------------------------------------------------------

    def _attempt(self, node: Node, devices: _NodeDevices, demand: DeviceDemand, busy: Busy,
                 pending: Mapping[ClaimKey, _PendingClaim]) -> tuple[tuple[ClaimResult, ...] | None, str | None]:
        """The pod's claims on the node: (results per claim, None) or (None, the refusal)."""
        results: list[ClaimResult | None] = [None] * len(demand)
        unavailable, blocks, constraints = False, [], {}
        for index, claim in enumerate(demand):
            allocation = self._allocation_of(claim)
            if allocation is not None:
                unavailable |= not affinity_matches(allocation.available_on, node)
                results[index] = allocation.results
            elif claim.shared in pending:
                unavailable |= pending[claim.shared].node != node.name
                results[index] = pending[claim.shared].results
            else:
                claim_blocks = self._blocks(index, claim, devices, busy)
                if isinstance(claim_blocks, str):
                    return None, claim_blocks
                blocks += claim_blocks
                constraints[index] = claim.constraints
        first_free = _first_free(devices, blocks, constraints)
        if first_free is not None:
            if not first_free:
                return None, CANNOT_ALLOCATE
            results[blocks[0].claim] = first_free
        elif blocks:
            search = _Search(devices.devices, self._shapes, busy, blocks, constraints)
            found = search.run()
            if found is None:
                return None, f"more than {MAX_STEPS} devices to try: the allocation is not predicted"
            if not found:
                return None, CANNOT_ALLOCATE
            for index, result in search.results.items():
                results[index] = tuple(result)
        if unavailable:
            return None, NOT_AVAILABLE
        return tuple(results), None

    def _blocks(self, index: int, claim: Claim, devices: _NodeDevices, busy: Busy) -> list["_Block"] | str:
        """The claim's requests with their candidate devices, or why it cannot be allocated."""
        blocks, fewest = [], 0
        for request in claim.requests:
            variants = []
            for name, variant in _variants(request):
                cls = self._classes.get(variant.device_class)
                if cls is None:
                    return f"request {name}: device class {variant.device_class} does not exist"
                candidates = self._candidates(cls, variant, devices, busy)
                if isinstance(candidates, str):
                    return f"claim {claim.name}, request {name}: {candidates}"
                variants.append((name, variant, candidates))
            fewest += min(len(c) if v.mode == ALL else v.count for _, v, c in variants)
            blocks.append(_Block(index, request.name, tuple(variants)))
        if fewest > MAX_RESULTS_PER_CLAIM:
            return f"claim {claim.name}: number of requested devices {fewest} exceeds the claim limit of " \
                   f"{MAX_RESULTS_PER_CLAIM}"
        return blocks

    def _candidates(self, cls: _DeviceClass, request: DeviceRequest, devices: _NodeDevices,
                    busy: Busy) -> list[int] | str:
        """Positions of the devices the request may take (All: busy ones too), or a CEL error."""
        if request.mode == ALL and devices.problems:
            return f"asks for all devices, but {devices.problems[0]}"
        matching = self._matching_of(cls, request, devices)
        listed = devices.devices
        if isinstance(matching, _Broken):
            return f"{matching.reason} on device {'/'.join(listed[matching.position].key)}"
        if request.mode == ALL or request.admin_access:
            return list(matching)
        return [position for position in matching if listed[position].key not in busy]

    def _matching_of(self, cls: _DeviceClass, request: DeviceRequest,
                     devices: _NodeDevices) -> "tuple[int, ...] | _Broken":
        """`_matching_positions`, remembered per sequence of device shapes."""
        selectors = self._cel.selector_set(cls.name, cls.selectors, request.selectors)
        key = (devices.shapes, selectors, request.tolerations)
        matching = self._matching.get(key)
        if matching is None:
            matching = self._matching[key] = self._matching_positions(selectors, request, devices)
        return matching

    def _matching_positions(self, selectors: "_SelectorSet", request: DeviceRequest,
                            devices: _NodeDevices) -> "tuple[int, ...] | _Broken":
        """The positions of the devices the request's class and selectors match and its
        tolerations allow, in use or not: the same on every node whose devices have these shapes
        in this order, so it is worked out once per such order (where a selector breaks, the
        first broken device's position)."""
        positions = []
        for position, device in enumerate(devices.devices):
            answer = selectors.by_shape.get(device.shape)
            if answer is None:
                answer = selectors.match(device.shape, self._shapes[device.shape])
            if answer.__class__ is _Broken:
                return _Broken(answer.reason, position)
            if answer and self._allocatable(device, request):
                positions.append(position)
        return tuple(positions)

    def _selectable(self, cls: _DeviceClass, request: DeviceRequest, device: _Device) -> bool:
        return self._match(cls, request.selectors, device) is True and self._allocatable(device, request)

    def _match(self, cls: _DeviceClass, selectors: tuple[str, ...], device: _Device) -> "bool | _Broken":
        selector_set = self._cel.selector_set(cls.name, cls.selectors, selectors)
        return selector_set.match(device.shape, self._shapes[device.shape])

    def _allocatable(self, device: _Device, request: DeviceRequest) -> bool:
        shape = self._shapes[device.shape]
        if shape.refused:
            return False
        if not shape.taints:
            return True
        return not any(taint.effect in _BLOCKING_TAINTS and not any(tolerates(t, taint) for t in request.tolerations)
                       for taint in shape.taints)

    # --- many pods -------------------------------------------------------------------------------

    def _one_request_fit(self, devices: _NodeDevices, demand: DeviceDemand, busy: Busy,
                         free: dict[Hashable, int] | None = None) -> int | None:
        """How many pods fit, worked out by division for the common demand of one plain request
        (`_plain_request`). Its candidates are the free devices its class, selectors and
        tolerations match, whatever its count: `free` keeps them per these, for the same node
        and devices in use."""
        request = _plain_request(demand)
        if request is None:
            return None
        key = (request.device_class, request.selectors, request.tolerations)
        available = None if free is None else free.get(key)
        if available is None:
            cls = self._classes.get(request.device_class)
            candidates = "" if cls is None else self._candidates(cls, request, devices, busy)
            available = -1 if isinstance(candidates, str) else len(candidates)
            if free is not None:
                free[key] = available
        if available < 0 or request.count > MAX_RESULTS_PER_CLAIM:
            return 0
        return available // request.count

    def _placed_in_turn(self, node: Node, devices: _NodeDevices, demand: DeviceDemand, count: int,
                        busy: Busy) -> int:
        pending = dict(self._pending)
        for placed in range(count):
            results, _ = self._attempt(node, devices, demand, busy, pending)
            if results is None:
                return placed
            busy = _plus(busy, self._new_devices(node, demand, results, pending))
        return count

    def _new_devices(self, node: Node, demand: DeviceDemand, results: Sequence[ClaimResult],
                     pending: dict[ClaimKey, _PendingClaim]) -> list[DeviceKey]:
        """The devices one more pod takes; a shared claim it allocated is pending from now on."""
        new = []
        for claim, result in zip(demand, results):
            if self._allocation_of(claim) is not None or claim.shared in pending:
                continue
            if claim.shared is not None:
                pending[claim.shared] = _PendingClaim(node.name, result, claim.extended, frozenset())
            new += _exclusive(result)
        return new

    def _orders(self, devices: _NodeDevices, demands: Sequence[DeviceDemand],
                busy: Busy) -> list[_NodeDevices] | str:
        """The device orders to check: one when the order cannot matter, else every slice order."""
        wanted: list[frozenset[int]] = []
        constrained = False
        for demand in demands:
            for claim in demand:
                constrained |= bool(claim.constraints)
                for request in claim.requests:
                    for _, variant in _variants(request):
                        cls = self._classes.get(variant.device_class)
                        candidates = self._candidates(cls, variant, devices, busy) if cls else []
                        wanted.append(frozenset(candidates) if not isinstance(candidates, str) else frozenset())
        if not constrained and len(set(wanted)) <= 1:
            return [devices]
        positions = frozenset().union(*wanted)
        runs: dict[str, list[_Device]] = {}
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
        return [_NodeDevices(tuple(d for name in order for d in runs[name]) + tuple(rest), devices.problems)
                for order in permutations(slices)]

    def _request_shortage(self, nodes: Sequence[Node], claim: Claim, request: DeviceRequest, members: int,
                          busy: Busy) -> str | None:
        cls = self._classes.get(request.device_class)
        if cls is None:
            return f"request {request.name}: device class {request.device_class} does not exist"
        free = {}
        for node in nodes:
            candidates = self._candidates(cls, request, self._devices(node), busy)
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


@lru_cache(maxsize=1024)
def _extended_claim(served: tuple[tuple[str, str, int], ...]) -> Claim:
    """One claim object per distinct set of (resource, class, count): pods asking alike share it."""
    return Claim(EXTENDED_CLAIM_NAME, tuple(DeviceRequest(resource, class_name, count=count)
                                            for resource, class_name, count in served), extended=True)


def sharing_key(demand: DeviceDemand) -> Hashable:
    """What tells the demand apart where members share a node before they bind.

    A demand of one claim of the pod's own with one plain request (ExactCount, no subrequests,
    constraints or admin access) takes the first free devices of its class, selectors and
    tolerations: demands of one such key, whatever their counts, all get their devices in any
    binding order exactly when the node has as many free as they ask for in all. Any other
    demand is its own key: first-fit in an unknown order could fail where the plan succeeded.
    """
    request = _plain_request(demand)
    return demand if request is None else (request.device_class, request.selectors, request.tolerations)


def _plain_request(demand: DeviceDemand) -> DeviceRequest | None:
    """The request of a demand of one claim of the pod's own with one plain request (ExactCount,
    no subrequests, constraints or admin access), which takes the first free devices it matches."""
    if len(demand) != 1 or len(demand[0].requests) != 1:
        return None
    claim, request = demand[0], demand[0].requests[0]
    if (claim.shared is not None or claim.allocation is not None or claim.constraints or request.first_available
            or request.mode != EXACT_COUNT or request.admin_access):
        return None
    return request


def _first_free(devices: _NodeDevices, blocks: Sequence["_Block"],
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


def _variants(request: DeviceRequest) -> list[tuple[str, DeviceRequest]]:
    if request.first_available:
        return [(f"{request.name}/{sub.name}", sub) for sub in request.first_available]
    return [(request.name, request)]


def _exclusive(results: Iterable[DeviceResult]) -> list[DeviceKey]:
    """The devices a claim takes from everyone else: all but those given for admin access."""
    return [r.device for r in results if not r.admin_access]


def _pool(slices: Sequence[_Slice]) -> _Pool:
    newest = max(s.generation for s in slices)
    current = tuple(sorted((s for s in slices if s.generation == newest), key=lambda s: s.name))
    problem = None
    if len(current) != current[0].count:
        problem = "is currently being updated"
    names = Counter(device.key[2] for s in current for device, _ in s.devices)
    duplicate = next((name for name, n in names.items() if n > 1), None)
    if duplicate is not None:
        problem = f"is currently invalid (duplicate device name {duplicate})"
    return _Pool(current, problem)


def _placement(spec: Mapping) -> _Placement:
    return _Placement(spec.get("nodeName") or None, bool(spec.get("allNodes")), _terms(spec.get("nodeSelector")))


def _shape(driver: str, raw: Mapping) -> _Shape:
    attributes = tuple(sorted((_qualified(name, driver), _attribute(value))
                              for name, value in (raw.get("attributes") or {}).items()))
    capacity = tuple(sorted((_qualified(name, driver), parse_quantity((value or {}).get("value", "0")))
                            for name, value in (raw.get("capacity") or {}).items()))
    taints = tuple(Taint(t.get("key", ""), t.get("value", ""), t.get("effect", "")) for t in raw.get("taints") or ())
    refused = None
    if raw.get("consumesCounters"):
        refused = "consumes counters (partitionable devices are not modelled)"
    elif raw.get("bindingConditions"):
        refused = "has binding conditions (not modelled)"
    return _Shape(driver, attributes, capacity, taints, refused)


def _qualified(name: str, driver: str) -> tuple[str, str]:
    domain, slash, ident = name.partition("/")
    return (domain, ident) if slash else (driver, name)


def _attribute(value: Mapping) -> tuple[str, object]:
    for kind in ("int", "bool", "string", "version"):
        if kind in value:
            return kind, value[kind]
    return "unknown", None


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

    def __init__(self, devices: Sequence[_Device], shapes: Sequence[_Shape], busy: Busy, blocks: Sequence[_Block],
                 constraints: Mapping[int, tuple[MatchAttribute, ...]]):
        self._devices, self._shapes, self._busy, self._blocks = devices, shapes, busy, blocks
        self._constraints = {claim: [_ConstraintState(_qualified(c.attribute, ""), frozenset(c.requests))
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

    def _constrain(self, block: _Block, name: str, device: _Device) -> bool:
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


class _Interleavings:
    """Every order of binding a multiset of demands on one node, each allocation state once."""

    def __init__(self, inventory: Inventory, node: Node, devices: _NodeDevices, demands: Counter):
        self._inventory, self._node, self._devices = inventory, node, devices
        self._demands = list(demands)
        self._seen: set[tuple] = set()
        self._start = tuple(demands[d] for d in self._demands)

    def refusal(self, busy: Busy) -> str | None:
        return self._explore(self._start, busy, dict(self._inventory._pending), frozenset())

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
            results, reason = self._inventory._attempt(self._node, self._devices, demand, busy, pending)
            if results is None:
                placed = sum(self._start) - sum(remaining)
                return reason if not placed else f"{reason} for a member bound after {placed} of the others"
            after = dict(pending)
            taken = self._inventory._new_devices(self._node, demand, results, after)
            left = remaining[:index] + (remaining[index] - 1,) + remaining[index + 1:]
            reason = self._explore(left, _plus(busy, taken), after, new | frozenset(taken))
            if reason is not None:
                return reason
        return None


# --- CEL -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Broken:
    reason: str
    position: int = -1  # of the device it broke on, when known


class _SelectorSet:
    """A class's selectors then a request's, with what they said of each device shape so far."""

    __slots__ = ("_cel", "_class_name", "_class_selectors", "_request_selectors", "by_shape")

    def __init__(self, cel: "_Cel", class_name: str, class_selectors: tuple[str, ...],
                 request_selectors: tuple[str, ...]):
        self._cel, self._class_name = cel, class_name
        self._class_selectors, self._request_selectors = class_selectors, request_selectors
        self.by_shape: dict[int, bool | _Broken] = {}

    def match(self, shape_id: int, shape: _Shape) -> bool | _Broken:
        answer = self.by_shape.get(shape_id)
        if answer is None:
            answer = self.by_shape[shape_id] = self._cel.all_hold(
                self._class_name, self._class_selectors, self._request_selectors, shape_id, shape)
        return answer


class _Cel:
    """Each expression compiled once; each answer per (expression, device shape) remembered."""

    def __init__(self) -> None:
        self._environment = celpy.Environment()
        self._programs: dict[str, object] = {}
        self._devices: dict[int, Mapping | str] = {}
        self._answers: dict[tuple[str, int], bool | str] = {}
        self._sets: dict[tuple, _SelectorSet] = {}
        self.evaluations = 0

    def selector_set(self, class_name: str, class_selectors: tuple[str, ...],
                     request_selectors: tuple[str, ...]) -> _SelectorSet:
        key = (class_name, class_selectors, request_selectors)
        found = self._sets.get(key)
        if found is None:
            found = self._sets[key] = _SelectorSet(self, class_name, class_selectors, request_selectors)
        return found

    def all_hold(self, class_name: str, class_selectors: tuple[str, ...], request_selectors: tuple[str, ...],
                 shape_id: int, shape: _Shape) -> bool | _Broken:
        for label, selectors in ((f"class {class_name}", class_selectors), ("request", request_selectors)):
            for index, expression in enumerate(selectors):
                answer = self._answer(expression, shape_id, shape)
                if isinstance(answer, str):
                    return _Broken(f"{label}: selector #{index}: {answer}")
                if not answer:
                    return False
        return True

    def _answer(self, expression: str, shape_id: int, shape: _Shape) -> bool | str:
        key = (expression, shape_id)
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = self._evaluate(expression, shape_id, shape)
        return answer

    def _evaluate(self, expression: str, shape_id: int, shape: _Shape) -> bool | str:
        program = self._program(expression)
        if isinstance(program, str):
            return program
        device = self._device(shape_id, shape)
        if isinstance(device, str):
            return f"CEL runtime error: {device}"
        self.evaluations += 1
        try:
            result = program.evaluate({"device": device})
        except Exception as error:  # celpy raises CELEvalError, and whatever a broken expression makes it raise
            return f"CEL runtime error: {error_message(error)}"
        if not isinstance(result, celtypes.BoolType):
            return f"CEL result of type {type(result).__name__} could not be converted to bool"
        return bool(result)

    def _program(self, expression: str):
        program = self._programs.get(expression)
        if program is None:
            try:
                program = self._environment.program(self._environment.compile(expression), _FUNCTIONS)
            except Exception as error:  # celpy's parser raises CELParseError and lark's own errors
                program = f"CEL compile error: {error_message(error)}"
            self._programs[expression] = program
        return program

    def _device(self, shape_id: int, shape: _Shape) -> Mapping | str:
        device = self._devices.get(shape_id)
        if device is None:
            device = self._devices[shape_id] = _cel_device(shape)
        return device


def _cel_device(shape: _Shape) -> Mapping | str:
    """The `device` variable, or why the device's attributes cannot be given to CEL."""
    attributes: dict = {}
    for (domain, ident), (kind, value) in shape.attributes:
        converted = _cel_attribute(kind, value)
        if converted is None:
            return f"attribute {domain}/{ident}: unsupported attribute value"
        attributes.setdefault(celtypes.StringType(domain), {})[celtypes.StringType(ident)] = converted
    capacity: dict = {}
    for (domain, ident), value in shape.capacity:
        capacity.setdefault(celtypes.StringType(domain), {})[celtypes.StringType(ident)] = _Quantity(value)
    return celtypes.MapType({
        celtypes.StringType("driver"): celtypes.StringType(shape.driver),
        celtypes.StringType("attributes"): _Domains({d: celtypes.MapType(v) for d, v in attributes.items()}),
        celtypes.StringType("capacity"): _Domains({d: celtypes.MapType(v) for d, v in capacity.items()}),
    })


def _cel_attribute(kind: str, value: object):
    if kind == "int":
        return celtypes.IntType(value)
    if kind == "bool":
        return celtypes.BoolType(value)
    if kind == "string":
        return celtypes.StringType(value)
    if kind == "version":
        return _Semver.parse(str(value))
    return None


class _Domains(celtypes.MapType):
    """Attributes or capacity by domain: a domain the device does not have is an empty map."""

    def __getitem__(self, key):
        return super().__getitem__(key) if key in self else celtypes.MapType({})


class _Quantity:
    """A `resource.Quantity` in CEL (k8s.io/apiserver/pkg/cel/library quantity)."""

    __slots__ = ("value",)

    def __init__(self, value: Fraction):
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Quantity) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


_SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
                     r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?")


@dataclass(frozen=True, slots=True)
class _Semver:
    """A semantic version in CEL (k8s.io/apiserver/pkg/cel/library semver): build metadata ignored."""

    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()

    @staticmethod
    def parse(text: str) -> "_Semver | None":
        match = _SEMVER.fullmatch(text)
        if match is None:
            return None
        return _Semver(int(match[1]), int(match[2]), int(match[3]), tuple(match[4].split(".")) if match[4] else ())

    def order(self) -> tuple:
        """Semver precedence: a pre-release comes before its release; numbers before words."""
        pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return self.major, self.minor, self.patch, not self.pre, pre


def _compare(a, b) -> int:
    if isinstance(a, _Quantity) and isinstance(b, _Quantity):
        left, right = a.value, b.value
    elif isinstance(a, _Semver) and isinstance(b, _Semver):
        left, right = a.order(), b.order()
    else:
        raise TypeError("compareTo needs two quantities or two versions")
    return (left > right) - (left < right)


def _quantity(text):
    try:
        return _Quantity(parse_quantity(str(text)))
    except ValueError as error:
        return CELEvalError(str(error), ValueError, None)


def _semver(text):
    version = _Semver.parse(str(text))
    return version if version is not None else CELEvalError(f"invalid semver {text!r}", ValueError, None)


def _arithmetic(sign: int):
    def apply(a, b):
        if not isinstance(a, _Quantity):
            raise TypeError("add and sub apply to quantities")
        other = b.value if isinstance(b, _Quantity) else Fraction(int(b))
        return _Quantity(a.value + sign * other)
    return apply


def _as_integer(q):
    if not isinstance(q, _Quantity) or q.value.denominator != 1:
        return CELEvalError("cannot convert the quantity to an integer", ValueError, None)
    return celtypes.IntType(q.value.numerator)


def _version_part(index: int):
    return lambda v: celtypes.IntType((v.major, v.minor, v.patch)[index])


_FUNCTIONS = {
    "quantity": _quantity,
    "isQuantity": lambda text: celtypes.BoolType(not isinstance(_quantity(text), CELEvalError)),
    "semver": _semver,
    "isSemver": lambda text: celtypes.BoolType(_Semver.parse(str(text)) is not None),
    "compareTo": lambda a, b: celtypes.IntType(_compare(a, b)),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b) < 0),
    "add": _arithmetic(+1),
    "sub": _arithmetic(-1),
    "asInteger": _as_integer,
    "isInteger": lambda q: celtypes.BoolType(q.value.denominator == 1),
    "asApproximateFloat": lambda q: celtypes.DoubleType(float(q.value)),
    "sign": lambda q: celtypes.IntType((q.value > 0) - (q.value < 0)),
    "major": _version_part(0),
    "minor": _version_part(1),
    "patch": _version_part(2),
    "lowerAscii": lambda s: celtypes.StringType(str(s).lower()),
    "upperAscii": lambda s: celtypes.StringType(str(s).upper()),
}

