"""The devices the drivers publish, as the allocator walks them: ResourceSlices of pools of
devices, each device by its shape (what decides whether it matches a request: driver, attributes,
capacity, taints), the nodes that reach a slice or a device, and the DeviceClasses that select them.

A slice sets exactly one of `nodeName` (a device of one node), `nodeSelector` (of one term: the
nodes it picks, as network-attached devices are), `allNodes`, or `perDeviceNodeSelection`, and then
each of its devices one of `nodeName`, `nodeSelector` (any number of terms) or `allNodes`; the API
server refuses anything else. An allocation admits the nodes its devices all reach, as the
allocator writes it into the claim's `status.allocation.nodeSelector` (`allocation_reach`).

A device's shape is registered once (`Shapes`): 40,000 identical devices are one shape, which CEL
evaluates once (`checks.dra.cel`). The objects are read here, as the informers keep them whole
(`reading.objects`), because their shapes go into that registry as they are read.
"""

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from gangkeeper.controller.checks.eligibility import affinity_matches
from gangkeeper.controller.model.claims import DeviceKey
from gangkeeper.controller.model.nodes import Node, Taint
from gangkeeper.controller.model.selectors import Requirement, Term, canonical
from gangkeeper.controller.reading.selectors import selector_terms
from gangkeeper.names import PIN_FIELD


@dataclass(frozen=True, slots=True)
class Shape:
    """What decides whether a device matches a request, apart from its name."""

    driver: str
    attributes: tuple[tuple[tuple[str, str], tuple[str, object]], ...]  # ((domain, id), (type, value))
    capacity: tuple[tuple[tuple[str, str], str], ...]  # ((domain, id), quantity as published)
    taints: tuple[Taint, ...]
    refused: str | None  # why the model never chooses such a device


@dataclass(frozen=True, slots=True)
class Device:
    key: DeviceKey
    shape: int  # index in the inventory's shape registry
    slice: str


@dataclass(frozen=True, slots=True)
class Placement:
    """Which nodes reach a slice (or, with per-device node selection, one device): one named node,
    all nodes, or the nodes its selector's terms pick (none when nothing is set)."""

    node: str | None
    all_nodes: bool
    terms: tuple[Term, ...] | None

    def admits(self, node: Node) -> bool:
        if self.node:
            return self.node == node.name
        return self.all_nodes or (self.terms is not None and affinity_matches(self.terms, node))


@dataclass(frozen=True, slots=True)
class Slice:
    name: str
    pool: tuple[str, str]
    generation: int
    count: int  # resourceSliceCount
    placement: Placement | None  # None: per device
    devices: tuple[tuple[Device, Placement | None], ...]


@dataclass(frozen=True, slots=True)
class Pool:
    slices: tuple[Slice, ...]  # the newest generation, by name
    problem: str | None  # incomplete or invalid: no device is taken from it


@dataclass(frozen=True, slots=True)
class NodeDevices:
    devices: tuple[Device, ...]  # in allocator order, from usable pools
    problems: tuple[str, ...]  # pools the node sees but the allocator skips
    shapes: tuple[int, ...] = ()  # the devices' shapes, in order: what a request's candidates depend on

    def __post_init__(self) -> None:
        object.__setattr__(self, "shapes", tuple(device.shape for device in self.devices))


PoolPart = tuple[tuple[str, str], tuple[Device, ...], str | None]  # (pool, devices the node sees, problem)


def node_view(parts: Iterable[PoolPart]) -> NodeDevices:
    parts = tuple(parts)
    problems = tuple(f"resource pool {'/'.join(pool_id)} {problem}" for pool_id, _, problem in parts if problem)
    return NodeDevices(tuple(d for _, devices, problem in parts if not problem for d in devices), problems)


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...]
    extended_resource: str | None
    created: float


class Shapes:
    """Every device shape seen, each numbered once: a device carries its shape's number."""

    __slots__ = ("_ids", "shapes")

    def __init__(self) -> None:
        self._ids: dict[Shape, int] = {}
        self.shapes: list[Shape] = []

    def number(self, driver: str, raw: Mapping) -> int:
        """The number of the shape of a device as its slice writes it (`raw`), registered if new."""
        found = shape(driver, raw)
        number = self._ids.get(found)
        if number is None:
            number = self._ids[found] = len(self.shapes)
            self.shapes.append(found)
        return number


def device_class_from_api(obj: Mapping) -> DeviceClass:
    metadata, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    selectors = tuple((s.get("cel") or {}).get("expression", "") for s in spec.get("selectors") or ())
    created = metadata.get("creationTimestamp")
    return DeviceClass(metadata.get("name", ""), selectors, spec.get("extendedResourceName"),
                       datetime.fromisoformat(created).timestamp() if created else 0.0)


def slice_from_api(obj: Mapping, shapes: Shapes) -> Slice:
    metadata, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    driver, pool = spec.get("driver", ""), spec.get("pool") or {}
    pool_id, name = (driver, pool.get("name", "")), metadata.get("name", "")
    per_device = bool(spec.get("perDeviceNodeSelection"))
    devices = tuple((Device((driver, pool_id[1], raw.get("name", "")), shapes.number(driver, raw), name),
                     placement(raw) if per_device else None)
                    for raw in spec.get("devices") or ())
    return Slice(name, pool_id, int(pool.get("generation") or 0), int(pool.get("resourceSliceCount") or 1),
                 None if per_device else placement(spec), devices)


def pool(slices: Sequence[Slice]) -> Pool:
    """The newest generation of a pool's slices, and why no device is taken from it, if so. A
    device whose own selector has several terms is allocated by the real allocator, which then
    fails to write the allocation's node selector (the API server refuses such a slice selector, not
    such a device's); the model takes nothing from its pool."""
    newest = max(s.generation for s in slices)
    current = tuple(sorted((s for s in slices if s.generation == newest), key=lambda s: s.name))
    problem = None
    if len(current) != current[0].count:
        problem = "is currently being updated"
    names = Counter(device.key[2] for s in current for device, _ in s.devices)
    duplicate = next((name for name, n in names.items() if n > 1), None)
    if duplicate is not None:
        problem = f"is currently invalid (duplicate device name {duplicate})"
    several = next((device for s in current for device, own in s.devices if _terms(s.placement or own) > 1), None)
    if several is not None:
        problem = (f"is not modelled (device {several.key[2]} has a node selector of several terms, "
                   f"which an allocation cannot carry)")
    return Pool(current, problem)


def _terms(reach: Placement | None) -> int:
    return len(reach.terms) if reach is not None and reach.terms is not None else 0


def placement(spec: Mapping) -> Placement:
    return Placement(spec.get("nodeName") or None, bool(spec.get("allNodes")), selector_terms(spec.get("nodeSelector")))


def allocation_reach(placements: Iterable[Placement]) -> tuple[Term, ...] | None:
    """The nodes an allocation of devices placed so admits, as the structured allocator writes its
    node selector (`createNodeSelector`): a device of one node pins it to that node; otherwise the
    requirements of the devices' selectors (one term each) in one term, each once (the same key,
    operator and set of values; in one order here, so that equal selectors are equal); devices on
    all nodes add none. None: every node."""
    expressions: list[Requirement] = []
    fields: list[Requirement] = []
    for reach in placements:
        if reach.node:
            return (Term((), (Requirement(PIN_FIELD, "In", (reach.node,)),)),)
        if reach.terms:
            (term,) = reach.terms  # one term: a slice's selector has one, a device with more is never taken (`pool`)
            expressions += term.match_expressions
            fields += term.match_fields
    if not expressions and not fields:
        return None
    return (Term(canonical(expressions), canonical(fields)),)


def shape(driver: str, raw: Mapping) -> Shape:
    attributes = tuple(sorted((qualified(name, driver), attribute(value))
                              for name, value in (raw.get("attributes") or {}).items()))
    capacity = tuple(sorted((qualified(name, driver), str((value or {}).get("value", "0")))
                            for name, value in (raw.get("capacity") or {}).items()))
    taints = tuple(Taint(t.get("key", ""), t.get("value", ""), t.get("effect", "")) for t in raw.get("taints") or ())
    refused = None
    if raw.get("consumesCounters"):
        refused = "consumes counters (partitionable devices are not modelled)"
    elif raw.get("bindingConditions"):
        refused = "has binding conditions (not modelled)"
    return Shape(driver, attributes, capacity, taints, refused)


def qualified(name: str, driver: str) -> tuple[str, str]:
    domain, slash, ident = name.partition("/")
    return (domain, ident) if slash else (driver, name)


def attribute(value: Mapping) -> tuple[str, object]:
    for kind in ("int", "bool", "string", "version"):
        if kind in value:
            return kind, value[kind]
    return "unknown", None

