"""Required inter-pod affinity and anti-affinity, as the kube-scheduler's InterPodAffinity filter decides.

Three checks, in the plugin's order, each against the pods already placed (bound or assumed):
- the incoming pod's affinity: every term needs a placed pod in the node's domain (topology key
  value) that matches all terms; when no placed pod anywhere matches and the pod matches its own
  terms, the first pod of such a series may go anywhere that has the topology labels;
- the incoming pod's anti-affinity: no placed pod matching a term in the node's domain;
- the placed pods' anti-affinity: no placed pod in the node's domain whose term matches the
  incoming pod.

A term selects pods by label selector within its namespaces (`namespaces`, or
`namespaceSelector` over namespace labels; neither means the namespace of the pod that has the
term). Preferred (soft) terms, and `matchLabelKeys`/`mismatchLabelKeys`, are not modelled.
"""

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from sim.placement import NodeFacts, requirement_matches

REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

NamespaceLabels = Callable[[str], Mapping[str, str]]


@dataclass(frozen=True)
class LabelSelector:
    """A metav1.LabelSelector: a missing selector selects nothing, an empty one everything."""

    match_labels: tuple[tuple[str, str], ...]
    match_expressions: tuple[Mapping, ...]
    selects_nothing: bool = False

    @classmethod
    def parse(cls, selector: Mapping | None) -> "LabelSelector":
        if selector is None:
            return cls((), (), True)
        return cls(tuple(sorted((selector.get("matchLabels") or {}).items())),
                   tuple(selector.get("matchExpressions") or ()))

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.selects_nothing:
            return False
        return (all(labels.get(key) == value for key, value in self.match_labels)
                and all(requirement_matches(e, labels) for e in self.match_expressions))

    def keys(self) -> frozenset[str]:
        return frozenset([key for key, _ in self.match_labels] + [e.get("key", "") for e in self.match_expressions])


@dataclass(frozen=True)
class Term:
    """One required pod (anti-)affinity term, with the namespace of the pod it belongs to."""

    topology_key: str
    selector: LabelSelector
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None
    own_namespace: str

    @classmethod
    def parse(cls, term: Mapping, own_namespace: str) -> "Term":
        raw = term.get("namespaceSelector")
        return cls(term.get("topologyKey", ""), LabelSelector.parse(term.get("labelSelector")),
                   frozenset(term.get("namespaces") or ()), None if raw is None else LabelSelector.parse(raw),
                   own_namespace)

    def selects_namespace(self, namespace: str, namespace_labels: NamespaceLabels) -> bool:
        if namespace in self.namespaces:
            return True
        if self.namespace_selector is not None:
            return self.namespace_selector.matches(namespace_labels(namespace))
        return not self.namespaces and namespace == self.own_namespace

    def matches(self, namespace: str, labels: Mapping[str, str], namespace_labels: NamespaceLabels) -> bool:
        return self.selects_namespace(namespace, namespace_labels) and self.selector.matches(labels)


def required_terms(pod: Mapping, kind: str) -> tuple[Term, ...]:
    """The pod's required `podAffinity` or `podAntiAffinity` terms."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    namespace = pod["metadata"].get("namespace", "")
    return tuple(Term.parse(t, namespace) for t in affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or ())


@dataclass(frozen=True)
class PlacedPod:
    """What the filters read of a pod already bound or assumed on a node."""

    node: str
    namespace: str
    labels: Mapping[str, str]
    deleting: bool
    anti_affinity: tuple[Term, ...]


def placed_pod(pod: Mapping, node: str) -> PlacedPod:
    meta = pod["metadata"]
    return PlacedPod(node, meta.get("namespace", ""), dict(meta.get("labels") or {}),
                     bool(meta.get("deletionTimestamp")), required_terms(pod, "podAntiAffinity"))


@dataclass(frozen=True)
class AffinityFilter:
    """The counts InterPodAffinity's PreFilter takes for one pod, by (topology key, value)."""

    affinity: tuple[Term, ...]
    anti_affinity: tuple[Term, ...]
    affinity_counts: Counter
    anti_affinity_counts: Counter
    existing_anti_affinity_counts: Counter
    matches_own_affinity: bool

    def reason(self, node: NodeFacts) -> str | None:
        if not self._affinity_satisfied(node):
            return REASON_AFFINITY
        if any(self.anti_affinity_counts[(t.topology_key, node.labels[t.topology_key])] > 0
               for t in self.anti_affinity if t.topology_key in node.labels):
            return REASON_ANTI_AFFINITY
        if any(count > 0 and node.labels.get(key) == value
               for (key, value), count in self.existing_anti_affinity_counts.items()):
            return REASON_EXISTING_ANTI_AFFINITY
        return None

    def _affinity_satisfied(self, node: NodeFacts) -> bool:
        found = True
        for term in self.affinity:
            if term.topology_key not in node.labels:
                return False
            if self.affinity_counts[(term.topology_key, node.labels[term.topology_key])] <= 0:
                found = False
        return found or (not self.affinity_counts and self.matches_own_affinity)


def affinity_filter(pod: Mapping, nodes: Mapping[str, NodeFacts], placed: Iterable[PlacedPod],
                    with_anti_affinity: Iterable[PlacedPod], namespace_labels: NamespaceLabels) -> AffinityFilter | None:
    """PreFilter: None when there is nothing to check (no terms of its own, no placed pod's
    anti-affinity term selects it)."""
    meta = pod["metadata"]
    namespace, labels = meta.get("namespace", ""), meta.get("labels") or {}
    affinity, anti_affinity = required_terms(pod, "podAffinity"), required_terms(pod, "podAntiAffinity")
    existing: Counter = Counter()
    for other in with_anti_affinity:
        node = nodes.get(other.node)
        for term in other.anti_affinity:
            if node is not None and term.topology_key in node.labels and \
                    term.matches(namespace, labels, namespace_labels):
                existing[(term.topology_key, node.labels[term.topology_key])] += 1
    if not affinity and not anti_affinity and not existing:
        return None
    affinity_counts: Counter = Counter()
    anti_counts: Counter = Counter()
    if affinity or anti_affinity:
        for other in placed:
            node = nodes.get(other.node)
            if node is None:
                continue
            if affinity and all(t.matches(other.namespace, other.labels, namespace_labels) for t in affinity):
                for term in affinity:
                    if term.topology_key in node.labels:
                        affinity_counts[(term.topology_key, node.labels[term.topology_key])] += 1
            for term in anti_affinity:
                if term.topology_key in node.labels and term.matches(other.namespace, other.labels, namespace_labels):
                    anti_counts[(term.topology_key, node.labels[term.topology_key])] += 1
    own = bool(affinity) and all(t.matches(namespace, labels, namespace_labels) for t in affinity)
    return AffinityFilter(affinity, anti_affinity, affinity_counts, anti_counts, existing, own)


def label_keys(terms: Iterable[Term]) -> frozenset[str]:
    """Every label key the terms' selectors read: pods that agree on these are alike to them."""
    keys: set[str] = set()
    for term in terms:
        keys |= term.selector.keys()
    return frozenset(keys)
