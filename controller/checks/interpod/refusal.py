"""Where a member may not go because of the pods around it: required inter-pod affinity and
anti-affinity, topology spread and host ports, decided as the kube-scheduler's InterPodAffinity,
PodTopologySpread and NodePorts filters decide them.

`refusal` checks, in the order of the scheduler's default profile, stopping at the first:
  - NodePorts (`ports`): a host port another pod on the node already holds.
  - PodTopologySpread, `DoNotSchedule` constraints: the matching pods of the member's namespace
    in the node's domain, plus the member if it matches, minus the fewest in any domain (0 while
    there are fewer domains than `minDomains`), must not exceed `maxSkew`. A constraint counts
    the pods on `spread_nodes(constraint)` that carry every constrained topology key, and its
    domains are those nodes' values; a node without the key is refused.
  - InterPodAffinity: the member's required affinity (in the node's domain of every term, a pod
    matching *all* the terms; a node without a term's key is refused), its required anti-affinity
    (no pod matching a term in the node's domain of that term), and the required anti-affinity
    of the pods already placed (no placed pod has a term matching the member in the domain of
    that pod's node).

The pin makes one of these vacuous. A released member carries required node affinity on its
node's name, and under `nodeAffinityPolicy: Honor` (the default) the scheduler counts only the
domains of the nodes the pod's node affinity allows — the pinned node's — so a pinned pod always
passes its DoNotSchedule constraints (recorded: a, a, a, b with maxSkew 1 all bind). gangkeeper
therefore enforces them itself, as the scheduler would for the same pod without the pin:
`SpreadScope.nodes_for(member)` of a gated member gives the nodes its own nodeSelector and node
affinity allow (and whose taints it tolerates, under `nodeTaintsPolicy: Honor`); asked for the
pinned pod it gives the pinned node alone, and reproduces the scheduler's answer. ScheduleAnyway
constraints never refuse; `spread_penalty` scores them (lower is better) for ordering nodes.

Members released together bind in whatever order the scheduler takes them, so a plan must pass
in every order, not only in the order the planner placed the members. `Placements` counts
reserved and being-placed members like bound pods, which is what the final state holds;
anti-affinity, spread and host ports only get harder as pods arrive, so a plan whose final state
passes them binds in any order (anti-affinity among members: pairwise distinct domains).
Required affinity is the exception — it needs a matching pod to be there first — and the rule
implemented is:
  1. supported: in the node's domain of every term a *bound* pod matches all the terms; it is
     there whatever binds first;
  2. self-start: no bound pod matches the terms (the scheduler then admits a pod that matches its
     own terms), the member matches its own terms, and every placed pod that matches them lies in
     the node's domain of every term; whichever of them binds first, the rest find it there. So
     when no other pod matches, the members matching their own affinity all land in one domain;
  3. anything else is refused: a member whose affinity only another unbound member satisfies (a
     worker needing its group's parameter server) would be refused if it bound first.
And a pod matching the terms of a self-started member already placed (one no bound pod supports)
must join that member's domain (`BINDING_ORDER_REFUSAL`, gangkeeper's own rule): bound first
elsewhere, it would leave the member with matching pods in the cluster but none in its domain.

Not modelled: preferred (anti-)affinity, which only scores; the scheduler's exclusion of
terminating pods from spread counts (the caller adds what should count); the scheduler's
cluster-level default spread constraints, which apply only to pods without constraints of their
own and only with owners (Services, ReplicaSets) the controller does not read.
"""

from collections.abc import Callable, Collection, Iterable, Mapping

from gangkeeper.controller.checks.eligibility import affinity_matches, untolerated_taint
from gangkeeper.controller.checks.interpod.placements import Placements
from gangkeeper.controller.checks.ports import REFUSAL as PORTS_REFUSAL
from gangkeeper.controller.model.members import Member
from gangkeeper.controller.model.nodes import Node
from gangkeeper.controller.model.rules import HONOR, PodRules, SpreadConstraint

# The scheduler's words (interpodaffinity and podtopologyspread ErrReason…), and one of ours.
AFFINITY_REFUSAL = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_REFUSAL = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_REFUSAL = "node(s) didn't satisfy existing pods anti-affinity rules"
SPREAD_REFUSAL = "node(s) didn't match pod topology spread constraints"
SPREAD_LABEL_REFUSAL = SPREAD_REFUSAL + " (missing required label)"
BINDING_ORDER_REFUSAL = "node(s) outside the domain of a placed member whose pod affinity this pod could break"


SpreadNodes = Callable[[SpreadConstraint], Collection[str]]


def refusal(rules: PodRules, namespace: str, labels: Mapping[str, str], node: str,
            placements: Placements, spread_nodes: SpreadNodes) -> str | None:
    """Why a pod with `rules`, `namespace` and `labels` may not go to `node` beside the pods in
    `placements`, in the scheduler's words; None if it may. Ask before adding the pod: a pod
    already in `placements` is its own neighbour (remove it first to ask again).

    Every pod must be asked, rules or not: a placed pod's anti-affinity may refuse it.
    `spread_nodes(constraint)` gives the nodes a spread constraint counts (`SpreadScope`).
    """
    if rules.host_ports and placements.ports.conflict(node, rules.host_ports):
        return PORTS_REFUSAL
    reason = _spread_refusal(rules.hard_spread, namespace, labels, node, placements, spread_nodes)
    if reason:
        return reason
    if rules.affinity and not placements.affinity_met(rules.affinity, namespace, labels, node):
        return AFFINITY_REFUSAL
    if rules.anti_affinity and not placements.anti_affinity_met(rules.anti_affinity, node):
        return ANTI_AFFINITY_REFUSAL
    if not placements.existing_anti_affinity_met(namespace, labels, node):
        return EXISTING_ANTI_AFFINITY_REFUSAL
    if not placements.binding_order_safe(namespace, labels, node):
        return BINDING_ORDER_REFUSAL
    return None


def spread_penalty(rules: PodRules, namespace: str, labels: Mapping[str, str], node: str,
                   placements: Placements, spread_nodes: SpreadNodes) -> int:
    """The skew the pod's ScheduleAnyway constraints would have with it on `node`, summed:
    lower is better. A node without a constraint's key scores worse than every node with it."""
    soft = rules.soft_spread
    required = tuple(sorted({c.topology_key for c in soft}))
    node_labels = placements.node_labels(node)
    penalty = 0
    for constraint in soft:
        counts, minimum = placements.spread_counts(constraint, namespace, spread_nodes(constraint), required)
        value = node_labels.get(constraint.topology_key)
        count = counts.get(value, 0) if value is not None else max(counts.values(), default=0) + 1
        penalty += count + int(constraint.selector.matches(labels)) - minimum
    return penalty


def _spread_refusal(hard: tuple[SpreadConstraint, ...], namespace: str, labels: Mapping[str, str], node: str,
                    placements: Placements, spread_nodes: SpreadNodes) -> str | None:
    if not hard:
        return None
    required = tuple(sorted({c.topology_key for c in hard}))
    node_labels = placements.node_labels(node)
    for constraint in hard:
        value = node_labels.get(constraint.topology_key)
        if value is None:
            return SPREAD_LABEL_REFUSAL
        counts, minimum = placements.spread_counts(constraint, namespace, spread_nodes(constraint), required)
        if counts.get(value, 0) + int(constraint.selector.matches(labels)) - minimum > constraint.max_skew:
            return SPREAD_REFUSAL
    return None


class SpreadScope:
    """The nodes a member's spread constraint counts, chosen as the scheduler chooses them for the
    same pod: under nodeAffinityPolicy Honor those its nodeSelector and required node affinity
    allow, under nodeTaintsPolicy Honor those whose NoSchedule/NoExecute taints it tolerates.

    For a gated member these are its own constraints (the check the pin would defeat); for a
    pinned pod, the pinned node alone. Answers are remembered per constraint set (dropped past
    `REMEMBERED`), and the same answer is the same frozenset, which `Placements` keys its counts by.
    """

    REMEMBERED = 1024
    __slots__ = ("nodes", "_answers")

    def __init__(self, nodes: Iterable[Node]):
        self.nodes: dict[str, Node] = {node.name: node for node in nodes}
        self._answers: dict[tuple, frozenset[str]] = {}

    def nodes_for(self, member: Member) -> SpreadNodes:
        return lambda constraint: self.counted(member, constraint)

    def counted(self, member: Member, constraint: SpreadConstraint) -> frozenset[str]:
        by_affinity = constraint.node_affinity_policy == HONOR
        by_taints = constraint.node_taints_policy == HONOR
        key = ((member.node_selector, member.affinity_terms) if by_affinity else None,
               member.tolerations if by_taints else None)
        answer = self._answers.get(key)
        if answer is None:
            if len(self._answers) >= self.REMEMBERED:
                self._answers.clear()
            answer = self._answers[key] = frozenset(
                name for name, node in self.nodes.items()
                if (not by_affinity or _node_affinity_allows(member, node))
                and (not by_taints or untolerated_taint(member.tolerations, node.taints) is None))
        return answer


def _node_affinity_allows(member: Member, node: Node) -> bool:
    return (all(node.labels.get(key) == value for key, value in member.node_selector)
            and affinity_matches(member.affinity_terms, node))
