"""gangkeeper's promises, checked on every change the emulated API server commits.

One checker for every harness that runs gangkeeper on the emulation: the end-to-end tests
(`tests/e2e`), the controller's end-to-end tests (`tests/controller_e2e`) and the reliability
benchmark (`reliability/chaos.py`). It lives here, beside the API server whose watch events it
reads, because all three build on the emulation and none should import another's harness.

`Checker` is pure: `observe(resource, type, object, now)` takes one watch event (pods, nodes,
Gangs, DeviceClasses and ResourceClaims; anything else is ignored) and the moment it was
committed; `tick(now)` looks at the clock between events (a group can hold GPUs too long without
anything changing); `finish(now)` closes the run.
Violations are collected, never raised, so that one run reports them all; each names its
invariant (`kind`), the objects it is about, their namespaces, and the event and moment it was
found at. `Watch` subscribes a checker to an API server.

A group is the pods sharing namespace and group label (or what `group_of(pod)` names, where an
owner splits the pods of one label into parts that are groups of their own: an LWS started
LeaderReady); its size is what `size_of(pod)` says (by default the declared min count, else the
emulated run's world size; unknown: the checks that need it are skipped): its minimum, the gang
admitted whole, which members beyond it (elastic ones, an owner's pods beyond its min count)
follow. A member is *placed* when it is bound or holds a reservation, *live* until it has
finished, *released* once it no longer carries gangkeeper's scheduling gate. A member holds a
reservation by its reservation annotation, or by the entry for its uid in a Gang's
`status.reservations`, or, once released from such a reservation, by its pin to that node
(`metadata.name In [node]`), for as long as it stays pinned there: the controller books a
released member by its pin (docs/design.md, "Release, binding and rollback"), so a Gang deleted
while its members are released takes no reservation back (the garbage collector deletes an
owner's Gang and pods in no set order: a RayJob's cluster deleted when the RayJob is suspended
or has finished). A pin the member was not released on from a reservation books nothing. A watch
event is checked once it is applied whole: a Gang's write books or frees many members at once,
and none of them is judged with the rest half applied. The invariants:

- **over-commit**: on every node, for every resource it declares (its pod slots too) and every
  accelerator, what live pods bound to it request plus what live members reserved on it but not
  yet bound request never exceeds its allocatable (DESIGN.md, "Capacity": the scheduler's count
  and gangkeeper's reservations together). Room held for a preemptor is the one exception: while
  members reserved there are still gated, pods bound or reserved there of lower priority than the
  highest of them are not counted (they are the victims on their way out, a group reserved but
  not bound yet as much as one running): those being deleted for as long as they take, the
  others (a suspended owner's pods its operator has not deleted yet) for at most the bind
  timeout and the reaction time since the room was first held; once no member reserved there is
  gated any more, everything is, but for gangkeeper's own placeholders (docs/autoscaling.md):
  pause pods at a negative priority that hold room for members and that any member preempts, so
  that one the scheduler binds into room reserved for a member of higher priority, released or
  not, is not counted while that member is not bound. A node never registered has nothing to give; one that
  was deleted promises nothing (its pods are on their way out);
  a resource a DeviceClass serves (`extendedResourceName`) where the node does not list it is
  counted in devices instead, below; a pod with ResourceClaims holds accelerators while bound;
- **double-allocation**: no device is allocated to two ResourceClaims at once;
- **partial-bind**: no member is bound while fewer of its group's live members are placed than
  the group's size, or than all of them when there are no more than its size or it is unknown:
  a group is bound only after all of it was reserved;
- **partial-release**: no live member is released while fewer of its group's members than its
  size hold a reservation: the whole group's capacity is booked before the first gate is removed;
- **double-reservation**: no pod is bound to a node other than the one it is reserved on (its
  reservation would be counted on one node and its request on another), and no group has more
  live members holding a reservation (and not being deleted) than its size unless at least its
  size of them were placed at an earlier event: members beyond the minimum are reserved only
  once the gang is admitted (controller/deciding/reconciler.py), never by the write that admits it, which
  books its size and no more;
- **incomplete-holding**: no accelerator is held (a live pod not being deleted, bound to a node
  that was not deleted, requesting an accelerator) by a group that is not fully running (fewer
  of its members Running or Succeeded, and not being deleted, than its size) for longer than the
  bind timeout plus `reaction` (the controller sees a deadline up to one resync late; pass 0 for
  the bare bind timeout), not counting time the controller was down (`controller_down` /
  `controller_up`: nothing decides while a harness has it killed);
- **unchecked**: the checker failed on an event (`Watch`), which could hide a break.

partial-bind and partial-release are promises about a group's placement from scratch. A group
that loses a placed member — the member deleted, by anyone, or the node under it — waits for a
replacement while the rest of it stays bound: the two are not checked for it until none of its
live members is placed any more (its replacements then start a new placement, checked again);
incomplete-holding is the promise that covers it meanwhile.

For tests to assert on, the checker also keeps per group how many live members were placed, of how
many, when its first member was bound (`first_bound`), and the first and last event at which it
held accelerators (`held_during`), and the longest time any group held them while not fully
running (`longest_incomplete_holding`, wall time, downtime included).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction

from gangkeeper import names
from sim.api import APIError, ClusterAPI, WatchEvent
from sim.names import DEVICE_CLASSES, NODES, PODS, RESOURCE_CLAIMS, WORLD_SIZE_ANNOTATION
from sim.placement import pinned_nodes
from sim.reservations import GANGS, Reservations, own_reservation
from sim.resources import accelerators, scheduled_amounts, scheduled_requests

TERMINAL = ("Succeeded", "Failed")
GroupKey = tuple[str, str]  # (namespace, group label)
SHOWN = 10  # objects named in one violation at most


def group_size(pod: Mapping) -> int | None:
    """A group's size as its pods say it: the declared min count, else the emulated run's world size."""
    annotations = pod["metadata"].get("annotations") or {}
    for key in (names.MIN_COUNT_ANNOTATION, WORLD_SIZE_ANNOTATION):
        try:
            return int(annotations[key])
        except (KeyError, ValueError):
            continue
    return None


@dataclass(frozen=True)
class PodState:
    """What the invariants need of a pod."""

    namespace: str
    name: str
    group: str
    size: int | None
    requests: Mapping[str, Fraction]
    holds_accelerator: bool
    node: str
    own_reservation: str  # the pod's reservation annotation
    phase: str
    deleting: bool
    gated: bool
    priority: int = 0
    uid: str = ""
    booked: str = ""  # the node its group's Gang reserves for it (`status.reservations`), for this uid
    pin: str = ""  # the one node its required node affinity names (`metadata.name In [node]`)
    placeholder: bool = False  # gangkeeper's own placeholder pod (`names.CAPACITY_FOR_LABEL`)
    kept: str = ""  # the node it was released on from a reservation, while its pin holds it there

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def reserved(self) -> str:
        return self.own_reservation or self.booked or self.kept

    @property
    def group_key(self) -> GroupKey | None:
        return (self.namespace, self.group) if self.group else None

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL

    @property
    def placed(self) -> bool:
        return bool(self.node or self.reserved)

    @property
    def bound_live(self) -> bool:
        return bool(self.node) and not self.terminal

    @property
    def running(self) -> bool:
        """Counts toward its group running in full: Running or Succeeded, and not being deleted."""
        return self.phase in ("Running", "Succeeded") and not self.deleting


def group_label(pod: Mapping) -> str:
    """The pod's group: its group label ('' for none)."""
    return (pod["metadata"].get("labels") or {}).get(names.GROUP_LABEL, "")


def pin_of(spec: Mapping) -> str:
    """The one node the pod's required node affinity pins it to ('' for none, or several)."""
    pinned = pinned_nodes(spec)
    return next(iter(pinned)) if pinned is not None and len(pinned) == 1 else ""


def kept_reservation(old: PodState | None, new: PodState) -> str:
    """The node a released member stays booked on by its pin: the one it held a reservation on
    when it was released, or since (`old` is what the checker knew of it before this event)."""
    if new.gated or not new.pin:
        return ""
    held = {new.own_reservation, new.booked, old.reserved if old is not None else ""}
    return new.pin if new.pin in held else ""


def pod_state(pod: Mapping, size_of: Callable[[Mapping], int | None] = group_size,
              group_of: Callable[[Mapping], str] = group_label) -> PodState:
    metadata, spec = pod["metadata"], pod.get("spec") or {}
    requests = scheduled_requests(pod)
    return PodState(
        namespace=metadata.get("namespace", ""),
        name=metadata["name"],
        group=group_of(pod),
        size=size_of(pod),
        requests=requests,
        holds_accelerator=any(v > 0 for v in accelerators(requests).values()) or bool(spec.get("resourceClaims")),
        node=spec.get("nodeName") or "",
        own_reservation=own_reservation(pod),
        phase=(pod.get("status") or {}).get("phase", ""),
        deleting=bool(metadata.get("deletionTimestamp")),
        gated=any(gate.get("name") == names.SCHEDULING_GATE for gate in spec.get("schedulingGates") or ()),
        priority=int(spec.get("priority") or 0),
        uid=metadata.get("uid", ""),
        pin=pin_of(spec),
        placeholder=names.CAPACITY_FOR_LABEL in (metadata.get("labels") or {}),
    )


def node_allocatable(node: Mapping) -> dict[str, Fraction]:
    """The node's allocatable, in the whole numbers the scheduler counts (`sim.resources`)."""
    return scheduled_amounts((node.get("status") or {}).get("allocatable") or {})


def _shown(keys) -> str:
    """The first SHOWN keys in order, and how many more there are."""
    keys = sorted(keys)
    more = f" and {len(keys) - SHOWN} more" if len(keys) > SHOWN else ""
    return ", ".join(keys[:SHOWN]) + more


@dataclass(frozen=True)
class Violation:
    kind: str  # over-commit | partial-bind | partial-release | double-reservation | incomplete-holding | unchecked
    message: str
    at: float
    event: int  # how many pod and node events the checker had seen
    namespaces: frozenset[str] = frozenset()  # of the objects involved; none: about every namespace

    def __str__(self) -> str:
        return f"[{self.kind} at event {self.event}, {self.at:.3f}] {self.message}"


@dataclass
class Checker:
    """See the module docstring. `bind_timeout` is the controller's, in the same seconds as `now`."""

    bind_timeout: float
    reaction: float = 0.0
    size_of: Callable[[Mapping], int | None] = group_size
    group_of: Callable[[Mapping], str] = group_label
    pods: dict[str, PodState] = field(default_factory=dict)
    nodes: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    events: int = 0
    first_bound: dict[GroupKey, tuple[int, int]] = field(default_factory=dict)  # (live placed, live members)
    longest_incomplete_holding: float = 0.0
    _by_node: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # node bound or reserved on
    _by_group: dict[GroupKey, set[str]] = field(default_factory=lambda: defaultdict(set))
    _held: dict[GroupKey, list[int]] = field(default_factory=dict)  # [first, last] event it held accelerators at
    _holding: set[GroupKey] = field(default_factory=set)
    _disturbed: set[GroupKey] = field(default_factory=set)  # lost a placed member since it was last unplaced
    _incomplete_since: dict[GroupKey, float] = field(default_factory=dict)
    _reported: set[tuple[str, str]] = field(default_factory=set)  # (kind, subject) reported and still true
    _gone_nodes: set[str] = field(default_factory=set)  # seen deleted (a node never seen is not known gone)
    _down: list[list[float | None]] = field(default_factory=list)  # [went down, came back (None: still down)]
    _extended: set[str] = field(default_factory=set)  # resources DeviceClasses serve (KEP-5004)
    _devices: dict[tuple, str] = field(default_factory=dict)  # device (driver, pool, name) → claim allocated it
    _claimed: dict[str, tuple] = field(default_factory=dict)  # claim → its allocated devices
    _room_since: dict[str, float] = field(default_factory=dict)  # node → since when room is held there for a preemptor
    _admitted: set[GroupKey] = field(default_factory=set)  # its size placed, as of the events before this one
    _reservations: Reservations = field(default_factory=Reservations)  # the Gangs'

    # --- input ------------------------------------------------------------------------------
    def observe(self, resource: str, event_type: str, obj: Mapping, now: float) -> None:
        if resource == NODES:
            self.events += 1
            self._observe_node(obj["metadata"]["name"], event_type, obj, now)
        elif resource == PODS:
            self.events += 1
            self._observe_pod(event_type, obj, now)
        elif resource == DEVICE_CLASSES:
            self._observe_device_class(event_type, obj)
        elif resource == RESOURCE_CLAIMS:
            self.events += 1
            self._observe_claim(event_type, obj, now)
        elif resource == GANGS:
            self._observe_gang(event_type, obj, now)

    def _observe_gang(self, event_type: str, obj: Mapping, now: float) -> None:
        """A Gang's `status.reservations` reserve nodes for its members, as their annotations would."""
        changes = []
        for key in self._reservations.observe(event_type, obj):
            state = self.pods.get(key)
            if state is not None:
                changes.append((key, state, replace(state, booked=self._reservations.booked(key, state.uid))))
        self._put_pods(changes, now)

    def _observe_device_class(self, event_type: str, obj: Mapping) -> None:
        """A resource a DeviceClass serves is counted in devices on nodes whose allocatable does not
        list it (the claims' allocations, checked below), not against allocatable."""
        name = (obj.get("spec") or {}).get("extendedResourceName")
        if name and event_type != "DELETED":
            self._extended.add(name)

    def _observe_claim(self, event_type: str, obj: Mapping, now: float) -> None:
        """No device is allocated to two claims at once."""
        key = f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
        for device in self._claimed.pop(key, ()):
            if self._devices.get(device) == key:
                del self._devices[device]
        if event_type == "DELETED":
            return
        results = (((obj.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or ()
        devices = tuple((r.get("driver"), r.get("pool"), r.get("device")) for r in results if not r.get("adminAccess"))
        self._claimed[key] = devices
        for device in devices:
            other = self._devices.setdefault(device, key)
            self._verdict(other != key, now, "double-allocation", "/".join(device),
                          f"device {'/'.join(device)} is allocated to claims {other} and {key}", ())

    def _observe_node(self, name: str, event_type: str, obj: Mapping, now: float) -> None:
        on_node = [self.pods[key] for key in self._by_node.get(name, ())]
        if event_type == "DELETED":
            self.nodes.pop(name, None)
            self._gone_nodes.add(name)
            self._disturbed |= {pod.group_key for pod in on_node if pod.group_key}
        else:
            self.nodes[name] = node_allocatable(obj)
            self._gone_nodes.discard(name)
        self._check_node(name, now)
        for group in {pod.group_key for pod in on_node} - {None}:
            self._check_group(group, now)  # what its pods hold went with the node, or came back

    def _observe_pod(self, event_type: str, obj: Mapping, now: float) -> None:
        metadata = obj["metadata"]
        key = f"{metadata.get('namespace', '')}/{metadata['name']}"
        old = self.pods.get(key)
        new = None if event_type == "DELETED" else pod_state(obj, self.size_of, self.group_of)
        if new is not None and self._reservations:
            new = replace(new, booked=self._reservations.booked(key, new.uid))
        if new is not None:
            new = replace(new, kept=kept_reservation(old, new))
        self._put_pods([(key, old, new)], now)

    def _put_pods(self, changes: list[tuple[str, PodState | None, PodState | None]], now: float) -> None:
        """Apply one event's changes of pods (key, before, after; None: absent), then check what they touched."""
        for key, old, new in changes:
            self._put_pod(key, old, new)
        for _, _, new in changes:
            if new is not None:
                self._check_pod(new, now)
        states = [state for _, old, new in changes for state in (old, new) if state is not None]
        for node in {state.node or state.reserved for state in states} - {""}:
            self._check_node(node, now)
        for group in {state.group_key for state in states} - {None}:
            self._check_group(group, now)
        for _, old, new in changes:
            if new is not None and new.group_key and new.node and not (old and old.node):
                live = [m for m in (self.pods[k] for k in self._by_group[new.group_key]) if not m.terminal]
                self.first_bound.setdefault(new.group_key, (sum(1 for m in live if m.placed), len(live)))

    def _put_pod(self, key: str, old: PodState | None, new: PodState | None) -> None:
        self.pods.pop(key, None)
        if old is not None:
            self._by_node[old.node or old.reserved].discard(key)
            self._by_group[old.group_key].discard(key)
        if new is not None:
            self.pods[key] = new
            self._by_node[new.node or new.reserved].add(key)
            self._by_group[new.group_key].add(key)
        else:
            self._reported.discard(("double-reservation", key))
        if old is not None and old.placed and old.group_key and (new is None or new.deleting and not old.deleting):
            self._disturbed.add(old.group_key)  # a placed member is going: its group waits for a replacement

    def controller_down(self, now: float) -> None:
        if not self._down or self._down[-1][1] is not None:
            self._down.append([now, None])

    def controller_up(self, now: float) -> None:
        if self._down and self._down[-1][1] is None:
            self._down[-1][1] = now

    def tick(self, now: float) -> None:
        """Between events: a group that has held accelerators incomplete for too long is reported."""
        for group, since in list(self._incomplete_since.items()):
            self._holding_too_long(group, since, now)

    def finish(self, now: float) -> None:
        self.tick(now)

    def unchecked(self, now: float, message: str) -> None:
        """The checker itself failed (`Watch`): reported to every namespace, as it could hide a break."""
        self._violate(now, "unchecked", message, ())

    # --- what a harness reads -----------------------------------------------------------------
    @property
    def held_during(self) -> dict[GroupKey, tuple[int, int]]:
        """Per group, the first and the last event at which it held accelerators."""
        return {group: (first, self.events if group in self._holding else last)
                for group, (first, last) in self._held.items()}

    def violations_in(self, namespace: str) -> list[Violation]:
        """What broke in `namespace`, and any failure of the checker itself."""
        return [v for v in self.violations if namespace in v.namespaces or not v.namespaces]

    def summary(self) -> dict:
        by_kind: dict[str, int] = defaultdict(int)
        for violation in self.violations:
            by_kind[violation.kind] += 1
        return {"events": self.events, "violations": len(self.violations), "by_kind": dict(by_kind),
                "longest_incomplete_holding_s": round(self.longest_incomplete_holding, 2)}

    # --- the checks -------------------------------------------------------------------------
    def _check_pod(self, pod: PodState, now: float) -> None:
        off = bool(pod.node and pod.reserved and pod.node != pod.reserved)
        self._verdict(off, now, "double-reservation", pod.key,
                      f"pod {pod.key} is bound to {pod.node} but reserved on {pod.reserved}", [pod])

    def _check_node(self, node: str, now: float) -> None:
        if node in self._gone_nodes:
            self._reported.discard(("over-commit", node))
            return
        allocatable = self.nodes.get(node, {})
        counted = [p for p in (self.pods[key] for key in self._by_node.get(node, ()))
                   if (p.bound_live if p.node else not p.terminal)]
        over = self._over(counted, allocatable)
        holding = [p for p in counted if not p.node and p.gated]
        if over and holding:  # room held for a preemptor: the pods of lower priority it takes are going
            outranked = max(p.priority for p in holding)
            within = now - self._room_since.setdefault(node, now) <= self.bind_timeout + self.reaction
            over = self._over([p for p in counted if not (p.priority < outranked and (p.deleting or within))],
                              allocatable)
        else:
            self._room_since.pop(node, None)
        arriving = [p.priority for p in counted if not p.node]
        if over and arriving:  # placeholders that a member reserved here preempts
            over = self._over([p for p in counted if not (p.placeholder and p.node and p.priority < max(arriving))],
                              allocatable)
        detail = ", ".join(f"{r} {float(u):g} > {float(a):g}" for r, (u, a) in sorted(over.items()))
        registered = "" if node in self.nodes else " (a node never registered)"
        self._verdict(bool(over), now, "over-commit", node,
                      f"node {node}{registered}: bound + reserved requests exceed allocatable ({detail}): "
                      f"{_shown(p.key for p in counted)}", counted)

    def _over(self, counted: list[PodState], allocatable: Mapping[str, Fraction]) -> dict:
        """Resource → (requested, allocatable) where `counted` ask for more than the node has."""
        used: dict[str, Fraction] = defaultdict(Fraction)
        for pod in counted:
            for resource, amount in pod.requests.items():
                used[resource] += amount
        limited = set(allocatable) | (set(accelerators(used)) - self._extended)
        over = {r: (used[r], allocatable.get(r, Fraction(0))) for r in used
                if r in limited and used[r] > allocatable.get(r, Fraction(0))}
        if "pods" in allocatable and len(counted) > allocatable["pods"]:
            over["pods"] = (Fraction(len(counted)), allocatable["pods"])
        return over

    def _check_group(self, group: GroupKey, now: float) -> None:
        members = [self.pods[key] for key in self._by_group.get(group, ())]
        live = [m for m in members if not m.terminal]
        sizes = {m.size for m in members if m.size}
        size = max(sizes) if sizes else None
        subject = "/".join(group)
        reserved = [m for m in live if m.reserved and not m.deleting]
        beyond = size is not None and len(reserved) > size and group not in self._admitted
        self._verdict(beyond, now, "double-reservation", f"group {subject}",
                      f"group {subject}: {len(reserved)} live members hold a reservation, more than its size "
                      f"{size}, before {size} of them were placed: {_shown(m.key for m in reserved)}", reserved)
        if group not in self._disturbed:
            self._check_placement(group, members, live, size, now)
        self._check_holding(group, members, size, now)
        placed = sum(1 for m in live if m.placed)
        if size is not None and placed >= size:
            self._admitted.add(group)  # members beyond its size may follow from the next event on
        if not placed:
            self._disturbed.discard(group)  # nothing placed any more: the next placement starts afresh
            self._admitted.discard(group)

    def _check_placement(self, group: GroupKey, members: list[PodState], live: list[PodState], size: int | None,
                         now: float) -> None:
        subject = "/".join(group)
        bound = [m for m in live if m.node]
        unplaced = [m for m in live if not m.placed]
        needed = len(live) if size is None else min(size, len(live))
        self._verdict(bool(bound) and len(live) - len(unplaced) < needed, now, "partial-bind", subject,
                      f"group {subject}: {_shown(m.key for m in bound)} bound while "
                      f"{_shown(m.key for m in unplaced)} have neither a node nor a reservation", live)
        released = [m for m in live if not m.gated]
        booked = [m for m in members if m.reserved]
        self._verdict(bool(released) and size is not None and len(booked) < size, now, "partial-release", subject,
                      f"group {subject}: {_shown(m.key for m in released)} released with only {len(booked)} of its "
                      f"{size} members reserved", members)

    def _check_holding(self, group: GroupKey, members: list[PodState], size: int | None, now: float) -> None:
        holding = any(self._holds(m) for m in members)
        if holding:
            self._held.setdefault(group, [self.events, self.events])
            self._holding.add(group)
        elif group in self._holding:
            self._holding.discard(group)
            self._held[group][1] = self.events - 1
        running = sum(1 for m in members if m.running and m.node not in self._gone_nodes)
        if holding and not (size is not None and running >= size):
            since = self._incomplete_since.setdefault(group, now)
            self._holding_too_long(group, since, now)
        else:
            since = self._incomplete_since.pop(group, None)
            if since is not None:
                self.longest_incomplete_holding = max(self.longest_incomplete_holding, now - since)
            self._reported.discard(("incomplete-holding", "/".join(group)))

    def _holds(self, pod: PodState) -> bool:
        """Holds an accelerator: bound, live, not being deleted, on a node that was not deleted."""
        return pod.bound_live and pod.holds_accelerator and not pod.deleting and pod.node not in self._gone_nodes

    def _holding_too_long(self, group: GroupKey, since: float, now: float) -> None:
        held = now - since
        self.longest_incomplete_holding = max(self.longest_incomplete_holding, held)
        down = self._downtime(since, now)
        subject = "/".join(group)
        if held - down > self.bind_timeout + self.reaction and ("incomplete-holding", subject) not in self._reported:
            members = [self.pods[key] for key in self._by_group.get(group, ())]
            self._reported.add(("incomplete-holding", subject))
            self._violate(now, "incomplete-holding",
                          f"group {subject} has held accelerators for {held:.1f} s ({down:.1f} s of it with the "
                          f"controller down) without being fully running (bind timeout {self.bind_timeout:g} s "
                          f"+ reaction {self.reaction:g} s): {_shown(m.key for m in members if self._holds(m))}",
                          members)

    def _downtime(self, since: float, now: float) -> float:
        """Seconds of [since, now] the controller was down."""
        return sum(max(0.0, min(now, end if end is not None else now) - max(since, start))
                   for start, end in self._down)

    def _verdict(self, broken: bool, now: float, kind: str, subject: str, message: str, pods) -> None:
        """Report `kind` about `subject` when it breaks, once until it holds again."""
        if not broken:
            self._reported.discard((kind, subject))
        elif (kind, subject) not in self._reported:
            self._reported.add((kind, subject))
            self._violate(now, kind, message, pods)

    def _violate(self, now: float, kind: str, message: str, pods) -> None:
        self.violations.append(Violation(kind, message, now, self.events, frozenset(p.namespace for p in pods)))


WATCHED = (DEVICE_CLASSES, GANGS, NODES, PODS, RESOURCE_CLAIMS)


def _listed(api: ClusterAPI, resource: str) -> list:
    """What the emulated API server holds of a resource; nothing when it does not serve it."""
    try:
        return api.list(resource)
    except APIError:
        return []


class Watch:
    """A `Checker` subscribed to an emulated API server: the nodes and pods there are now, then every
    change it commits, each at `clock()`. Create it while the cluster is quiet (a change between
    the listing and the subscription would be missed). The API server delivers changes on whichever
    thread commits them and a harness may tick from another: every call holds one lock. A failure
    of the checker is recorded as an `unchecked` violation, never raised into the API server."""

    def __init__(self, api: ClusterAPI, checker: Checker, clock: Callable[[], float] = time.monotonic):
        self.checker, self._clock, self._lock = checker, clock, threading.Lock()
        with self._lock:
            for resource in WATCHED:
                for obj in _listed(api, resource):
                    self._observe(WatchEvent("ADDED", resource, obj))
        self._unsubscribe = api.subscribe(self._delivered)

    def _delivered(self, event: WatchEvent) -> None:
        if event.resource in WATCHED:
            with self._lock:
                self._observe(event)

    def _observe(self, event: WatchEvent) -> None:
        try:
            self.checker.observe(event.resource, event.type, event.object, self._clock())
        except Exception as error:  # noqa: BLE001 - reported as a violation: it could hide a break
            self.checker.unchecked(self._clock(), f"could not check {event.type} {event.resource} "
                                                  f"{event.object.get('metadata', {}).get('name')}: {error!r}")

    def violations(self, namespace: str | None = None) -> list[Violation]:
        """Every violation, or those in `namespace` (and any failure of the checker)."""
        with self._lock:
            return list(self.checker.violations) if namespace is None else self.checker.violations_in(namespace)

    def tick(self) -> None:
        with self._lock:
            self.checker.tick(self._clock())

    def finish(self) -> None:
        with self._lock:
            self.checker.finish(self._clock())

    def controller_down(self) -> None:
        with self._lock:
            self.checker.controller_down(self._clock())

    def controller_up(self) -> None:
        with self._lock:
            self.checker.controller_up(self._clock())

    def close(self) -> None:
        self._unsubscribe()
