"""Dynamic resource allocation as the kube-scheduler does it: the DynamicResources plugin and its
structured allocator, on plain dicts (`resource.k8s.io/v1`).

PreEnqueue: a pod waits, without a word, until every claim it names exists, is not being deleted
and, for a claim made from a template, is the one the resourceclaim controller recorded in the pod's
status and owns. PreFilter refuses a pod on every node when a claim is in use by as many pods as
may share it (256), or a request names a DeviceClass that does not exist. Filter, per node:
claims already allocated must be available there (their allocation's node selector), and the
claims to allocate must all get devices there — devices the node reaches (`sim.devices`),
selected by the class's and the request's CEL selectors, allocated to no other claim — else
"cannot allocate all claims"; allocation failure is reported before unavailability, as the
plugin does. An allocation admits the nodes its devices all reach (`node_selector`): a claim
shared by several pods is allocated by the first of them bound, and the others bind only where
its node selector admits them.

The allocator tries claims, requests (ExactCount: `count` devices; All: every selected device,
at least one, none in use, from complete pools only; `firstAvailable`: the first subrequest that
works), and devices in order (pools by driver and name, slices by name, devices as listed),
backtracking when a later request or a `matchAttribute` constraint cannot be met; the first
solution wins, so the recordings' devices come out in the same order.

KEP-5004, extended resources served by DRA: a DeviceClass serves `spec.extendedResourceName` and
`deviceclass.resource.kubernetes.io/<class>`. On a node whose allocatable does not list such a
resource, NodeResourcesFit leaves it alone and this plugin allocates it, one ExactCount request
per container (`container-<i>-request-<j>`, j the resource's index among the container's
sorted requests), in one claim the scheduler creates at binding. Where allocatable lists it,
only allocatable counts. Not modelled: admin access, device taints, binding conditions,
prioritized-list scoring, and a special claim left from an earlier cycle (it is used as it is).
An allocation whose node selector cannot be written (a device selector of several terms)
refuses the node with the allocator's error, where the real scheduler aborts the pod's cycle.
"""

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import combinations

from sim.devices import Device, DeviceID, Selection, devices_of, selects_node
from sim.names import (
    DEVICE_CLASSES,
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    IMPLICIT_EXTENDED_RESOURCE_PREFIX,
    NODE_NAME_FIELD,
    RESOURCE_CLAIMS,
)
from sim.placement import NodeFacts
from sim.resources import container_requests

REASON_CANNOT_ALLOCATE = "cannot allocate all claims"
REASON_NOT_AVAILABLE = "resourceclaim not available on the node"
RESERVED_FOR_MAX = 256
ClaimKey = tuple[str, str]  # (namespace, name)


# --- what a claim asks for ---------------------------------------------------------------------

@dataclass(frozen=True)
class Request:
    name: str  # as the result names it: "gpu", or "gpu/h100" for a subrequest
    device_class: str
    selectors: tuple[str, ...]
    all_devices: bool
    count: int


@dataclass(frozen=True)
class Needs:
    """One claim to allocate: per request its alternatives, and the matchAttribute constraints."""

    requests: tuple[tuple[Request, ...], ...]
    constraints: tuple[tuple[frozenset[str], str], ...]
    config: tuple[Mapping, ...] = ()


def exact_request(name: str, spec: Mapping) -> Request:
    selectors = tuple(s["cel"]["expression"] for s in spec.get("selectors") or () if (s.get("cel") or {}).get("expression"))
    mode = spec.get("allocationMode") or "ExactCount"
    return Request(name, spec.get("deviceClassName", ""), selectors, mode == "All", int(spec.get("count") or 1))


def needs_of(claim_spec: Mapping) -> Needs:
    devices = claim_spec.get("devices") or {}
    requests = []
    for r in devices.get("requests") or ():
        if r.get("firstAvailable"):
            requests.append(tuple(exact_request(f"{r['name']}/{s['name']}", s) for s in r["firstAvailable"]))
        else:
            requests.append((exact_request(r.get("name", ""), r.get("exactly") or {}),))
    constraints = tuple((frozenset(c.get("requests") or ()), c["matchAttribute"])
                        for c in devices.get("constraints") or () if c.get("matchAttribute"))
    return Needs(tuple(requests), constraints, tuple(devices.get("config") or ()))


# --- the allocator -------------------------------------------------------------------------------

Picked = list[tuple[str, Device]]  # (request name, device), in result order


@dataclass
class Allocator:
    """Allocates claims on one node from its devices; `taken` are allocated to other claims."""

    devices: list[Device]
    classes: Mapping[str, Mapping]
    taken: Mapping[DeviceID, object]
    selection: Selection

    def allocate(self, claims: list[Needs]) -> list[Picked] | None:
        slots = [(index, alternatives) for index, needs in enumerate(claims) for alternatives in needs.requests]
        last_slot = {index: position for position, (index, _) in enumerate(slots)}
        picked: list[Picked] = [[] for _ in claims]
        used: set[DeviceID] = set()

        def search(position: int) -> bool:
            if position == len(slots):
                return True
            index, alternatives = slots[position]
            for request in alternatives:
                for devices in self._choices(request, used):
                    picked[index].extend((request.name, d) for d in devices)
                    used.update(d.id for d in devices)
                    finished = last_slot[index] != position or constraints_hold(claims[index], picked[index])
                    if finished and search(position + 1):
                        return True
                    del picked[index][len(picked[index]) - len(devices):]
                    used.difference_update(d.id for d in devices)
            return False

        return picked if search(0) else None

    def _choices(self, request: Request, used: set[DeviceID]) -> Iterator[tuple[Device, ...]]:
        device_class = self.classes.get(request.device_class)
        if device_class is None:
            return iter(())
        expressions = tuple(s["cel"]["expression"] for s in (device_class.get("spec") or {}).get("selectors") or ()
                            if (s.get("cel") or {}).get("expression")) + request.selectors
        selected = [d for d in self.devices if self.selection.selects(expressions, d)]
        if request.all_devices:
            usable = selected and all(d.pool_complete and d.id not in self.taken and d.id not in used
                                      for d in selected)
            return iter([tuple(selected)] if usable else [])
        free = [d for d in selected if d.id not in self.taken and d.id not in used]
        return combinations(free, request.count)


def constraints_hold(needs: Needs, picked: Picked) -> bool:
    for names, attribute in needs.constraints:
        values = {d.attribute(attribute) for request, d in picked
                  if not names or request in names or request.partition("/")[0] in names}
        if None in values or len(values) > 1:
            return False
    return True


def allocation_result(needs: Needs, picked: Picked, classes: Mapping[str, Mapping]) -> dict:
    """`status.allocation` as the allocator writes it (the scheduler adds the timestamp). ValueError
    when it cannot write the node selector (`node_selector`)."""
    chosen = {request.partition("/")[0]: request for request, _ in picked}
    config = []
    for request in dict.fromkeys(request for request, _ in picked):
        device_class = classes.get(next(r.device_class for alternatives in needs.requests for r in alternatives
                                        if r.name == request), {})
        config += [{"source": "FromClass", "opaque": c.get("opaque")} for c in (device_class.get("spec") or {}).get("config") or ()]
    for c in needs.config:
        entry = {"source": "FromClaim", "opaque": c.get("opaque")}
        if c.get("requests"):
            entry["requests"] = [chosen.get(r, r) for r in c["requests"]]
        config.append(entry)
    devices: dict = {"results": [{"request": request, "driver": d.driver, "pool": d.pool, "device": d.name}
                                 for request, d in picked]}
    if config:
        devices["config"] = config
    allocation: dict = {"devices": devices}
    selector = node_selector([d for _, d in picked])
    if selector is not None:
        allocation["nodeSelector"] = selector
    return allocation


def node_selector(devices: list[Device]) -> dict | None:
    """The allocation's node selector (`createNodeSelector`): a node-local device pins it to its
    node; otherwise the requirements of the devices' node selectors in one term, each once (the
    same key, operator and set of values); devices on every node need none. A device selector of
    several terms cannot be combined: ValueError, as the allocator fails then (the API server
    allows such a selector on a device, not on a slice)."""
    expressions: list[dict] = []
    fields: list[dict] = []
    for device in devices:
        if device.node_name:
            return {"nodeSelectorTerms": [{"matchFields": [{"key": NODE_NAME_FIELD, "operator": "In",
                                                             "values": [device.node_name]}]}]}
        terms = (device.node_selector or {}).get("nodeSelectorTerms") or []
        if len(terms) > 1:
            raise ValueError(f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
        for term in terms:
            _add_new(term.get("matchFields") or (), fields)
            _add_new(term.get("matchExpressions") or (), expressions)
    if not expressions and not fields:
        return None
    term = {key: value for key, value in (("matchExpressions", expressions), ("matchFields", fields)) if value}
    return {"nodeSelectorTerms": [term]}


def _add_new(requirements: Iterable[Mapping], into: list[dict]) -> None:
    """`addNewNodeSelectorRequirements`: each requirement not there yet, in order."""
    for new in requirements:
        if not any(r.get("key") == new.get("key") and r.get("operator") == new.get("operator")
                   and set(r.get("values") or ()) == set(new.get("values") or ()) for r in into):
            into.append(dict(new))


# --- extended resources served by DRA (KEP-5004) ----------------------------------------------

def extended_resource_classes(classes: Iterable[Mapping]) -> dict[str, str]:
    """Resource name → the DeviceClass serving it; of two classes naming one resource, the newest."""
    served: dict[str, tuple[str, str]] = {}
    for c in classes:
        name, created = c["metadata"]["name"], c["metadata"].get("creationTimestamp", "")
        served[IMPLICIT_EXTENDED_RESOURCE_PREFIX + name] = (created, name)
        explicit = (c.get("spec") or {}).get("extendedResourceName")
        if explicit and (explicit not in served or served[explicit] < (created, name)):
            served[explicit] = (created, name)
    return {resource: name for resource, (_, name) in served.items()}


def extended_requests(pod: Mapping, resources: Iterable[str], classes: Mapping[str, str]) -> tuple[list, list]:
    """The special claim's device requests and the pod's request mappings, as the plugin builds
    them: sidecars and app containers each get their own request; an ordinary init container
    reuses the requests of the containers after it, asking only for what they lack, and all
    init containers share the largest such request."""
    spec = pod.get("spec") or {}
    inits = list(spec.get("initContainers") or ())
    containers = inits + list(spec.get("containers") or ())
    requests: list[dict] = []
    mappings: list[dict] = []
    for resource in sorted(resources):
        own: list[dict | None] = [None] * len(containers)
        long_lived, short_lived = [], []
        for i, container in enumerate(containers):
            if i < len(inits) and container.get("restartPolicy") != "Always":
                continue
            own[i], found = container_request(i, container, resource, classes[resource], [])
            long_lived += found
        largest: dict | None = None
        short_names: set[str] = set()
        for i, container in enumerate(containers[:len(inits)]):
            if container.get("restartPolicy") == "Always":
                continue
            request, found = container_request(i, container, resource, classes[resource], own[i:])
            if request is not None:
                short_names.add(request["name"])
                if largest is None or largest["exactly"]["count"] < request["exactly"]["count"]:
                    largest = request
            short_lived += found
        if largest is not None and len(short_names) > 1:
            for mapping in short_lived:
                if mapping["requestName"] in short_names:
                    mapping["requestName"] = largest["name"]
        requests += ([largest] if largest else []) + [r for r in own if r is not None]
        mappings += long_lived + short_lived
    return sorted(requests, key=lambda r: r["name"]), mappings


def container_request(index: int, container: Mapping, resource: str, device_class: str,
                      reusable: list[dict | None]) -> tuple[dict | None, list[dict]]:
    wanted_all = container_requests(container)
    wanted = wanted_all.get(resource)
    if not wanted or wanted.denominator != 1:
        return None, []
    mappings, have = [], 0
    for request in reusable:
        if request is not None:
            have += request["exactly"]["count"]
            mappings.append({"containerName": container.get("name", ""), "resourceName": resource,
                             "requestName": request["name"]})
            if have >= wanted:
                return None, mappings
    name = f"container-{index}-request-{sorted(wanted_all).index(resource)}"
    request = {"name": name, "exactly": {"deviceClassName": device_class, "allocationMode": "ExactCount",
                                         "count": int(wanted) - have}}
    mappings.append({"containerName": container.get("name", ""), "resourceName": resource, "requestName": name})
    return request, mappings


def is_extended_resource_claim(claim: Mapping, pod: Mapping) -> bool:
    meta = claim["metadata"]
    return (meta.get("annotations") or {}).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true" and \
        controlled_by(claim, pod)


def controlled_by(claim: Mapping, pod: Mapping) -> bool:
    uid = pod["metadata"].get("uid")
    return any(r.get("controller") and r.get("uid") == uid for r in claim["metadata"].get("ownerReferences") or ())


# --- the plugin's view of one pod ---------------------------------------------------------------

@dataclass
class PodClaim:
    key: ClaimKey
    claim: Mapping
    needs: Needs | None  # None when the claim is allocated already
    reserved: bool  # reservedFor names the pod already


@dataclass
class Plan:
    """What binding the pod to the node writes: allocations (None: only reserve) per claim, and
    the special claim for extended resources."""

    claims: list[tuple[PodClaim, dict | None]]
    extended: tuple[list, list, dict] | None  # (requests, request mappings, allocation)


@dataclass
class ClaimFilter:
    """DynamicResources' state for one pod, from PreFilter; `reason` is its Filter."""

    claims: list[PodClaim]
    extended: dict[str, int]  # extended resources the pod requests that a DeviceClass serves
    state: "DraState"
    pod: Mapping
    plans: dict[str, Plan] = field(default_factory=dict)

    def reason(self, node: NodeFacts) -> str | None:
        by_dra = sorted(r for r in self.extended if not node.allocatable.get(r))
        if not self.claims and not by_dra:
            return None
        special = None
        if by_dra:
            requests, mappings = extended_requests(self.pod, by_dra, self.state.extended_classes)
            special = (requests, mappings, needs_of({"devices": {"requests": requests}}))
        wanted = [c.needs for c in self.claims if c.needs is not None] + ([special[2]] if special else [])
        picked: list[Picked] = []
        if wanted:
            picked = self.state.allocator(node).allocate(wanted)
            if picked is None:
                return REASON_CANNOT_ALLOCATE
        names = [c.key[1] for c in self.claims if c.needs is not None] + ["for extended resources"]
        written = []
        for name, needs, devices in zip(names, wanted, picked):
            try:
                written.append(allocation_result(needs, devices, self.state.classes))
            except ValueError as error:  # the real scheduler aborts the pod's cycle with this error
                return f"create NodeSelector for claim {name}: {error}"
        if any(c.needs is None and not available_on(c.claim, node) for c in self.claims):
            return REASON_NOT_AVAILABLE
        allocations = iter(written)
        claims = [(c, next(allocations) if c.needs is not None else None) for c in self.claims]
        self.plans[node.name] = Plan(claims, (special[0], special[1], next(allocations)) if special else None)
        return None


def available_on(claim: Mapping, node: NodeFacts) -> bool:
    selector = ((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector")
    return selector is None or selects_node(selector, node)


def reserved_for(claim: Mapping, pod: Mapping) -> bool:
    uid = pod["metadata"].get("uid")
    return any(r.get("uid") == uid for r in (claim.get("status") or {}).get("reservedFor") or ())


@dataclass(frozen=True)
class Prepared:
    """PreEnqueue and PreFilter for one pod: wait (a claim is not there yet), refuse everywhere
    (`failure`), or filter nodes with `check` (None: the plugin has nothing to do)."""

    waiting: bool = False
    failure: str = ""
    check: ClaimFilter | None = None


# --- the scheduler's cache of DRA objects ------------------------------------------------------

class DraState:
    """DeviceClasses, ResourceSlices and ResourceClaims from watch events, the devices they
    allocate, and per node the devices there."""

    def __init__(self):
        self.classes: dict[str, Mapping] = {}
        self.slices: dict[str, Mapping] = {}
        self.claims: dict[ClaimKey, Mapping] = {}
        self.taken: dict[DeviceID, ClaimKey] = {}
        self.extended_classes: dict[str, str] = {}
        self.served: frozenset[str] = frozenset()  # extended resources NodeResourcesFit leaves to DRA
        self._devices: list[Device] | None = None
        self._on_node: dict[str, list[Device]] = {}
        self.selection = Selection()

    def observe(self, resource: str, kind: str, obj: Mapping) -> None:
        if resource == RESOURCE_CLAIMS:
            self.put_claim(obj, gone=kind == "DELETED")
            return
        table = self.classes if resource == DEVICE_CLASSES else self.slices
        table.pop(obj["metadata"]["name"], None)
        if kind != "DELETED":
            table[obj["metadata"]["name"]] = obj
        if resource == DEVICE_CLASSES:
            self.extended_classes = extended_resource_classes(self.classes.values())
            self.served = frozenset(self.extended_classes)
        else:
            self._devices, self._on_node, self.selection = None, {}, Selection()

    def put_claim(self, claim: Mapping, gone: bool = False) -> None:
        key = (claim["metadata"].get("namespace", ""), claim["metadata"]["name"])
        for device in allocated_devices(self.claims.get(key)):
            if self.taken.get(device) == key:
                del self.taken[device]
        if gone:
            self.claims.pop(key, None)
            return
        self.claims[key] = claim
        for device in allocated_devices(claim):
            self.taken[device] = key

    def nodes_changed(self) -> None:
        self._on_node = {}

    def allocator(self, node: NodeFacts) -> Allocator:
        devices = self._on_node.get(node.name)
        if devices is None:
            if self._devices is None:
                self._devices = devices_of(self.slices.values())
            devices = self._on_node[node.name] = [d for d in self._devices if d.on(node)]
        return Allocator(devices, self.classes, self.taken, self.selection)

    def prepare(self, pod: Mapping, requests: Mapping) -> Prepared:
        """PreEnqueue and PreFilter; `requests` are the pod's effective requests."""
        claims = self._user_claims(pod)
        if claims is None:
            return Prepared(waiting=True)
        extended = {r: int(q) for r, q in requests.items() if r in self.extended_classes and q}
        namespace = pod["metadata"].get("namespace", "")
        special = next((c for (ns, _), c in self.claims.items() if ns == namespace
                        and is_extended_resource_claim(c, pod)), None) if extended else None
        if special is not None:
            claims.append(special)
            extended = {}
        if not claims and not extended:
            return Prepared()
        prepared = []
        for claim in claims:
            entry = PodClaim((namespace, claim["metadata"]["name"]), claim, None, reserved_for(claim, pod))
            status = claim.get("status") or {}
            if status.get("allocation"):
                if len(status.get("reservedFor") or ()) >= RESERVED_FOR_MAX and not entry.reserved:
                    return Prepared(failure="resourceclaim in use")
            else:
                entry.needs = needs_of(claim.get("spec") or {})
                missing = next((r for alternatives in entry.needs.requests for r in alternatives
                                if r.device_class not in self.classes), None)
                if missing is not None:
                    return Prepared(failure=f"request {missing.name}: device class {missing.device_class} does not exist")
            prepared.append(entry)
        return Prepared(check=ClaimFilter(prepared, extended, self, pod))

    def _user_claims(self, pod: Mapping) -> list[Mapping] | None:
        """The claims of `spec.resourceClaims`; None while one is missing, being deleted, or not
        the pod's own when it must be (PreEnqueue holds the pod back then)."""
        namespace = pod["metadata"].get("namespace", "")
        claims = []
        for entry in (pod.get("spec") or {}).get("resourceClaims") or ():
            name, owned = claim_name(pod, entry)
            if name is False:
                return None
            if name is None:
                continue
            claim = self.claims.get((namespace, name))
            if claim is None or claim["metadata"].get("deletionTimestamp") or (owned and not controlled_by(claim, pod)):
                return None
            claims.append(claim)
        return claims


def claim_name(pod: Mapping, entry: Mapping) -> tuple[str | None | bool, bool]:
    """`resourceclaim.Name`: (the claim's name, whether the pod must own it); the name is False
    while the controller has not recorded the claim made from a template, None when it recorded
    that none is needed."""
    if entry.get("resourceClaimName"):
        return entry["resourceClaimName"], False
    statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or ()
    recorded = next((s for s in statuses if s.get("name") == entry.get("name")), None)
    if recorded is None:
        return False, True
    return recorded.get("resourceClaimName"), True


def allocated_devices(claim: Mapping | None) -> list[DeviceID]:
    allocation = ((claim or {}).get("status") or {}).get("allocation") or {}
    return [(r["driver"], r["pool"], r["device"]) for r in (allocation.get("devices") or {}).get("results") or ()]

