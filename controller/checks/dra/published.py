"""What the cluster offers: the DeviceClasses, and the ResourceSlices the drivers publish, as the
allocator sees them from each node.

The allocator walks the node's pools, each pool's slices, each slice's devices in the order the
driver published them: the recordings show gpu-0, gpu-1, … chosen in turn. The real allocator
takes pools and slices in Go map and informer order, which is not fixed; this model takes them
by (driver, pool) and slice name (`checks.dra.allocator` checks every order where it matters).
Only the newest `pool.generation` of a pool counts; a pool whose slices are not all there yet,
or that names a device twice, is skipped. A slice serves one node (`nodeName`), all nodes, the
nodes a selector picks, or, with per-device node selection, each device its own nodes; an
allocation of devices admits the nodes they all reach (`reach`).
"""

from collections.abc import Collection, Iterable, Mapping
from itertools import islice

from gangkeeper.controller.checks.dra.devices import (
    Device,
    DeviceClass,
    NodeDevices,
    Placement,
    Pool,
    PoolPart,
    Shapes,
    Slice,
    allocation_reach,
    device_class_from_api,
    node_view,
    pool,
    slice_from_api,
)
from gangkeeper.controller.model.claims import DeviceKey
from gangkeeper.controller.model.nodes import Node
from gangkeeper.controller.model.selectors import Term
from gangkeeper.names import IMPLICIT_EXTENDED_RESOURCE_PREFIX

_COPIED = ("_classes", "_extended_names", "_slices", "_pool_slices", "_pools", "_local", "_shared_pools",
           "_node_devices")


class Published:
    """DeviceClasses and ResourceSlices, changed one object at a time, and the devices each node sees.

    Copy-on-write: `copy` shares every table with the source; whichever of the two changes a
    table first takes a private copy of it (a shallow one: the values are immutable). The device
    shapes (`shapes`) are knowledge: the copies share them for good.
    """

    __slots__ = ("shapes", *_COPIED, "_pool_nodes", "_device_nodes", "_owned")

    def __init__(self, shapes: Shapes) -> None:
        self.shapes = shapes
        self._classes: dict[str, DeviceClass] = {}
        self._extended_names: dict[str, str] = {}  # extended resource → device class
        self._slices: dict[str, Slice] = {}
        self._pool_slices: dict[tuple[str, str], frozenset[str]] = {}
        self._pools: dict[tuple[str, str], Pool] = {}
        self._local: dict[str, frozenset[tuple[str, str]]] = {}  # node → pools only for named nodes
        self._shared_pools: frozenset[tuple[str, str]] = frozenset()
        self._node_devices: dict[str, tuple[tuple[PoolPart, ...], NodeDevices]] = {}  # node-name pools only
        self._pool_nodes: dict[tuple[str, str], frozenset[str]] | None = None  # derived from `_local`
        self._device_nodes: frozenset[str] | None = None  # derived from `_local`
        self._owned: set[str] = set(_COPIED)

    # --- objects from the API -----------------------------------------------------------------

    def put_device_class(self, obj: Mapping) -> None:
        cls = device_class_from_api(obj)
        self._own("_classes")[cls.name] = cls
        self._resolve_extended_names()

    def remove_device_class(self, name: str) -> bool:
        """Whether there was such a class."""
        if name not in self._classes:
            return False
        del self._own("_classes")[name]
        self._resolve_extended_names()
        return True

    def put_slice(self, obj: Mapping) -> None:
        parsed = slice_from_api(obj, self.shapes)
        old = self._slices.get(parsed.name)
        self._own("_slices")[parsed.name] = parsed
        if old is not None and old.pool != parsed.pool:
            self._repool(old.pool, old, None)
        self._repool(parsed.pool, old if old is not None and old.pool == parsed.pool else None, parsed)

    def remove_slice(self, name: str) -> bool:
        """Whether there was such a slice."""
        old = self._slices.get(name)
        if old is None:
            return False
        del self._own("_slices")[name]
        self._repool(old.pool, old, None)
        return True

    # --- reading -------------------------------------------------------------------------------

    @property
    def classes(self) -> Mapping[str, DeviceClass]:
        """The DeviceClasses by name (read only)."""
        return self._classes

    @property
    def extended_names(self) -> Mapping[str, str]:
        """Extended resource → the DeviceClass serving it: explicit names go to the newest class
        (then the first by name); implicit ones (`deviceclass.resource.kubernetes.io/<class>`) always map."""
        return self._extended_names

    def devices(self, node: Node) -> NodeDevices:
        """The devices the node sees, in allocator order, and the pools the allocator skips."""
        local = self._node_devices.get(node.name)
        if local is None:
            parts = tuple(self._pool_part(pool_id, node) for pool_id in sorted(self._local.get(node.name, ())))
            local = self._own("_node_devices")[node.name] = (parts, node_view(parts))
        if not self._shared_pools:
            return local[1]
        shared = tuple(part for part in (self._pool_part(pool_id, node) for pool_id in self._shared_pools) if part[1])
        return node_view(sorted(local[0] + shared, key=lambda part: part[0]))

    def placement(self, device: Device) -> Placement | None:
        """Which nodes reach a device a node sees: its slice's placement, or its own under
        per-device node selection (looked up in its slice alone)."""
        found = self._slices.get(device.slice)
        if found is None or found.placement is not None:
            return None if found is None else found.placement
        return next((own for listed, own in found.devices if listed.key == device.key), None)

    def _placement_of(self, key: DeviceKey) -> Placement | None:
        """Which nodes reach the device of this key: its slice's placement, or its own under
        per-device node selection (None: no such device in its pool's newest slices)."""
        pool_of = self._pools.get((key[0], key[1]))
        slices = pool_of.slices if pool_of is not None else ()
        return next((s.placement or own for s in slices for device, own in s.devices if device.key == key), None)

    def reach(self, keys: Iterable[DeviceKey]) -> tuple[Term, ...] | None:
        """The nodes an allocation of these devices admits, as the allocator writes its node
        selector (`devices.allocation_reach`); None: every node."""
        found = (self._placement_of(key) for key in keys)
        return allocation_reach(placement for placement in found if placement is not None)

    def sees_devices(self, name: str) -> bool:
        """Whether the node has devices of its own (slices naming it)."""
        return name in self._local

    def nodes_of_pool(self, pool_id: tuple[str, str]) -> frozenset[str]:
        """The nodes a pool of slices for named nodes serves (none for a pool serving many nodes)."""
        if self._pool_nodes is None:
            by_pool: dict[tuple[str, str], set[str]] = {}
            for node, pools in self._local.items():
                for pool_id_of in pools:
                    by_pool.setdefault(pool_id_of, set()).add(node)
            self._pool_nodes = {pool_id_of: frozenset(nodes) for pool_id_of, nodes in by_pool.items()}
        return self._pool_nodes.get(pool_id, frozenset())

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

    def copy(self) -> "Published":
        """Independent tables to change (class docstring)."""
        clone = Published.__new__(Published)
        clone.shapes = self.shapes
        for name in _COPIED:
            setattr(clone, name, getattr(self, name))
        self._owned, clone._owned = set(), set()
        clone._pool_nodes, clone._device_nodes = self._pool_nodes, self._device_nodes
        return clone

    # --- bookkeeping -----------------------------------------------------------------------------

    def _own(self, name: str) -> dict:
        """The table `name`, private to this object (copied the first time after a copy)."""
        table = getattr(self, name)
        if name not in self._owned:
            table = table.copy()
            setattr(self, name, table)
            self._owned.add(name)
        return table

    def _resolve_extended_names(self) -> None:
        """Explicit names go to the newest class (then the first by name); implicit ones always map."""
        names: dict[str, str] = {}
        for cls in sorted(self._classes.values(), key=lambda c: (-c.created, c.name)):
            if cls.extended_resource and cls.extended_resource not in names:
                names[cls.extended_resource] = cls.name
        for cls in self._classes.values():
            names[IMPLICIT_EXTENDED_RESOURCE_PREFIX + cls.name] = cls.name
        self._extended_names = names  # a new table: a copy sharing the old one keeps it

    def _repool(self, pool_id: tuple[str, str], old: Slice | None, new: Slice | None) -> None:
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
            pools[pool_id] = pool([self._slices[name] for name in members])
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

    def _pool_part(self, pool_id: tuple[str, str], node: Node) -> PoolPart:
        found = self._pools[pool_id]
        devices = []
        for s in found.slices:
            if s.placement is not None:
                if s.placement.admits(node):
                    devices += [device for device, _ in s.devices]
            else:
                devices += [device for device, placement in s.devices  # then each device has its own
                            if placement is not None and placement.admits(node)]
        return pool_id, tuple(devices), found.problem if devices else None
