"""What decides where a member may go besides free resources (docs/design.md, "Capacity").

Three things the kube-scheduler checks for a pinned pod depend on more than the node's free
figures, and the planner must predict each of them or a released group will not bind:

  - its devices (DRA): `checks.dra.inventory.Inventory`, with the claims and claim templates its
    `spec.resourceClaims` name, and the devices held for members reserved and not yet allocated;
  - the pods around it: required pod affinity and anti-affinity, topology spread and host ports
    (`checks.interpod.placements.Placements`, which counts bound pods and reserved members alike);
  - its volumes: the node affinity of the PersistentVolumes its claims are bound to
    (`checks.volumes`).

The index keeps one `Occupancy` up to date pod by pod and object by object; a pass plans on a
`copy` (the parts planning changes are copy-on-write) and adds each plan's members as it goes.
A member's devices are held from its reservation until its claims are seen allocated: between
the pod's binding and the claim's update arriving they count twice, which errs on the safe side.
"""

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import replace

from gangkeeper.controller.cache.capacity import Ledger
from gangkeeper.controller.checks.dra.demand import device_demand, sharing_key
from gangkeeper.controller.checks.dra.inventory import Inventory
from gangkeeper.controller.checks.eligibility import NodePool
from gangkeeper.controller.checks.interpod.placements import Placements
from gangkeeper.controller.checks.interpod.refusal import SpreadScope, refusal
from gangkeeper.controller.checks.volumes import VolumeLimit, Volumes
from gangkeeper.controller.model.claims import DeviceDemand, Unresolved
from gangkeeper.controller.model.members import ClaimRef, Member
from gangkeeper.controller.model.nodes import Node
from gangkeeper.controller.model.rules import NO_RULES

# The API resources an Occupancy reads, by the names the controller's informers use (`kube.OCCUPANCY`).
DEVICE_CLASSES, RESOURCE_SLICES = "deviceclasses.resource.k8s.io", "resourceslices.resource.k8s.io"
RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES = "resourceclaims.resource.k8s.io", "resourceclaimtemplates.resource.k8s.io"
PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES = "persistentvolumeclaims", "persistentvolumes"
RESOURCES = (DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES,
             PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES)
METADATA_NAME_LABEL = "kubernetes.io/metadata.name"


class Occupancy:
    """Devices, neighbours and volumes; see the module docstring. `scope` gives the nodes a
    spread constraint counts and is replaced by the owner whenever the nodes change."""

    __slots__ = ("devices", "placements", "volumes", "scope", "_templates", "_claims", "_holders", "_namespaces",
                 "_held", "_held_by_key", "_demands")

    def __init__(self) -> None:
        self.devices = Inventory()
        self.placements = Placements({})
        self.volumes = Volumes()
        self.scope = SpreadScope(())
        self._templates: dict[tuple[str, str], Mapping] = {}
        self._claims: dict[tuple[str, str], Mapping] = {}
        self._holders: dict[str, Member] = {}  # members holding devices whose claims are not yet allocated
        self._namespaces: set[str] = set()
        self._held: dict[str, dict[str, Hashable]] = {}  # node → uid → sharing key of each hold on it
        self._held_by_key: dict[Hashable, set[str]] = {}  # sharing key → nodes holding it for someone
        self._demands: dict[tuple, DeviceDemand | Unresolved] = {}  # of template-only members, until templates change

    # --- the cluster's objects -----------------------------------------------------------------

    def put(self, resource: str, key: str, obj: Mapping | None) -> None:
        """One object of `RESOURCES` (`namespace/name` or `name`), None when it is gone."""
        namespace, _, name = key.rpartition("/")
        if resource == DEVICE_CLASSES:
            if obj is None:
                self.devices.remove_device_class(name)
            else:
                self.devices.put_device_class(obj)
        elif resource == RESOURCE_SLICES:
            if obj is None:
                self.devices.remove_slice(name)
            else:
                self.devices.put_slice(obj)
        elif resource == RESOURCE_CLAIMS:
            self._demands = {}
            self._put(self._claims, (namespace, name), obj)
            if obj is None:
                self.devices.remove_claim(namespace, name)
            else:
                self.devices.put_claim(obj)
            self._release_allocated()
        elif resource == RESOURCE_CLAIM_TEMPLATES:
            self._demands = {}
            self._put(self._templates, (namespace, name), obj)
        elif resource == PERSISTENT_VOLUME_CLAIMS:
            self.volumes.put_claim(key, obj)
        elif resource == PERSISTENT_VOLUMES:
            self.volumes.put_volume(name, obj)
        else:
            raise ValueError(f"resource {resource!r} is not one an Occupancy reads; expected one of {RESOURCES}")

    def put_node(self, name: str, node: Node | None) -> None:
        """A node added, changed or gone (None). The owner replaces `scope` before the next plan."""
        self.placements.set_node(name, None if node is None else node.labels)
        self.devices.forget_rooms()

    def capacity(self, node: Node) -> Node:
        """The node as the ledger counts it: its allocatable, plus the extended resources DRA
        serves there and the allocatable does not list (`Inventory.extended_allocatable`)."""
        served = self.devices.extended_allocatable(node)
        return replace(node, allocatable={**node.allocatable, **served}) if served else node

    def serve_extended(self, ledger: Ledger, nodes: Mapping[str, Node], everywhere: bool = False) -> None:
        """Give the ledger the capacity of the nodes where explicit claims or holds took or gave
        back devices since last asked (of every node when `everywhere`: devices, classes or
        claims changed), so that its count of what DRA serves of extended resources stays exact."""
        changed = self.devices.explicit_changes()
        for name in (nodes if everywhere else changed):
            node = nodes.get(name)
            if node is not None:
                ledger.set_node(self.capacity(node))

    def count(self, member: Member, nodes: Mapping[str, Node]) -> None:
        """A pod that takes its node's capacity (bound, or reserved on a node): its neighbours see it."""
        where = member.node or member.reserved_node
        if where is None:
            return  # on no node: it takes nothing
        self._see_namespace(member.namespace)
        self.placements.add(member.uid, member.namespace, member.labels, where, member.rules or NO_RULES,
                            bound=member.node is not None)
        node = nodes.get(where)
        if node is None:
            return
        demand = self.demand(member)
        if isinstance(demand, Unresolved) or (member.node is not None and _allocated(demand)):
            return  # a bound pod's allocated claims are in the inventory already
        if self._hold(member.uid, node, demand, member.requests):
            self._holders[member.uid] = member

    def uncount(self, uid: str) -> None:
        self.placements.remove(uid)
        self._forget(uid)
        self._holders.pop(uid, None)

    # --- planning --------------------------------------------------------------------------------

    def copy(self) -> "Occupancy":
        """An occupancy to plan on: devices and placements copy-on-write; the rest planning only reads."""
        clone = Occupancy.__new__(Occupancy)
        clone.devices, clone.placements = self.devices.copy(), self.placements.copy()
        clone.volumes, clone.scope = self.volumes, self.scope
        clone._templates, clone._claims, clone._namespaces = self._templates, self._claims, self._namespaces
        clone._demands = self._demands
        clone._holders = dict(self._holders)
        clone._held = {node: dict(held) for node, held in self._held.items()}
        clone._held_by_key = {key: set(nodes) for key, nodes in self._held_by_key.items()}
        return clone

    def demand(self, member: Member) -> DeviceDemand | Unresolved:
        """The devices the member's claims ask for, as the claims and templates stand now."""
        if not member.claims:
            return ()
        key = (member.namespace, member.claims)
        known = self._demands.get(key)
        if known is not None:
            return known
        pod = {"metadata": {"namespace": member.namespace, "uid": member.uid},
               "spec": {"resourceClaims": [_claim_entry(ref) for ref in member.claims]},
               "status": {"resourceClaimStatuses": [{"name": ref.name, "resourceClaimName": ref.generated}
                                                    for ref in member.claims if ref.generated]}}
        demand = device_demand(pod, self._templates, self._claims)
        if all(ref.template and not ref.generated for ref in member.claims):
            self._demands[key] = demand  # the same for every pod of the namespace naming these templates
        return demand

    def room(self, member: Member, demand: DeviceDemand, pool: NodePool) -> Mapping[int, set[str]] | None:
        """Nodes by how many members with this demand each takes (`Inventory.room`), or None
        when that cannot be indexed (slices shared between nodes, extended resources requested too)."""
        if self.devices.serves_extended(member.requests):
            return None
        return self.devices.room(demand, pool.nodes.values())

    def index_rooms(self, members: Iterable[Member], pool: NodePool) -> None:
        """Make the rooms of these members' demands here, so that every copy planned on shares them.
        Members are told apart by what a room depends on (their claims, and whether they also ask
        for an extended resource devices serve), not by their requests' quantities: thousands of
        members, asked each pass."""
        seen = set()
        for member in members:
            if not member.claims:
                continue
            key = (member.namespace, member.claims, self.devices.serves_extended(member.requests))
            if key not in seen:
                seen.add(key)
                demand = self.demand(member)
                if demand and not isinstance(demand, Unresolved):
                    self.room(member, demand, pool)

    def volume_limit(self, member: Member) -> VolumeLimit:
        return self.volumes.limit(member.namespace, member.volume_claims)

    def neighbours_matter(self, member: Member) -> bool:
        """Whether the pods around it can keep the member off a node: rules of its own, or a
        placed pod's rule that could concern it. When not, only capacity and devices decide."""
        rules = member.rules or NO_RULES
        return not rules.empty or self.placements.concerned(member.namespace, member.labels)

    def refusal(self, member: Member, node: str) -> str | None:
        """Why the pods around it keep the member off the node (the scheduler's words), or None."""
        return refusal(member.rules or NO_RULES, member.namespace, member.labels, node, self.placements,
                       self.scope.nodes_for(member))

    def devices_fit(self, node: Node, demand: DeviceDemand, requests: Mapping) -> bool:
        """Whether one more member with these claims (and requests, for extended resources) gets its
        devices on the node. Members of different demands that may bind in any order are not put
        on one node: first-fit allocation could then fail in an order the plan did not check
        (demands that differ only in their counts do not count as different: `checks.dra.demand.sharing_key`)."""
        demand = self.devices.demand_on(node, demand, requests)
        if not demand:
            return True
        key = sharing_key(demand)
        if any(other != key for other in self._held.get(node.name, {}).values()):
            return False
        return self.devices.fits(node, demand, 1) >= 1

    def mixed_holds(self, demand: DeviceDemand, requests: Mapping, pool: NodePool) -> set[str]:
        """The nodes `devices_fit` refuses a member of this demand because an unbound member of
        another demand holds devices there (found from the holds, not node by node)."""
        mine = sharing_key(self.devices.demand_on(_UNLISTED, demand, requests))  # as on a node whose devices serve it
        blocked: set[str] = set()
        for other, nodes in self._held_by_key.items():
            if other != mine:
                blocked |= nodes
        return blocked

    def place(self, member: Member, node: Node, demand: DeviceDemand | Unresolved) -> None:
        """Count a planned member on the node: its neighbours see it, its devices are held (none
        for claims that cannot be known: as `count`)."""
        self.placements.add(member.uid, member.namespace, member.labels, node.name, member.rules or NO_RULES,
                            bound=False)
        if not isinstance(demand, Unresolved):
            self._hold(member.uid, node, demand, member.requests)

    # --- bookkeeping -----------------------------------------------------------------------------

    def _hold(self, uid: str, node: Node, demand: DeviceDemand, requests: Mapping) -> bool:
        demand = self.devices.demand_on(node, demand, requests)
        if not demand or self.devices.hold(uid, node, demand) is None:
            return False
        key = sharing_key(demand)
        self._held.setdefault(node.name, {})[uid] = key
        self._held_by_key.setdefault(key, set()).add(node.name)
        return True

    def _forget(self, uid: str) -> None:
        node = self.devices.held(uid)
        if node is not None:
            self.devices.forget(uid)
            held = self._held.get(node, {})
            key = held.pop(uid, None)
            if not held:
                self._held.pop(node, None)
            if key is not None and key not in held.values():
                nodes = self._held_by_key.get(key, set())
                nodes.discard(node)
                if not nodes:
                    self._held_by_key.pop(key, None)

    def _see_namespace(self, namespace: str) -> None:
        """Namespace selectors see the label every namespace carries; other namespace labels are not read."""
        if namespace not in self._namespaces:
            self._namespaces.add(namespace)
            self.placements.set_namespace(namespace, {METADATA_NAME_LABEL: namespace})

    def _release_allocated(self) -> None:
        """Drop the holds of bound members whose claims the scheduler has now allocated."""
        for uid, member in list(self._holders.items()):
            if member.node is not None:
                demand = self.demand(member)
                if isinstance(demand, Unresolved) or _allocated(demand):
                    self._forget(uid)
                    del self._holders[uid]

    @staticmethod
    def _put(table: dict, key: tuple[str, str], obj: Mapping | None) -> None:
        if obj is None:
            table.pop(key, None)
        else:
            table[key] = obj


_UNLISTED = Node("", {}, {}, (), False, True)  # a node whose allocatable lists no extended resource


def _allocated(demand: DeviceDemand) -> bool:
    return all(claim.allocation is not None for claim in demand)


def _claim_entry(ref: ClaimRef) -> dict:
    entry = {"name": ref.name}
    if ref.template:
        entry["resourceClaimTemplateName"] = ref.template
    if ref.shared:
        entry["resourceClaimName"] = ref.shared
    return entry
