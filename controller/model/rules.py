"""What of a pod depends on the pods around it (`PodRules`): its required pod affinity and
anti-affinity terms, its topology spread constraints and its host ports, as the kube-scheduler's
InterPodAffinity, PodTopologySpread and NodePorts filters read them (`controller.checks.interpod`
decides them). Most pods have none: `NO_RULES`."""

from collections.abc import Mapping
from dataclasses import dataclass

from gangkeeper.controller.model.selectors import LabelSelector

WILDCARD_IP = "0.0.0.0"  # a host port's IP when it names none: it conflicts with the port on any IP
DEFAULT_PROTOCOL = "TCP"
DO_NOT_SCHEDULE = "DoNotSchedule"
HONOR = "Honor"
IGNORE = "Ignore"

Part = tuple[LabelSelector, frozenset[str], LabelSelector]  # selector, namespaces, namespace selector


@dataclass(frozen=True, slots=True, order=True)
class HostPort:
    """A host port a pod holds on its node: (host IP, protocol, port), as the scheduler's NodePorts reads it."""

    ip: str
    protocol: str
    port: int


@dataclass(frozen=True, slots=True)
class PodTerm:
    """A required (anti-)affinity term, resolved against the pod that carries it.

    `namespaces` are the term's, or the pod's own when the term names none and has no
    namespaceSelector; a namespaceSelector (NOTHING when absent, EVERYTHING when `{}`) is matched
    against the labels of a candidate pod's namespace. `matchLabelKeys` / `mismatchLabelKeys` are
    merged into the selector from the carrier's labels, as the API server does on creation (a
    requirement it already merged is merged again harmlessly).
    """

    selector: LabelSelector
    namespaces: frozenset[str]
    namespace_selector: LabelSelector
    topology_key: str

    def matches(self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str]) -> bool:
        return ((namespace in self.namespaces or self.namespace_selector.matches(namespace_labels))
                and self.selector.matches(labels))

    @property
    def part(self) -> Part:
        return self.selector, self.namespaces, self.namespace_selector


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A topology spread constraint; pods of the carrier's own namespace are counted.

    Defaults as the scheduler applies them: minDomains 1, nodeAffinityPolicy Honor,
    nodeTaintsPolicy Ignore. `matchLabelKeys` are merged into the selector from the carrier's labels.
    """

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE

    @property
    def hard(self) -> bool:
        return self.when_unsatisfiable == DO_NOT_SCHEDULE


@dataclass(frozen=True, slots=True)
class PodRules:
    """What of a pod depends on the pods around it. Most pods have none: `NO_RULES`."""

    affinity: tuple[PodTerm, ...] = ()
    anti_affinity: tuple[PodTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.affinity or self.anti_affinity or self.spread or self.host_ports)

    @property
    def hard_spread(self) -> tuple[SpreadConstraint, ...]:
        return tuple(c for c in self.spread if c.hard)

    @property
    def soft_spread(self) -> tuple[SpreadConstraint, ...]:
        return tuple(c for c in self.spread if not c.hard)


NO_RULES = PodRules()
