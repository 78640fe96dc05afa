"""The promises gangkeeper makes, checked on every change the API server commits.

Pure: `Checker.observe(resource, type, object, now)` takes one watch event (pods and nodes) and the
moment it was committed; `Checker.tick(now)` looks at the clock between events (a group can hold
GPUs too long without anything changing); `finish(now)` closes the run. Violations are collected,
never raised, so that one run reports them all. The checks:

- **over-commit**: on every node, for every resource it declares (and its pod slots), what
  non-terminal pods bound to it request plus what members reserved on it but not yet bound
  request never exceeds its allocatable (DESIGN.md, "Capacity": the scheduler's count and
  gangkeeper's reservations together);
- **incomplete holding**: no accelerator is held (a non-terminal pod not being deleted, bound to
  a node that exists and requesting an accelerator) by a group that is not fully running (fewer
  of its members Running or Succeeded, and not being deleted, than its size) for longer than the
  bind timeout plus `reaction` (the controller decides on time at least every resync period: a
  deadline can pass up to one period before a pass sees it; pass 0 for the bare bind timeout),
  not counting time the controller was down (`controller_down`/`controller_up`: nothing decides
  while the harness has it killed; `longest_incomplete_holding` is wall time, downtime included).
  A member being deleted counts as neither running (it is going) nor holding (its accelerators
  are on their way back: the grace period is the pod's own, and the over-commit check still
  counts it); a pod bound to a node that was deleted neither holds nor runs (the accelerators
  went with the node, and the pod garbage collector removes the pod);
- **double reservation**: no pod is bound to a node other than the one it is reserved on (its
  reservation would be counted on one node and its request on another), and no group has more
  live members holding a reservation than its size (a reservation made twice for one place).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from gangkeeper import names
from gangkeeper.quantity import parse_quantity
from gangkeeper.resources import accelerators, pod_requests

WORLD_SIZE_ANNOTATION = "sim.gangkeeper.io/world-size"  # the emulation's: how many pods a run needs at once
TERMINAL = ("Succeeded", "Failed")


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
class PodFacts:
    group: str
    size: int | None
    requests: Mapping[str, Fraction]
    holds_accelerator: bool
    node: str
    reserved: str
    phase: str
    deleting: bool

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL

    @property
    def bound_live(self) -> bool:
        return bool(self.node) and not self.terminal

    @property
    def running(self) -> bool:
        """Counts toward its group running in full: Running or Succeeded, and not being deleted."""
        return self.phase in ("Running", "Succeeded") and not self.deleting


def pod_facts(pod: Mapping, size_of: Callable[[Mapping], int | None] = group_size) -> PodFacts:
    metadata, spec = pod["metadata"], pod.get("spec") or {}
    requests = pod_requests(pod)
    return PodFacts(
        group=(metadata.get("labels") or {}).get(names.GROUP_LABEL, ""),
        size=size_of(pod),
        requests=requests,
        holds_accelerator=any(v > 0 for v in accelerators(requests).values()),
        node=spec.get("nodeName") or "",
        reserved=(metadata.get("annotations") or {}).get(names.RESERVED_NODE_ANNOTATION, ""),
        phase=(pod.get("status") or {}).get("phase", ""),
        deleting=bool(metadata.get("deletionTimestamp")),
    )


def node_allocatable(node: Mapping) -> dict[str, Fraction]:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return {resource: parse_quantity(str(value)) for resource, value in allocatable.items()}


@dataclass
class Violation:
    at: float
    kind: str  # over-commit | incomplete-holding | double-reservation
    message: str

    def __str__(self) -> str:
        return f"[{self.kind} at {self.at:.3f}] {self.message}"


@dataclass
class Checker:
    """See the module docstring. `bind_timeout` is the controller's, in the same seconds as `now`."""

    bind_timeout: float
    reaction: float = 0.0
    size_of: Callable[[Mapping], int | None] = group_size
    pods: dict[str, PodFacts] = field(default_factory=dict)
    nodes: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    events: int = 0
    _by_node: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    _by_group: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    _incomplete_since: dict[str, float] = field(default_factory=dict)
    _reported_holding: set[str] = field(default_factory=set)
    _overcommitted: set[str] = field(default_factory=set)
    _gone_nodes: set[str] = field(default_factory=set)  # seen deleted (a node never seen is not known gone)
    _down: list[list[float | None]] = field(default_factory=list)  # [went down, came back (None: still down)]
    longest_incomplete_holding: float = 0.0

    # --- input ------------------------------------------------------------------------------
    def observe(self, resource: str, event_type: str, obj: Mapping, now: float) -> None:
        self.events += 1
        name = obj["metadata"]["name"]
        if resource == "nodes":
            if event_type == "DELETED":
                self.nodes.pop(name, None)
                self._gone_nodes.add(name)
            else:
                self.nodes[name] = node_allocatable(obj)
                self._gone_nodes.discard(name)
            self._check_node(name, now)
            for group in {self.pods[key].group for key in self._by_node.get(name, ())} - {""}:
                self._check_group(group, now)  # what its pods hold went with the node, or came back
            return
        if resource != "pods":
            return
        key = f"{obj['metadata'].get('namespace', '')}/{name}"
        old = self.pods.pop(key, None)
        if old is not None:
            self._by_node[old.node or old.reserved].discard(key)
            self._by_group[old.group].discard(key)
        new = None if event_type == "DELETED" else pod_facts(obj, self.size_of)
        if new is not None:
            self.pods[key] = new
            self._by_node[new.node or new.reserved].add(key)
            self._by_group[new.group].add(key)
            if new.node and new.reserved and new.node != new.reserved:
                self._violate(now, "double-reservation",
                              f"pod {key} is bound to {new.node} but reserved on {new.reserved}")
        for node in {f.node or f.reserved for f in (old, new) if f is not None} - {""}:
            self._check_node(node, now)
        for group in {f.group for f in (old, new) if f is not None} - {""}:
            self._check_group(group, now)

    def controller_down(self, now: float) -> None:
        if not self._down or self._down[-1][1] is not None:
            self._down.append([now, None])

    def controller_up(self, now: float) -> None:
        if self._down and self._down[-1][1] is None:
            self._down[-1][1] = now

    def _downtime(self, since: float, now: float) -> float:
        """Seconds of [since, now] the controller was down."""
        return sum(max(0.0, min(now, end if end is not None else now) - max(since, start))
                   for start, end in self._down)

    def tick(self, now: float) -> None:
        """Between events: a group that has held accelerators incomplete for too long is reported."""
        for group, since in list(self._incomplete_since.items()):
            self._holding_too_long(group, since, now)

    def finish(self, now: float) -> None:
        self.tick(now)

    # --- the checks -------------------------------------------------------------------------
    def _check_node(self, node: str, now: float) -> None:
        allocatable = self.nodes.get(node)
        if allocatable is None:
            return  # a node that is gone (or not yet registered) promises nothing
        used: dict[str, Fraction] = defaultdict(Fraction)
        count = 0
        for key in self._by_node.get(node, ()):
            facts = self.pods[key]
            counted = facts.bound_live if facts.node else (bool(facts.reserved) and not facts.terminal)
            if not counted:
                continue
            count += 1
            for resource, amount in facts.requests.items():
                used[resource] += amount
        over = {r: (used[r], allocatable[r]) for r in used if r in allocatable and used[r] > allocatable[r]}
        if "pods" in allocatable and count > allocatable["pods"]:
            over["pods"] = (Fraction(count), allocatable["pods"])
        if over and node not in self._overcommitted:
            self._overcommitted.add(node)
            detail = ", ".join(f"{r} {float(u):g} > {float(a):g}" for r, (u, a) in sorted(over.items()))
            self._violate(now, "over-commit", f"node {node}: bound + reserved requests exceed allocatable ({detail})")
        elif not over:
            self._overcommitted.discard(node)

    def _check_group(self, group: str, now: float) -> None:
        members = [self.pods[k] for k in self._by_group.get(group, ())]
        sizes = {m.size for m in members if m.size}
        size = max(sizes) if sizes else None
        live_reserved = sum(1 for m in members if m.reserved and not m.terminal and not m.deleting)
        if size is not None and live_reserved > size:
            self._violate(now, "double-reservation",
                          f"group {group}: {live_reserved} live members hold a reservation, its size is {size}")
        holding = any(self._holds(m) for m in members)
        running = sum(1 for m in members if m.running and m.node not in self._gone_nodes)
        complete = size is not None and running >= size
        if holding and not complete:
            since = self._incomplete_since.setdefault(group, now)
            self._holding_too_long(group, since, now)
        else:
            since = self._incomplete_since.pop(group, None)
            if since is not None:
                self.longest_incomplete_holding = max(self.longest_incomplete_holding, now - since)
            self._reported_holding.discard(group)

    def _holds(self, facts: PodFacts) -> bool:
        """Holds an accelerator: bound, live, not being deleted, on a node that was not deleted."""
        return (facts.bound_live and facts.holds_accelerator and not facts.deleting
                and facts.node not in self._gone_nodes)

    def _holding_too_long(self, group: str, since: float, now: float) -> None:
        held = now - since
        self.longest_incomplete_holding = max(self.longest_incomplete_holding, held)
        down = self._downtime(since, now)
        if held - down > self.bind_timeout + self.reaction and group not in self._reported_holding:
            self._reported_holding.add(group)
            self._violate(now, "incomplete-holding",
                          f"group {group} has held accelerators for {held:.1f} s ({down:.1f} s of it with the "
                          f"controller down) without being fully running (bind timeout {self.bind_timeout:g} s "
                          f"+ reaction {self.reaction:g} s)")

    def _violate(self, now: float, kind: str, message: str) -> None:
        self.violations.append(Violation(now, kind, message))

    def summary(self) -> dict:
        by_kind: dict[str, int] = defaultdict(int)
        for violation in self.violations:
            by_kind[violation.kind] += 1
        return {"events": self.events, "violations": len(self.violations), "by_kind": dict(by_kind),
                "longest_incomplete_holding_s": round(self.longest_incomplete_holding, 2)}
