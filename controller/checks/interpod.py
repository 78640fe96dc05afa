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

How it stays fast with 150,000 pods of which few carry rules:
  - `Placements` counts the pods of a *selection* (the namespaces and selectors of a term, or of a
    spread constraint) per node in a tally made the first time a question needs it and then
    kept up to date pod by pod; per topology key (and per spread scope) the counts per domain are
    derived once and updated with the tally. A pod added or removed updates only the tallies
    whose selector could match it: tallies are found by one `key In (values)` requirement of
    their selector (the anchor) and the pod's labels. A new tally looks only at the pods with its
    anchor label, through a label index the long-lived `Placements` builds per key on first use.
  - The rules that placed pods carry (anti-affinity terms, affinity of unbound members) are kept
    per distinct rule with where their carriers are, found the same way by the asking pod's labels.
  - `copy()` copies the pod table and shares the rest copy-on-write; a copy makes its tallies from
    those of the object it was copied from (while that one has not changed) plus the few pods the
    copy has added or removed since (those with the selection's anchor label), so a planning
    pass never rescans the cluster, nor its own placements for every job it asks about.
  `examined` counts the pods looked at, so that tests and benchmarks can hold the work to a bound.

Not modelled: preferred (anti-)affinity, which only scores; the scheduler's exclusion of
terminating pods from spread counts (the caller adds what should count); the scheduler's
cluster-level default spread constraints, which apply only to pods without constraints of their
own and only with owners (Services, ReplicaSets) the controller does not read.
"""

from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import NamedTuple

from gangkeeper.controller.checks.eligibility import affinity_matches, untolerated_taint
from gangkeeper.controller.checks.ports import REFUSAL as PORTS_REFUSAL
from gangkeeper.controller.checks.ports import UsedPorts
from gangkeeper.controller.model.members import Member
from gangkeeper.controller.model.nodes import Node
from gangkeeper.controller.model.rules import HONOR, NO_RULES, Part, PodRules, PodTerm, SpreadConstraint
from gangkeeper.controller.model.selectors import NOTHING

# The scheduler's words (interpodaffinity and podtopologyspread ErrReason…), and one of ours.
AFFINITY_REFUSAL = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_REFUSAL = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_REFUSAL = "node(s) didn't satisfy existing pods anti-affinity rules"
SPREAD_REFUSAL = "node(s) didn't match pod topology spread constraints"
SPREAD_LABEL_REFUSAL = SPREAD_REFUSAL + " (missing required label)"
BINDING_ORDER_REFUSAL = "node(s) outside the domain of a placed member whose pod affinity this pod could break"

_NO_LABELS: Mapping[str, str] = MappingProxyType({})


# --- the questions ---------------------------------------------------------------------------

SpreadNodes = Callable[[SpreadConstraint], Collection[str]]


def refusal(rules: PodRules, namespace: str, labels: Mapping[str, str], node: str,
            placements: "Placements", spread_nodes: SpreadNodes) -> str | None:
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
    if rules.affinity and not placements._affinity_met(rules.affinity, namespace, labels, node):
        return AFFINITY_REFUSAL
    if rules.anti_affinity and not placements._anti_affinity_met(rules.anti_affinity, node):
        return ANTI_AFFINITY_REFUSAL
    if not placements._existing_anti_affinity_met(namespace, labels, node):
        return EXISTING_ANTI_AFFINITY_REFUSAL
    if not placements._binding_order_safe(namespace, labels, node):
        return BINDING_ORDER_REFUSAL
    return None


def spread_penalty(rules: PodRules, namespace: str, labels: Mapping[str, str], node: str,
                   placements: "Placements", spread_nodes: SpreadNodes) -> int:
    """The skew the pod's ScheduleAnyway constraints would have with it on `node`, summed:
    lower is better. A node without a constraint's key scores worse than every node with it."""
    soft = rules.soft_spread
    required = tuple(sorted({c.topology_key for c in soft}))
    node_labels = placements.node_labels(node)
    penalty = 0
    for constraint in soft:
        counts, minimum = placements._spread_counts(constraint, namespace, spread_nodes(constraint), required)
        value = node_labels.get(constraint.topology_key)
        count = counts.get(value, 0) if value is not None else max(counts.values(), default=0) + 1
        penalty += count + int(constraint.selector.matches(labels)) - minimum
    return penalty


def _spread_refusal(hard: tuple[SpreadConstraint, ...], namespace: str, labels: Mapping[str, str], node: str,
                    placements: "Placements", spread_nodes: SpreadNodes) -> str | None:
    if not hard:
        return None
    required = tuple(sorted({c.topology_key for c in hard}))
    node_labels = placements.node_labels(node)
    for constraint in hard:
        value = node_labels.get(constraint.topology_key)
        if value is None:
            return SPREAD_LABEL_REFUSAL
        counts, minimum = placements._spread_counts(constraint, namespace, spread_nodes(constraint), required)
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


# --- what is placed --------------------------------------------------------------------------

_Selection = tuple[Part, ...]                                 # a pod must match every part
_TallyKey = tuple[_Selection, bool]                            # and, when True, be bound


class _Pod(NamedTuple):
    namespace: str
    labels: Mapping[str, str]
    node: str
    rules: PodRules
    bound: bool


class Placements:
    """The pods on nodes as these filters see them: bound pods, and members reserved or being
    placed (`bound=False`), each with its namespace, labels, node and rules.

    `node_labels` and `namespace_labels` map names to labels; the label mappings themselves are
    kept, not copied, so change them through `set_node` / `set_namespace`. Labels passed to `add`
    must not change afterwards either: a pod whose labels change is added again.
    """

    TALLIES = 4096  # counts remembered before they are all dropped (they are rebuilt on demand)
    DOMAINS = 1024

    __slots__ = ("_nodes", "_namespaces", "_pods", "_gone", "_tallies", "_by_label", "_by_namespace",
                 "_anti", "_waiting", "ports", "_domains", "_base", "_base_version", "_changed", "_changed_labels",
                 "_version", "_work")

    def __init__(self, node_labels: Mapping[str, Mapping[str, str]],
                 namespace_labels: Mapping[str, Mapping[str, str]] | None = None):
        self._nodes: dict[str, Mapping[str, str]] = dict(node_labels)
        self._namespaces: dict[str, Mapping[str, str]] = dict(namespace_labels or {})
        self._pods: dict[str, _Pod | None] = {}
        self._gone = 0  # entries of `_pods` left None by a removal (see capacity.Ledger.forget)
        self._tallies = _Tallies()
        self._by_label: dict[str, dict[str, set[str]]] | None = {}  # None in a copy: it asks its base
        self._by_namespace: dict[str, set[str]] | None = {}
        self._anti = _Registry()     # required anti-affinity terms of placed pods
        self._waiting = _Registry()  # required affinity of placed pods not yet bound
        self.ports = UsedPorts()
        self._domains: dict[tuple, int] = {}
        self._base: Placements | None = None
        self._base_version = 0
        self._changed: dict[str, _Pod | None] | None = None  # in a copy: uid → its base's pod, of pods changed since
        self._changed_labels: dict[tuple[str, str], set[str]] = {}  # in a copy: label → uids it changed carrying it
        self._version = 0
        self._work = [0]  # shared by a Placements and its copies

    # --- changes -------------------------------------------------------------------------------

    def add(self, uid: str, namespace: str, labels: Mapping[str, str], node: str,
            rules: PodRules = NO_RULES, *, bound: bool = True) -> None:
        """A pod on `node`: bound, or reserved / being placed (`bound=False`); replaces an earlier entry."""
        self.remove(uid)
        if uid in self._pods:
            self._gone -= 1
        pod = self._pods[uid] = _Pod(namespace, labels, node, rules, bound)
        self._record(uid, pod, 1)

    def remove(self, uid: str) -> None:
        pod = self._pods.get(uid)
        if pod is None:
            return
        self._pods[uid] = None
        self._gone += 1
        self._record(uid, pod, -1)
        if self._gone > len(self._pods) // 2:
            self._pods = {uid: pod for uid, pod in self._pods.items() if pod is not None}
            self._gone = 0

    def set_node(self, name: str, labels: Mapping[str, str] | None) -> None:
        """A node's new labels (None: the node is gone; pods still on it count on no domain)."""
        if labels is None:
            self._nodes.pop(name, None)
        else:
            self._nodes[name] = labels
        self._changed_outside_pods()
        for tally in self._tallies.by_key.values():
            if name in tally.per_node:
                tally.forget_views()
        self._anti.forget_views(name)
        self._waiting.forget_views(name)

    def set_namespace(self, name: str, labels: Mapping[str, str]) -> None:
        self._namespaces[name] = labels
        self._changed_outside_pods()
        self._tallies.clear()

    def copy(self) -> "Placements":
        """An independent Placements to plan on; see the module docstring for what it shares."""
        clone = Placements.__new__(Placements)
        clone._nodes, clone._namespaces = dict(self._nodes), dict(self._namespaces)
        clone._pods, clone._gone = self._pods.copy(), self._gone
        clone._tallies = _Tallies()
        clone._by_label = clone._by_namespace = None
        clone._anti, clone._waiting, clone.ports = self._anti.copy(), self._waiting.copy(), self.ports.copy()
        clone._domains = dict(self._domains)
        clone._base, clone._base_version, clone._changed, clone._changed_labels = self, self._version, {}, {}
        clone._version = 0
        clone._work = self._work
        return clone

    # --- reading -------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._pods) - self._gone

    def __contains__(self, uid: str) -> bool:
        return self._pods.get(uid) is not None

    def concerned(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether a rule of a placed pod (anti-affinity, or the affinity of an unbound member)
        could refuse a pod without rules of its own; when not, `refusal` of such a pod is None
        on every node, and the planner need not ask node by node."""
        namespace_labels = self._namespaces.get(namespace, _NO_LABELS)
        if any(term.matches(namespace, labels, namespace_labels) for term in self._anti.candidates(labels)):
            return True
        return any(all(term.matches(namespace, labels, namespace_labels) for term in terms)
                   for terms in self._waiting.candidates(labels))

    def node_labels(self, node: str) -> Mapping[str, str]:
        return self._nodes.get(node, _NO_LABELS)

    @property
    def examined(self) -> int:
        """Pods looked at so far, by this Placements and its copies (a measure of work)."""
        return self._work[0]

    # --- the filters' questions (see `refusal`) ------------------------------------------------

    def _affinity_met(self, terms: tuple[PodTerm, ...], namespace: str, labels: Mapping[str, str],
                      node: str) -> bool:
        """Rules 1 and 2 of the module docstring."""
        node_labels = self.node_labels(node)
        if any(term.topology_key not in node_labels for term in terms):
            return False
        selection = tuple(term.part for term in terms)
        bound = self._tally((selection, True))
        if all(bound.by(t.topology_key, self._nodes).get(node_labels[t.topology_key], 0) > 0 for t in terms):
            return True
        namespace_labels = self._namespaces.get(namespace, _NO_LABELS)
        if not all(term.matches(namespace, labels, namespace_labels) for term in terms):
            return False
        placed = self._tally((selection, False))
        return all(placed.by(t.topology_key, self._nodes).get(node_labels[t.topology_key], 0) == placed.total
                   for t in terms)

    def _anti_affinity_met(self, terms: tuple[PodTerm, ...], node: str) -> bool:
        node_labels = self.node_labels(node)
        for term in terms:
            value = node_labels.get(term.topology_key)
            if value is not None and self._tally(((term.part,), False)).by(term.topology_key, self._nodes).get(value):
                return False
        return True

    def _existing_anti_affinity_met(self, namespace: str, labels: Mapping[str, str], node: str) -> bool:
        if not self._anti.carriers:
            return True
        node_labels = self.node_labels(node)
        namespace_labels = self._namespaces.get(namespace, _NO_LABELS)
        for term in self._anti.candidates(labels):
            value = node_labels.get(term.topology_key)
            if (value is not None and term.matches(namespace, labels, namespace_labels)
                    and self._anti.carriers[term].by(term.topology_key, self._nodes).get(value)):
                return False
        return True

    def _binding_order_safe(self, namespace: str, labels: Mapping[str, str], node: str) -> bool:
        """The last rule of the module docstring: join every self-started member whose terms you match."""
        if not self._waiting.carriers:
            return True
        node_labels = self.node_labels(node)
        namespace_labels = self._namespaces.get(namespace, _NO_LABELS)
        for terms in self._waiting.candidates(labels):
            if not all(term.matches(namespace, labels, namespace_labels) for term in terms):
                continue
            bound = self._tally((tuple(term.part for term in terms), True))
            for carrier in self._waiting.carriers[terms].per_node:
                carrier_labels = self.node_labels(carrier)
                supported = all(
                    t.topology_key in carrier_labels
                    and bound.by(t.topology_key, self._nodes).get(carrier_labels[t.topology_key], 0) > 0
                    for t in terms)
                joined = all(node_labels.get(t.topology_key) is not None
                             and node_labels.get(t.topology_key) == carrier_labels.get(t.topology_key) for t in terms)
                if not supported and not joined:
                    return False
        return True

    def _spread_counts(self, constraint: SpreadConstraint, namespace: str, scope: Collection[str],
                       required: tuple[str, ...]) -> tuple[Mapping[str, int], int]:
        """Matching pods per domain of the nodes in `scope` with every `required` key, and the
        global minimum the skew is measured from."""
        scope = scope if isinstance(scope, frozenset) else frozenset(scope)
        tally = self._tally((((constraint.selector, frozenset((namespace,)), NOTHING),), False))
        counts = tally.spread(constraint.topology_key, scope, required, self._nodes)
        domains = self._domain_count(constraint.topology_key, scope, required)
        if domains < constraint.min_domains or len(counts) < domains:
            return counts, 0
        return counts, min(counts.values())

    def _domain_count(self, key: str, scope: frozenset[str], required: tuple[str, ...]) -> int:
        cache_key = (key, scope, required)
        count = self._domains.get(cache_key)
        if count is None:
            if len(self._domains) >= self.DOMAINS:
                self._domains.clear()
            if self._base is not None and self._base._version == self._base_version:
                count = self._base._domain_count(key, scope, required)  # same nodes, same labels
            else:
                count = len({labels[key] for labels in map(self.node_labels, scope)
                             if all(k in labels for k in required)})
            self._domains[cache_key] = count
        return count

    # --- bookkeeping ---------------------------------------------------------------------------

    def _record(self, uid: str, pod: _Pod, delta: int) -> None:
        """Count a pod in (+1) or out (−1) of everything that counts it."""
        self._version += 1
        if self._changed is not None:
            if uid not in self._changed:
                self._changed[uid] = pod if delta < 0 else None
            elif self._changed[uid] is self._pods.get(uid):
                del self._changed[uid]  # back as the base has it (a tentative placement taken out)
            for item in pod.labels.items():
                self._changed_labels.setdefault(item, set()).add(uid)
        node_labels = self.node_labels(pod.node)
        if self._tallies.by_key:
            for key in self._tallies.matching(pod.labels):
                self._work[0] += 1
                if _counts(key, pod, self._namespaces):
                    self._tallies.by_key[key].bump(pod.node, delta, node_labels)
        if self._by_label is not None:
            self._index(uid, pod, delta)
        for term in pod.rules.anti_affinity:
            self._anti.bump(term, (term.part,), pod.node, delta, node_labels)
        if pod.rules.affinity and not pod.bound:
            self._waiting.bump(pod.rules.affinity, tuple(t.part for t in pod.rules.affinity), pod.node, delta,
                               node_labels)
        if pod.rules.host_ports:
            if delta > 0:
                self.ports.add(uid, pod.node, pod.rules.host_ports)
            else:
                self.ports.remove(uid)

    def _index(self, uid: str, pod: _Pod, delta: int) -> None:
        """Keep the namespace index and the label indexes built so far (the long-lived one only)."""
        buckets = [(self._by_namespace, pod.namespace)]
        if self._by_label:
            buckets += [(by_value, pod.labels[key]) for key, by_value in self._by_label.items() if key in pod.labels]
        for index, value in buckets:
            if delta > 0:
                index.setdefault(value, set()).add(uid)
                continue
            uids = index.get(value)
            if uids is not None:
                uids.discard(uid)
                if not uids:
                    del index[value]

    def _changed_outside_pods(self) -> None:
        """Node or namespace labels changed: copies made earlier stop deriving from this one, and
        this one (if a copy) from its base, whose labels now differ."""
        self._version += 1
        self._base = None
        self._domains.clear()

    def _tally(self, key: _TallyKey) -> "_Tally":
        """The counts of a selection, made on first use (module docstring)."""
        tally = self._tallies.by_key.get(key)
        if tally is None:
            if len(self._tallies.by_key) >= self.TALLIES:
                self._tallies.clear()
            base = self._base
            if base is not None and base._version == self._base_version:
                tally = base._tally(key).clone()
                for pod, delta in self._changed_pods(key[0]):
                    self._work[0] += 1
                    if _counts(key, pod, self._namespaces):
                        tally.bump(pod.node, delta, self.node_labels(pod.node))
            else:
                tally = _Tally()
                for pod in self._candidates(key[0]):
                    self._work[0] += 1
                    if _counts(key, pod, self._namespaces):
                        tally.bump(pod.node, 1, self.node_labels(pod.node))
            self._tallies.insert(key, tally)
        return tally

    def _changed_pods(self, selection: _Selection) -> Iterator[tuple[_Pod, int]]:
        """The pods this copy changed since its base that may match the selection: each as the
        base counts it (−1) and as the copy has it (+1). Only those with the selection's anchor
        label are looked at (`_changed_labels`: every label of a pod recorded here, whichever
        version), as the others match nothing it selects: a pass changes thousands of pods and
        asks about a few jobs."""
        anchor = _anchor(selection)
        if anchor is None:
            uids: Iterable[str] = list(self._changed)
        else:
            key, values = anchor
            uids = {uid for value in values for uid in self._changed_labels.get((key, value), ())
                    if uid in self._changed}
        for uid in uids:
            for pod, delta in ((self._changed[uid], -1), (self._pods.get(uid), 1)):
                if pod is not None:
                    yield pod, delta

    def _candidates(self, selection: _Selection) -> Iterable[_Pod]:
        """Pods that may match: those with the anchor label, or of the namespaces, or all of them."""
        if any(selector.nothing for selector, _, _ in selection):
            return ()
        if self._by_label is not None:
            anchor = _anchor(selection)
            if anchor is not None:
                by_value = self._label_index(anchor[0])
                return [self._pods[uid] for value in anchor[1] for uid in by_value.get(value, ())]
            if all(namespace_selector.nothing for _, _, namespace_selector in selection):
                return [self._pods[uid] for namespace in selection[0][1]
                        for uid in self._by_namespace.get(namespace, ())]
        return [pod for pod in self._pods.values() if pod is not None]

    def _label_index(self, key: str) -> dict[str, set[str]]:
        by_value = self._by_label.get(key)
        if by_value is None:
            by_value = self._by_label[key] = {}
            for uid, pod in self._pods.items():
                self._work[0] += 1
                if pod is not None and key in pod.labels:
                    by_value.setdefault(pod.labels[key], set()).add(uid)
        return by_value


def _counts(key: _TallyKey, pod: _Pod, namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
    selection, bound_only = key
    if bound_only and not pod.bound:
        return False
    own_namespace = namespace_labels.get(pod.namespace, _NO_LABELS)
    return all((pod.namespace in namespaces or namespace_selector.matches(own_namespace))
               and selector.matches(pod.labels) for selector, namespaces, namespace_selector in selection)


def _anchor(selection: _Selection) -> tuple[str, tuple[str, ...]] | None:
    for selector, _, _ in selection:
        anchor = selector.anchor
        if anchor is not None:
            return anchor
    return None


class _Tally:
    """How many pods of one selection each node holds, and per domain of the keys asked about."""

    VIEWS = 64  # spread scopes remembered per tally
    __slots__ = ("per_node", "total", "by_key", "views")

    def __init__(self) -> None:
        self.per_node: dict[str, int] = {}
        self.total = 0
        self.by_key: dict[str, dict[str, int]] = {}  # topology key → value → pods
        self.views: dict[tuple[str, frozenset[str], tuple[str, ...]], dict[str, int]] = {}  # spread domains

    def bump(self, node: str, delta: int, labels: Mapping[str, str]) -> None:
        _add(self.per_node, node, delta)
        self.total += delta
        for key, counts in self.by_key.items():
            if key in labels:
                _add(counts, labels[key], delta)
        for (key, scope, required), counts in self.views.items():
            if node in scope and all(k in labels for k in required):
                _add(counts, labels[key], delta)

    def by(self, key: str, node_labels: Mapping[str, Mapping[str, str]]) -> Mapping[str, int]:
        """Pods per value of `key`, on the nodes that have it."""
        counts = self.by_key.get(key)
        if counts is None:
            counts = self.by_key[key] = {}
            for node, count in self.per_node.items():
                labels = node_labels.get(node, _NO_LABELS)
                if key in labels:
                    _add(counts, labels[key], count)
        return counts

    def spread(self, key: str, scope: frozenset[str], required: tuple[str, ...],
               node_labels: Mapping[str, Mapping[str, str]]) -> Mapping[str, int]:
        """Pods per value of `key`, on the nodes of `scope` that have every `required` key."""
        view = (key, scope, required)
        counts = self.views.get(view)
        if counts is None:
            if len(self.views) >= self.VIEWS:
                self.views.clear()
            counts = self.views[view] = {}
            for node, count in self.per_node.items():
                labels = node_labels.get(node, _NO_LABELS)
                if node in scope and all(k in labels for k in required):
                    _add(counts, labels[key], count)
        return counts

    def forget_views(self) -> None:
        self.by_key.clear()
        self.views.clear()

    def clone(self) -> "_Tally":
        clone = _Tally()
        clone.per_node, clone.total = dict(self.per_node), self.total
        clone.by_key = {key: dict(counts) for key, counts in self.by_key.items()}
        clone.views = {view: dict(counts) for view, counts in self.views.items()}
        return clone


def _add(counts: dict[str, int], key: str, delta: int) -> None:
    count = counts.get(key, 0) + delta
    if count:
        counts[key] = count
    else:
        counts.pop(key, None)


class _Tallies:
    """A Placements' tallies, found by the labels of a pod that may change them."""

    __slots__ = ("by_key", "anchored", "general")

    def __init__(self) -> None:
        self.by_key: dict[_TallyKey, _Tally] = {}
        self.anchored: dict[tuple[str, str], list[_TallyKey]] = {}
        self.general: list[_TallyKey] = []  # selections without an anchor: every pod may change them

    def insert(self, key: _TallyKey, tally: _Tally) -> None:
        self.by_key[key] = tally
        anchor = _anchor(key[0])
        if anchor is None:
            self.general.append(key)
        else:
            for value in anchor[1]:
                self.anchored.setdefault((anchor[0], value), []).append(key)

    def matching(self, labels: Mapping[str, str]) -> Iterator[_TallyKey]:
        yield from self.general
        for item in labels.items():
            yield from self.anchored.get(item, ())

    def clear(self) -> None:
        self.by_key.clear()
        self.anchored.clear()
        self.general.clear()


class _Registry:
    """Rules carried by placed pods, each with a tally of where its carriers are, found by the
    labels of a pod the rules may concern. Copy-on-write: a copy shares the carriers' tallies
    until either side changes one; the rules per anchor are frozensets, replaced, never changed."""

    __slots__ = ("carriers", "anchored", "general", "_private")

    def __init__(self) -> None:
        self.carriers: dict[Hashable, _Tally] = {}
        self.anchored: dict[tuple[str, str], frozenset[Hashable]] = {}
        self.general: frozenset[Hashable] = frozenset()
        self._private: set[Hashable] | None = None  # rules whose tally is ours alone; None: all of them

    def bump(self, rule: Hashable, selection: _Selection, node: str, delta: int, labels: Mapping[str, str]) -> None:
        tally = self._own(rule)
        if tally is None:
            tally = self.carriers[rule] = _Tally()
            self._index(rule, selection, frozenset.union)
        tally.bump(node, delta, labels)
        if not tally.total:
            del self.carriers[rule]
            self._index(rule, selection, frozenset.difference)

    def candidates(self, labels: Mapping[str, str]) -> Iterator[Hashable]:
        yield from self.general
        for item in labels.items():
            yield from self.anchored.get(item, ())

    def forget_views(self, node: str) -> None:
        for rule in [rule for rule, tally in self.carriers.items() if node in tally.per_node]:
            self._own(rule).forget_views()

    def copy(self) -> "_Registry":
        clone = _Registry()
        clone.carriers, clone.anchored, clone.general = dict(self.carriers), dict(self.anchored), self.general
        self._private, clone._private = set(), set()
        return clone

    def _own(self, rule: Hashable) -> "_Tally | None":
        tally = self.carriers.get(rule)
        if self._private is not None and rule not in self._private:
            self._private.add(rule)
            if tally is not None:
                tally = self.carriers[rule] = tally.clone()
        return tally

    def _index(self, rule: Hashable, selection: _Selection, change: Callable) -> None:
        """`change` is frozenset.union (a new rule) or frozenset.difference (its last carrier went)."""
        anchor = _anchor(selection)
        if anchor is None:
            self.general = change(self.general, (rule,))
            return
        for value in anchor[1]:
            rules = change(self.anchored.get((anchor[0], value), frozenset()), (rule,))
            if rules:
                self.anchored[(anchor[0], value)] = rules
            else:
                self.anchored.pop((anchor[0], value), None)
