"""The cluster as the controller decides on it, kept up to date one object at a time.

The informers report each change of a pod, node or workload; `apply` takes a batch of them and
keeps, incrementally:
  - the capacity ledger (bound pods, reservations), the accelerators reserved and not yet
    bound, and the node pool (rebuilt only when a node really changes, not on heartbeats). A
    reservation is a pod's own (its annotation, or once released its pin) or its Gang's
    (`status.reservations`): the Gang's entries are joined to the pods they name, for that very
    pod (its uid) while it is gated and has none of its own, whichever of the two arrives first;
  - the members of each group, by bucket (namespace, group label): a bucket holds one group,
    or several (an InOrder JobSet has one per replicated job, lone accelerator pods one each);
  - which buckets changed since the last pass (dirty) and which hold a group still under way
    (unsettled: incomplete, queued, reserved, released and not yet bound, or with a problem).
A pass decides on the dirty and unsettled buckets only, so it costs O(groups under way + objects
changed) rather than O(pods). A group whose live members are all bound, or that has finished, is
settled: nothing about it changes with time, so it is decided again only when one of its pods,
or a workload it depends on, changes. A full rebuild happens at start, when leadership is
taken, and on the periodic consistency check (`rebuilt_from`).

`version` moves with every pod, node and device change applied (not with a change that changes
nothing: a heartbeat, a stale watch event), so that a pass can tell that what the planner reads
is as it was at the last pass, and keep the answers it found then (`planned`; `planning.queue`).

Our own writes arrive twice: as the API's answer to the patch (so that the next pass already
sees the reservation) and later from the watch. A pod's facts, and a workload, are replaced only
by newer ones (by resourceVersion), so a watch event older than our write cannot undo it; an
object deleted earlier in the same batch is not brought back by the answer to a write that
preceded the deletion.

Not thread-safe: the controller's loop is the only thread that applies and reads.
"""

import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from msgspec import structs

from gangkeeper.controller.cache.asked import PROVISIONING_REQUESTS, Asked
from gangkeeper.controller.cache.budgets import POD_DISRUPTION_BUDGETS, Budgets
from gangkeeper.controller.cache.capacity import Ledger
from gangkeeper.controller.cache.groups import (
    GANGS,
    GangView,
    Workloads,
    build_groups,
    dependencies,
    dependents,
    settled_phase,
)
from gangkeeper.controller.cache.holders import Candidate, holders
from gangkeeper.controller.cache.occupancy import RESOURCES as OCCUPANCY_RESOURCES
from gangkeeper.controller.cache.occupancy import Occupancy
from gangkeeper.controller.cache.trees import root_of, tree_groups
from gangkeeper.controller.checks.eligibility import NodePool
from gangkeeper.controller.checks.interpod.refusal import SpreadScope
from gangkeeper.controller.model.members import GroupKey, Member
from gangkeeper.controller.model.nodes import Node
from gangkeeper.controller.model.objects import PodFacts, Workload, WorkloadIndex, WorkloadKey
from gangkeeper.controller.reading.informer import uncollected
from gangkeeper.names import DEFAULT_ACCELERATORS
from gangkeeper.resources import accelerators

log = logging.getLogger("gangkeeper.controller.index")

Bucket = tuple[str, str]  # (namespace, group label)
PODS, NODES = "pods", "nodes"
# (resource name, cache key, value or None when gone). The key and the value are the resource's:
# an informer's `namespace/name` or a workload's key, and what the resource's transform made of
# the object (PodFacts, a Node, a Workload, a Budget, a device, claim or volume); `apply` goes by
# the resource's name, so their types are known only there.
Change = tuple[str, Any, Any]


@dataclass(frozen=True)
class Pending:
    """What one pass decides on: `views` (by group key), the groups gone since the last pass,
    the phases of the settled groups not in `views`, and whether `views` holds every group."""

    views: tuple[GangView, ...]
    gone: frozenset[GroupKey]
    settled_phases: Counter
    complete: bool


class ClusterIndex:
    """Pods, nodes and workloads, the ledger and the groups; see the module docstring.

    `namespace`, when set, limits the groups managed to that namespace; capacity always counts
    the pods of every namespace, as the scheduler does.
    """

    def __init__(self, accelerator_patterns: Iterable[str] = DEFAULT_ACCELERATORS, *, namespace: str | None = None):
        self.namespace = namespace
        self.patterns = tuple(accelerator_patterns)
        self.pods: dict[str, PodFacts] = {}
        self.nodes: dict[str, Node] = {}
        self.workloads = Workloads()
        self.ledger = Ledger((), self.patterns)
        self.occupancy = Occupancy()
        self.budgets = Budgets()
        self.asked = Asked()  # what was asked of autoscalers: read by the pass, never by planning
        self.reserved_accelerators = 0
        self._holding: Counter = Counter()  # priority → live pods holding capacity (bound or reserved) at it
        self._pool: NodePool | None = None
        self._buckets: dict[Bucket, dict[str, PodFacts]] = {}
        self._dependents: dict[WorkloadKey, set[Bucket]] = {}
        self._dependencies: dict[Bucket, set[WorkloadKey]] = {}
        self._views: dict[Bucket, tuple[GangView, ...]] = {}
        self._dirty: set[Bucket] = set()
        self._unsettled: set[Bucket] = set()
        self._settled: dict[Bucket, Counter] = {}
        self._settled_phases: Counter = Counter()
        self._gone: set[GroupKey] = set()
        self._deleted: dict[str, str] = {}
        self._deleted_workloads: dict[WorkloadKey, str] = {}
        self._plans: dict[str, dict[WorkloadKey, tuple[str, str]]] = {}  # pod key → Gang → (uid, node)
        self._booked: set[str] = set()  # pods whose reservation is their Gang's
        self._claiming: list[Member] = []  # waiting members with claims seen in this batch of changes
        self.version = 0  # moves with every change to pods, nodes, devices, claims or volumes
        # The last pass's planning (`planning.queue.Planned`), reused while `version` stays: kept here
        # with the state it was made on, for the pass to hand to the next; the index never reads it.
        self.planned: object | None = None

    @classmethod
    def build(cls, pods: Iterable[PodFacts], workloads: WorkloadIndex, nodes: Iterable[Node],
              accelerator_patterns: Iterable[str] = DEFAULT_ACCELERATORS, *, namespace: str | None = None,
              objects: Iterable[Change] = ()) -> "ClusterIndex":
        """An index of whole lists (every bucket dirty): a restart, or a caller without informers.
        `objects` are the devices, claims and volumes (`occupancy.RESOURCES`) and the
        PodDisruptionBudgets (`budgets.POD_DISRUPTION_BUDGETS`, as `budget_from_api` reads them), as changes."""
        index = cls(accelerator_patterns, namespace=namespace)
        index.apply([(NODES, node.name, node) for node in nodes])
        index.apply(objects)
        index.apply([(key[0], key, workload) for key, workload in workloads.items()])
        index.apply([(PODS, f"{facts.member.namespace}/{facts.member.name}", facts) for facts in pods])
        return index

    # --- changes -------------------------------------------------------------------------------

    def apply(self, changes: Iterable[Change]) -> int:
        """Take a batch of changes; one that cannot be applied is logged and skipped. Returns how many failed.

        The garbage collector is held off meanwhile (`informer.uncollected`): the batch after a
        relist is every pod of the cluster, and what it makes lives on."""
        with uncollected():
            return self._apply(changes)

    def _apply(self, changes: Iterable[Change]) -> int:
        with self.ledger.in_one_go():  # the pods of a batch change their nodes' figures once, at its end
            failed, devices_changed = self._apply_each(changes)
        self.occupancy.serve_extended(self.ledger, self.nodes, everywhere=devices_changed)
        if self._claiming:  # their device rooms made now, with the change, rather than in the next pass
            self.occupancy.index_rooms(self._claiming, self.pool)
            self._claiming = []
        self._deleted.clear()
        self._deleted_workloads.clear()
        return failed

    def _apply_each(self, changes: Iterable[Change]) -> tuple[int, bool]:
        """Apply the changes one by one: how many failed, and whether devices changed."""
        failed = 0
        devices_changed = False
        for resource, key, value in changes:
            try:
                if resource == PODS:
                    self.put_pod(key, value)
                elif resource == NODES:
                    self.put_node(key, value)
                elif resource in OCCUPANCY_RESOURCES:
                    self.occupancy.put(resource, key, value)
                    devices_changed = True
                    self.version += 1
                elif resource == POD_DISRUPTION_BUDGETS:
                    self.budgets.put(key, value)
                elif resource == PROVISIONING_REQUESTS:
                    self.asked.put_request(key, value)
                else:
                    self.put_workload(_workload_key(resource, key), value)
            except Exception:
                log.exception("%s %s: change not applied to the index", resource, key)
                failed += 1
        return failed, devices_changed

    def put_pod(self, key: str, facts: PodFacts | None) -> None:
        old = self.pods.get(key)
        if facts is None:
            if old is None:
                return
            self._deleted[key] = old.member.uid
            del self.pods[key]
            self._booked.discard(key)
        elif old is facts or (old is not None and not _newer(facts, old)) or self._deleted.get(key) == facts.member.uid:
            return
        else:
            facts = self._with_plan(key, facts)
            self.pods[key] = facts
            if facts.member.claims and facts.member.waiting:
                self._claiming.append(facts.member)
        self._recount(key, old, facts)

    def _recount(self, key: str, old: PodFacts | None, new: PodFacts | None) -> None:
        self.version += 1
        self._count(old, -1)
        self._count(new, +1)
        self.asked.put_pod(key, old.member if old is not None else None, new.member if new is not None else None)
        self._regroup(key, old, new)

    def put_node(self, name: str, node: Node | None) -> None:
        if self.nodes.get(name) == node:
            return
        if node is None:
            del self.nodes[name]
            self.ledger.remove_node(name)
        else:
            self.nodes[name] = node
            self.ledger.set_node(self.occupancy.capacity(node))
        self.occupancy.put_node(name, node)
        self._pool = None
        self.version += 1

    def put_workload(self, key: WorkloadKey, workload: Workload | None) -> None:
        current = self.workloads.get(key)
        if workload is None:
            if current is None:
                return
            self._deleted_workloads[key] = current.uid
        elif ((current is not None and not _newer_version(workload.uid, workload.resource_version, current.uid,
                                                          current.resource_version))
              or self._deleted_workloads.get(key) == workload.uid):
            return  # as for pods: our write's answer and the watch's older news arrive in either order
        previous = self.workloads.put(key, workload)
        if key[0] == GANGS:
            self._book(key, previous, workload)
        if _declaration(previous) == _declaration(workload):
            return  # a status write (ours, on a Gang) changes no group
        for dependency in {*dependents(key, previous), *dependents(key, workload)}:
            self._dirty |= self._dependents.get(dependency, set())
        for gang in (previous, workload):
            if gang is not None and key[0] == GANGS and (gang.parent or gang.is_parent):
                # A Gang of a tree: what every group of the tree may do changes with it (`cache.trees`).
                self._dirty |= {(gang.namespace, group) for group in tree_groups(gang, self.workloads)}

    def _book(self, gang: WorkloadKey, previous: Workload | None, workload: Workload | None) -> None:
        """Count the reservations a Gang's status holds for its members, and no longer those it dropped."""
        old = previous.reservations if previous is not None else {}
        new = workload.reservations if workload is not None else {}
        if old == new:
            return
        namespace = gang[1]
        for name in old.keys() | new.keys():
            entry = new.get(name)
            if entry == old.get(name):
                continue
            key = f"{namespace}/{name}"
            plans = self._plans.setdefault(key, {})
            if entry is not None:
                plans[gang] = entry
            else:
                plans.pop(gang, None)
                if not plans:
                    del self._plans[key]
            facts = self.pods.get(key)
            if facts is not None:
                booked = self._with_plan(key, self._own(key, facts))
                if booked != facts:
                    self.pods[key] = booked
                    self._recount(key, facts, booked)

    def _with_plan(self, key: str, facts: PodFacts) -> PodFacts:
        """The pod's facts with the node its Gang reserves for it: only for this very pod (its uid),
        gated, and with no reservation, pin or node of its own. Should two Gangs name it (its group
        moved to a Gang a user declared later), the first by name counts, however they arrived."""
        member = facts.member
        plans = self._plans.get(key)
        node = None
        if plans and member.gated and member.reserved_node is None and member.node is None:
            node = next((node for _, (uid, node) in sorted(plans.items()) if uid == member.uid), None)
        if node is None:
            self._booked.discard(key)
            return facts
        self._booked.add(key)
        return structs.replace(facts, member=structs.replace(member, reserved_node=node))

    def _own(self, key: str, facts: PodFacts) -> PodFacts:
        """The pod's facts as read from the pod, without the reservation its Gang holds."""
        if key not in self._booked:
            return facts
        return structs.replace(facts, member=structs.replace(facts.member, reserved_node=None))

    def touch_all(self) -> None:
        """Decide on every group at the next pass (a new leadership term, a consistency check)."""
        self._dirty |= self._buckets.keys()

    # --- reading -------------------------------------------------------------------------------

    @property
    def pool(self) -> NodePool:
        if self._pool is None:
            self._pool = NodePool(self.nodes.values())
            self.occupancy.scope = SpreadScope(self._pool.nodes.values())
        return self._pool

    def preemption_candidates(self, below: int | None = None) -> list[Candidate]:
        """The work a group may preempt (`planning.preemption`, from `cache.holders`): every group whose members hold
        capacity, and every lone pod bound, with the budgets selecting it; only those of a priority
        below `below` when given. O(groups + pods), asked when a group does not fit, and O(1) when
        nothing holds capacity below `below` (a cluster of one priority)."""
        if below is not None and not any(count > 0 and priority < below for priority, count in self._holding.items()):
            return []
        groups = [view.group for views in self._views.values() for view in views]
        lone = [facts.member for facts in self.pods.values()
                if facts.group is None and (below is None or facts.member.priority < below)]
        found = holders(groups, lone, self.ledger, self.budgets, self._trees())
        return found if below is None else [c for c in found if c.priority < below]

    def _trees(self) -> dict[GroupKey, str]:
        """The root parent Gang of each group that is a child in a tree (`cache.trees`)."""
        found = {}
        for views in self._views.values():
            for view in views:
                parent = self.workloads.gang(view.group.key[0], view.parent) if view.parent else None
                if parent is not None:
                    found[view.group.key] = root_of(parent, self.workloads).name
        return found

    def views_in(self, namespace: str, label: str) -> tuple[GangView, ...]:
        """The views of the group label's bucket as last grouped (the children of a tree: `cache.trees`)."""
        return self._views.get((namespace, label), ())

    def view(self, key: GroupKey) -> GangView | None:
        """The group's view as last grouped, decided this pass or not."""
        return next((view for views in self._views.values() for view in views if view.group.key == key), None)

    def pending(self, first_seen: Mapping[GroupKey, float], now: float) -> Pending:
        """The groups one pass must decide on: those of changed buckets (regrouped now) and those
        still under way. Regrouping is remembered, so this is the one call that moves the index on."""
        dirty, self._dirty = self._dirty, set()
        complete = dirty >= self._buckets.keys()
        settled_elsewhere = self._settled_phases.copy()
        for bucket in dirty:
            settled_elsewhere.subtract(self._regroup_views(bucket, first_seen, now))
        decided = sorted(dirty | self._unsettled)
        views = sorted((view for bucket in decided for view in self._views.get(bucket, ())), key=_by_key)
        gone, self._gone = frozenset(self._gone), set()
        return Pending(tuple(views), gone, +settled_elsewhere, complete)

    def rebuilt_from(self, pods: Iterable[PodFacts], workloads: Iterable[Workload], nodes: Iterable[Node],
                     changes: Sequence[Change] = (), objects: Iterable[Change] = (),
                     assumed: Sequence[Change] = ()) -> tuple["ClusterIndex", list[str]]:
        """A fresh index of the informers' caches, and how this one differs from it (nothing,
        unless an incremental update has a bug). `changes` (queued after the caches were read) go
        to both; our writes that the caches have not seen yet are kept: the pods', and the Gangs
        of `assumed` (the runner's: one this pass created is in no cache yet), unless the caches
        hold a newer version. `objects`: as for `build`."""
        self.apply(changes)
        fresh = ClusterIndex.build(pods, {(w.resource, w.namespace, w.name): w for w in workloads},
                                   nodes, self.patterns, namespace=self.namespace, objects=objects)
        fresh.apply(changes)
        fresh.apply(assumed)
        fresh.apply([(PODS, key, self._own(key, facts)) for key, facts in self.pods.items()
                     if key in fresh.pods and _newer(facts, fresh.pods[key])])
        return fresh, self._differences(fresh)

    def _differences(self, other: "ClusterIndex") -> list[str]:
        found = []
        pods = [key for key in self.pods.keys() | other.pods.keys() if self.pods.get(key) != other.pods.get(key)]
        if pods:
            found.append(f"{len(pods)} pods differ, e.g. {sorted(pods)[:3]}")
        nodes = [name for name in self.nodes.keys() | other.nodes.keys()
                 if dict(self.ledger.free(name)) != dict(other.ledger.free(name))]
        if nodes or self.ledger.counted() != other.ledger.counted():
            found.append(f"ledger differs on {len(nodes)} nodes, e.g. {sorted(nodes)[:3]}")
        if self.reserved_accelerators != other.reserved_accelerators:
            found.append(f"reserved accelerators {self.reserved_accelerators} ≠ {other.reserved_accelerators}")
        buckets = {b: set(m) for b, m in self._buckets.items()} != {b: set(m) for b, m in other._buckets.items()}
        if buckets:
            found.append("group membership differs")
        return found

    # --- bookkeeping ---------------------------------------------------------------------------

    def _count(self, facts: PodFacts | None, sign: int) -> None:
        """Add (+1) or take away (−1) what a pod holds: capacity in the ledger, reserved accelerators."""
        if facts is None:
            return
        member = facts.member
        if not member.terminal and (member.node or member.reserved_node):
            self._holding[member.priority] += sign
        if sign < 0:
            self.ledger.forget(member.uid)
            self.occupancy.uncount(member.uid)
        elif not member.terminal and member.node:
            self.ledger.bind(member.uid, member.node, member.requests)
            self.occupancy.count(member, self.nodes)
        elif not member.terminal and member.reserved_node:
            self.ledger.reserve(member.uid, member.reserved_node, member.requests)
            self.occupancy.count(member, self.nodes)
        if not member.terminal and member.reserved_node and not member.node:
            self.reserved_accelerators += sign * int(sum(accelerators(member.requests, self.patterns).values()))

    def _regroup(self, key: str, old: PodFacts | None, new: PodFacts | None) -> None:
        before, after = self._bucket_of(old), self._bucket_of(new)
        if before is not None:
            members = self._buckets[before]
            del members[key]
            self._dirty.add(before)
            if not members:
                self._forget_bucket(before)
        if after is not None and new is not None:
            self._buckets.setdefault(after, {})[key] = new
            self._dirty.add(after)
            for dependency in dependencies(new):
                self._dependents.setdefault(dependency, set()).add(after)
                self._dependencies.setdefault(after, set()).add(dependency)

    def _forget_bucket(self, bucket: Bucket) -> None:
        del self._buckets[bucket]
        for dependency in self._dependencies.pop(bucket, ()):
            users = self._dependents.get(dependency)
            if users is not None:
                users.discard(bucket)
                if not users:
                    del self._dependents[dependency]

    def _bucket_of(self, facts: PodFacts | None) -> Bucket | None:
        if facts is None or facts.group is None:
            return None
        namespace = facts.member.namespace
        return None if self.namespace is not None and namespace != self.namespace else (namespace, facts.group)

    def _regroup_views(self, bucket: Bucket, first_seen: Mapping[GroupKey, float], now: float) -> Counter:
        """Group a changed bucket again; return the settled phases it counted before."""
        before = self._settled.pop(bucket, Counter())
        self._settled_phases.subtract(before)
        old = self._views.pop(bucket, ())
        self._unsettled.discard(bucket)
        members = self._buckets.get(bucket)
        views: tuple[GangView, ...] = ()
        if members:
            try:
                views = tuple(build_groups(members.values(), self.workloads, first_seen, now))
            except Exception:  # one bad group never stops the pass: it is grouped again when it changes
                log.exception("%s/%s: cannot be grouped; left out until its pods change", *bucket)
        self._gone |= {view.group.key for view in old} - {view.group.key for view in views}
        if views:
            self._views[bucket] = views
            phases = [settled_phase(view) for view in views]
            if all(phases):
                self._settled[bucket] = Counter(phases)
                self._settled_phases.update(phases)
            else:
                self._unsettled.add(bucket)
        return before


def _newer(facts: PodFacts, than: PodFacts) -> bool:
    """Whether `facts` may replace `than`: another pod of that name, or a later version of the same.

    resourceVersions are opaque in general; kube-apiserver (etcd revisions) and the emulation use
    increasing integers, and anything else is taken as newer.
    """
    return _newer_version(facts.member.uid, facts.resource_version, than.member.uid, than.resource_version)


def supersedes(cached: Workload, assumed: Workload) -> bool:
    """Whether a cache's `cached` stands for `assumed`, the answer to one of our writes: the same
    version, a later one, or another object under the name."""
    return cached.resource_version == assumed.resource_version or _newer_version(
        cached.uid, cached.resource_version, assumed.uid, assumed.resource_version)


def _newer_version(uid: str, new: str, than_uid: str, old: str) -> bool:
    if uid != than_uid:
        return True
    return not (new.isdigit() and old.isdigit()) or int(new) > int(old)


def _declaration(workload: Workload | None) -> Workload | None:
    """What a workload says about groups: everything but a Gang's status (its reservations are
    counted on the members they book) and the object's version."""
    return None if workload is None else replace(workload, status=None, reservations={}, resource_version="")


def _workload_key(resource: str, key: str | WorkloadKey) -> WorkloadKey:
    """(resource, namespace, name) from an informer's `namespace/name` key (or a ready-made key)."""
    if isinstance(key, tuple):
        return key
    namespace, _, name = key.rpartition("/")
    return resource, namespace, name


def _by_key(view: GangView) -> GroupKey:
    return view.group.key
