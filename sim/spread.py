"""Topology spread constraints, as the kube-scheduler's PodTopologySpread plugin decides.

DoNotSchedule constraints filter: on a node, `matching pods in its domain + 1 if the pod matches
its own selector - the fewest matching pods in any domain` must not exceed `maxSkew` (the fewest
is 0 while there are fewer domains than `minDomains`). Only nodes that pass the pod's node
affinity and nodeSelector count as domains (`nodeAffinityPolicy: Honor`, the default; `Ignore`
counts every node), and with `nodeTaintsPolicy: Honor` only nodes whose taints it tolerates
(the default, `Ignore`, counts tainted nodes too). A pod pinned to one node by required node
affinity therefore sees one domain and always passes: the check is vacuous for gangkeeper's pins.

ScheduleAnyway constraints score the feasible nodes: fewer matching pods in a node's domain is
better, weighted by the log of the number of domains, normalized to 0-100 as the plugin does.
Matching pods are those in the pod's namespace, not being deleted, selected by the constraint's
label selector merged with `matchLabelKeys`. The system default constraints (for pods of
Services and ReplicaSets) are not modelled.
"""

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sim.interpod import LabelSelector, PlacedPod
from sim.names import HOSTNAME_LABEL
from sim.placement import MAX_NODE_SCORE, NodeFacts, matches_node_affinity, tolerates

REASON_SKEW = "node(s) didn't match pod topology spread constraints"
REASON_MISSING_LABEL = f"{REASON_SKEW} (missing required label)"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
FILTERED_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class Constraint:
    topology_key: str
    max_skew: int
    min_domains: int
    selector: LabelSelector
    honor_affinity: bool
    honor_taints: bool


def constraints(pod: Mapping, when: str) -> tuple[Constraint, ...]:
    """The pod's constraints of one kind, with `matchLabelKeys` merged into the selector."""
    labels = pod["metadata"].get("labels") or {}
    found = []
    for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or ():
        if c.get("whenUnsatisfiable", DO_NOT_SCHEDULE) != when:
            continue
        selector = c.get("labelSelector")
        merged = {key: labels[key] for key in c.get("matchLabelKeys") or () if key in labels}
        if merged and selector is not None:
            selector = dict(selector, matchLabels={**(selector.get("matchLabels") or {}), **merged})
        found.append(Constraint(c.get("topologyKey", ""), int(c.get("maxSkew", 1)), int(c.get("minDomains") or 1),
                                LabelSelector.parse(selector), c.get("nodeAffinityPolicy", HONOR) == HONOR,
                                c.get("nodeTaintsPolicy") == HONOR))
    return tuple(found)


def counted(constraint: Constraint, pod: Mapping, node: NodeFacts) -> bool:
    """Whether a node counts as a domain of the constraint (its node inclusion policies)."""
    spec = pod.get("spec") or {}
    if constraint.honor_affinity and not matches_node_affinity(spec, node):
        return False
    if constraint.honor_taints:
        untolerated = [t for t in node.taints if t.get("effect") in FILTERED_EFFECTS
                       and not tolerates(spec.get("tolerations") or (), t)]
        if untolerated:
            return False
    return True


def matching(constraint: Constraint, namespace: str, pods: Iterable[PlacedPod]) -> int:
    return sum(1 for p in pods if p.namespace == namespace and not p.deleting and constraint.selector.matches(p.labels))


def has_keys(node: NodeFacts, of: Iterable[Constraint]) -> bool:
    return all(c.topology_key in node.labels for c in of)


@dataclass(frozen=True)
class SpreadFilter:
    constraints: tuple[Constraint, ...]
    counts: tuple[Counter, ...]  # per constraint: topology value -> matching pods
    self_match: tuple[bool, ...]

    def reason(self, node: NodeFacts) -> str | None:
        if not has_keys(node, self.constraints):
            return REASON_MISSING_LABEL
        for constraint, counts, own in zip(self.constraints, self.counts, self.self_match):
            fewest = min(counts.values()) if len(counts) >= constraint.min_domains else 0
            skew = counts[node.labels[constraint.topology_key]] + own - fewest
            if skew > constraint.max_skew:
                return REASON_SKEW
        return None


def spread_filter(pod: Mapping, nodes: Iterable[NodeFacts],
                  pods_on: Mapping[str, Iterable[PlacedPod]]) -> SpreadFilter | None:
    """PreFilter: the matching pods per domain over every node that counts; None without DoNotSchedule constraints."""
    hard = constraints(pod, DO_NOT_SCHEDULE)
    if not hard:
        return None
    namespace = pod["metadata"].get("namespace", "")
    counts = tuple(Counter() for _ in hard)
    for node in nodes:
        if not has_keys(node, hard):
            continue
        for constraint, by_value in zip(hard, counts):
            if counted(constraint, pod, node):
                by_value[node.labels[constraint.topology_key]] += matching(constraint, namespace,
                                                                           pods_on.get(node.name, ()))
    labels = pod["metadata"].get("labels") or {}
    return SpreadFilter(hard, counts, tuple(c.selector.matches(labels) for c in hard))


def spread_scores(pod: Mapping, feasible: list[NodeFacts], nodes: Iterable[NodeFacts],
                  pods_on: Mapping[str, Iterable[PlacedPod]]) -> dict[str, int] | None:
    """PreScore, Score and NormalizeScore for ScheduleAnyway constraints; None without any."""
    soft = constraints(pod, SCHEDULE_ANYWAY)
    if not soft or not feasible:
        return None
    namespace = pod["metadata"].get("namespace", "")
    ignored = {n.name for n in feasible if not has_keys(n, soft)}
    scored = [n for n in feasible if n.name not in ignored]
    weights = []
    domain_counts: list[Counter] = []
    for constraint in soft:
        values = {n.labels[constraint.topology_key] for n in scored}
        size = len(scored) if constraint.topology_key == HOSTNAME_LABEL else len(values)
        weights.append(math.log(size + 2))
        domain_counts.append(Counter({value: 0 for value in values}))
    for node in nodes:
        if not has_keys(node, soft):
            continue
        for constraint, by_value in zip(soft, domain_counts):
            value = node.labels[constraint.topology_key]
            if constraint.topology_key != HOSTNAME_LABEL and value in by_value and counted(constraint, pod, node):
                by_value[value] += matching(constraint, namespace, pods_on.get(node.name, ()))
    raw = {}
    for node in scored:
        total = 0.0
        for constraint, by_value, weight in zip(soft, domain_counts, weights):
            if constraint.topology_key == HOSTNAME_LABEL:
                count = matching(constraint, namespace, pods_on.get(node.name, ()))
            else:
                count = by_value[node.labels[constraint.topology_key]]
            total += count * weight + (constraint.max_skew - 1)
        raw[node.name] = math.floor(total + 0.5)  # Go's math.Round; round() would go to the even neighbour
    return normalized(raw, ignored)


def normalized(raw: Mapping[str, int], ignored: Iterable[str]) -> dict[str, int]:
    """Fewer matching pods score higher; nodes without the topology labels score 0."""
    highest = max(raw.values(), default=0)
    lowest = min(raw.values(), default=0)
    scores = {name: 0 for name in ignored}
    for name, value in raw.items():
        scores[name] = MAX_NODE_SCORE if highest == 0 else MAX_NODE_SCORE * (highest + lowest - value) // highest
    return scores
