"""Where pods would go, as cluster-autoscaler simulates it: on the nodes there are and will be, and
on new nodes of a node group. Pure: the emulated autoscaler (`sim.autoscaler`) feeds it and acts.

cluster-autoscaler runs the scheduler's filters on a snapshot of the cluster. Here a pod fits a
node when the emulated scheduler's filters that read only the pod and the node pass (`sim.placement`:
NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit); pod (anti-)affinity,
topology spread and DRA claims are not simulated, so a pod that needs them is placed as if it did not.

- `Snapshot.place` puts a pod on the first node, in the snapshot's order, where it fits and takes
  that room (TrySchedulePods, ScheduleAnywhere): pending pods, booked requests and requests to
  provision all take their room in one snapshot, in the order the autoscaler asks.
- `estimate` is the binpacking estimator on new nodes of a group's template: the pods that fit an
  empty template node, the largest first (DecreasingPodOrderer: cpu and memory as shares of the
  template's allocatable, summed; GPUs do not count), each on the first new node with room, else on
  a new node while fewer than `room` (SngCapThreshold: no more than the group's max less its target
  size).
- `least_waste` is the least-waste expander (the default): the option whose new nodes leave the
  smallest cpu share plus memory share unrequested (of their capacity upstream, of their allocatable
  here: the emulation's nodes have the same); ties go to the first option (upstream: at random).
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from sim.placement import (
    NO_CHECKS,
    HostPort,
    NodeFacts,
    NodeUsage,
    exact_resources,
    filter_node,
    host_ports,
    static_reasons,
)
from sim.resources import Resources, scheduled_requests

SHARED = ("cpu", "memory")  # what the pod orderer and the least-waste expander weigh


@dataclass(frozen=True)
class Wanted:
    """A pod as the simulation places it: its requests and host ports, read once."""

    key: str
    pod: Mapping = field(repr=False)
    requests: Resources = field(repr=False)
    ports: tuple[HostPort, ...] = ()


def wanted(key: str, pod: Mapping) -> Wanted:
    return Wanted(key, pod, exact_resources(scheduled_requests(pod)), host_ports(pod))


def fits(pod: Wanted, node: NodeFacts, usage: NodeUsage) -> bool:
    return not (static_reasons(pod.pod, node) or filter_node(pod.requests, node, usage, (), pod.ports, NO_CHECKS))


def take(usage: NodeUsage, pod: Wanted, sign: int = 1) -> None:
    """Count the pod on the node, in place (`sign` -1: take it away again)."""
    for name, amount in pod.requests.items():
        usage.requested[name] = usage.requested.get(name, 0) + sign * amount
    for port in pod.ports:
        usage.ports[port] += sign
    usage.pods += sign


class Snapshot:
    """Nodes, what is bound or placed on each, and which pods were placed where."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeFacts] = {}
        self.usage: dict[str, NodeUsage] = {}

    def add(self, node: NodeFacts) -> None:
        self.nodes[node.name] = node
        self.usage[node.name] = NodeUsage()

    def hold(self, node: str, pod: Wanted) -> None:
        """A pod bound to the node (held whether or not it would fit now)."""
        if node in self.usage:
            take(self.usage[node], pod)

    def place(self, pod: Wanted) -> str | None:
        for name, node in self.nodes.items():
            if fits(pod, node, self.usage[name]):
                take(self.usage[name], pod)
                return name
        return None

    def place_all(self, pods: Iterable[Wanted]) -> bool:
        """Place every pod, or none: at the first that fits nowhere, those placed are taken away again."""
        placed: list[tuple[str, Wanted]] = []
        for pod in pods:
            node = self.place(pod)
            if node is None:
                for where, done in placed:
                    take(self.usage[where], done, -1)
                return False
            placed.append((node, pod))
        return True

    def empty(self, node: str) -> bool:
        return self.usage[node].pods == 0


@dataclass(frozen=True)
class Option:
    """How many new nodes of one group would hold which pods."""

    group: str
    template: NodeFacts
    nodes: int
    pods: tuple[Wanted, ...]


def estimate(group: str, pods: Iterable[Wanted], template: NodeFacts, room: int) -> Option:
    empty = NodeUsage()
    fitting = sorted((p for p in pods if fits(p, template, empty)), key=lambda p: -share(p, template))
    nodes: list[NodeUsage] = []
    placed: list[Wanted] = []
    for pod in fitting:
        usage = next((u for u in nodes if fits(pod, template, u)), None)
        if usage is None and len(nodes) < room:
            usage = NodeUsage()
            nodes.append(usage)
        if usage is not None:
            take(usage, pod)
            placed.append(pod)
    return Option(group, template, len(nodes), tuple(placed))


def share(pod: Wanted, template: NodeFacts) -> Fraction:
    return sum((Fraction(pod.requests.get(name, 0)) / template.allocatable[name]
                for name in SHARED if template.allocatable.get(name)), Fraction(0))


def least_waste(options: Sequence[Option]) -> Option | None:
    best: tuple[Fraction, Option] | None = None
    for option in options:
        waste = Fraction(0)
        for name in SHARED:
            available = Fraction(option.template.allocatable.get(name, 0)) * option.nodes
            if available:
                waste += (available - sum(Fraction(p.requests.get(name, 0)) for p in option.pods)) / available
        if best is None or waste < best[0]:
            best = (waste, option)
    return best[1] if best else None

