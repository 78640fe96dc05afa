"""Whether a member may run on a node, decided as the kube-scheduler's filters decide it.

Modelled filters: NodeUnschedulable, TaintToleration, NodeAffinity (nodeSelector and required
node affinity) and the pod-slot part of NodeResourcesFit; the resource part is
`cache.capacity.members_fitting`. One deliberate difference: a node that is not Ready is refused
even when a pod tolerates its `not-ready` taints (docs/design.md): the controller reserves only
where the pods can start. What depends on more than the node itself — DRA devices, inter-pod
affinity and anti-affinity, topology spread, host ports, volumes — is `controller.cache.occupancy`'s.

Every refusal is a short phrase saying why, so that a group that fits nowhere can be told
which filter keeps it out.
"""

from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from functools import lru_cache

from gangkeeper.controller.model.members import Member
from gangkeeper.controller.model.names_in_order import Move, NamesInOrder, full, moved, moves_between
from gangkeeper.controller.model.nodes import Node, Taint, Toleration
from gangkeeper.controller.model.selectors import Requirement, Term, int64, requirement_matches
from gangkeeper.integrations.finding import is_valid_label_key, is_valid_label_value
from gangkeeper.names import PIN_FIELD
from gangkeeper.resources import PODS, Amount

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
FILTERED_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """core/v1 `Toleration.ToleratesTaint`: an empty key with Exists tolerates every taint."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def untolerated_taint(tolerations: Iterable[Toleration], taints: Iterable[Taint]) -> Taint | None:
    """The first NoSchedule/NoExecute taint no toleration covers (PreferNoSchedule only scores)."""
    tolerations = tuple(tolerations)
    for taint in taints:
        if taint.effect in FILTERED_EFFECTS and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def term_matches(term: Term, node: Node) -> bool:
    """A term with no requirement at all matches no node (component-helpers `nodeSelector`), and
    neither does a term the scheduler cannot parse (`term_parses`)."""
    if not term.match_expressions and not term.match_fields:
        return False
    if not term_parses(term):
        return False
    fields = {PIN_FIELD: node.name}
    return (all(requirement_matches(r, node.labels) for r in term.match_expressions)
            and all(requirement_matches(r, fields) for r in term.match_fields))


@lru_cache(maxsize=4096)  # members share their terms; a term is looked at once per node
def term_parses(term: Term) -> bool:
    """Whether component-helpers `nodeaffinity` can build the term: it sets a term with an error
    aside, so that the term matches no node, and the API server lets such terms through (it
    checks only keys and how many values an operator takes). Each expression must pass
    apimachinery's `labels.NewRequirement` — a label key; every value a label value (so `Gt: "-1"`
    never matches); values for In and NotIn, none for Exists and DoesNotExist, one integer for Gt
    and Lt — and each field requirement is In or NotIn with exactly one value."""
    return (all(_expression_parses(r) for r in term.match_expressions)
            and all(r.operator in ("In", "NotIn") and len(r.values) == 1 for r in term.match_fields))


def _expression_parses(requirement: Requirement) -> bool:
    if not is_valid_label_key(requirement.key) or not all(map(is_valid_label_value, requirement.values)):
        return False
    match requirement.operator:
        case "In" | "NotIn":
            return bool(requirement.values)
        case "Exists" | "DoesNotExist":
            return not requirement.values
        case "Gt" | "Lt":
            return len(requirement.values) == 1 and int64(requirement.values[0]) is not None
    return False


def affinity_matches(terms: tuple[Term, ...] | None, node: Node) -> bool:
    """Required node affinity: absent matches every node; present, some term must match."""
    return terms is None or any(term_matches(term, node) for term in terms)


def placement_refusal(member: Member, node: Node) -> str | None:
    """Why the member may never run on the node as it is now, whatever is free; None if it may."""
    if not node.ready:
        return "not Ready"
    if node.unschedulable and untolerated_taint(member.tolerations, (UNSCHEDULABLE_TAINT,)):
        return "cordoned"
    taint = untolerated_taint(member.tolerations, node.taints)
    if taint is not None:
        return f"untolerated taint {taint.key}{'=' + taint.value if taint.value else ''}:{taint.effect}"
    for key, value in member.node_selector:
        if node.labels.get(key) != value:
            return f"nodeSelector {key}={value} not matched"
    if not affinity_matches(member.affinity_terms, node):
        return "required node affinity not matched"
    return None


def refusal(member: Member, node: Node, free: Mapping) -> str | None:
    """`placement_refusal`, plus a pod slot: what the scheduler checks before resources."""
    reason = placement_refusal(member, node)
    if reason is None and free.get(PODS, 0) < 1:
        return "no pod slot left"
    return reason


class NodePool:
    """The cluster's nodes, with the eligible ones remembered per placement key.

    Members of a group nearly always share their constraints, and so do most groups: checking
    each constraint set against every node once, rather than every member against every node,
    is what keeps planning in milliseconds on 5,000 nodes. Nodes change rarely; the owner
    builds a new pool when one does. Remembered answers are dropped when there are more than
    `REMEMBERED` constraint sets, so that unique constraints cannot grow the pool forever.
    """

    REMEMBERED = 1024
    __slots__ = ("nodes", "_answers", "_label_values", "_domains", "_capacities", "_labelled", "_among", "_most",
                 "_slots")

    def __init__(self, nodes: Iterable[Node]):
        self.nodes: dict[str, Node] = {node.name: node for node in sorted(nodes, key=lambda n: n.name)}
        self._answers: dict[tuple, tuple[frozenset[str], Counter]] = {}
        self._label_values: dict[str, dict[str, str]] = {}
        self._domains: dict[str, dict[str, frozenset[str]]] = {}
        self._capacities: dict[tuple[str, str], dict[str, int]] = {}
        self._labelled: dict[tuple[str, Hashable], tuple[tuple[str, ...], Counter]] = {}
        self._among: dict[Hashable, tuple[tuple[str, ...], frozenset[str], tuple[str, ...]]] = {}
        self._most: dict[str, Amount] = {}
        self._slots: dict[tuple[frozenset[str], str, int], int] = {}

    def label_values(self, label: str) -> Mapping[str, str]:
        """Node name → value of `label`, for the nodes that have it (topology domains)."""
        values = self._label_values.get(label)
        if values is None:
            values = self._label_values[label] = {
                name: node.labels[label] for name, node in self.nodes.items() if label in node.labels}
        return values

    def eligible_among(self, eligible: frozenset[str], names: tuple[str, ...], slot: Hashable) -> tuple[str, ...]:
        """The names of `names` in `eligible`, in their order: `names` itself when all of them are.

        The answer is kept in the slot until another tuple or another set comes (as `labelled`
        keeps its counts), both kept beside it, so that their identities name no other: one
        answer a slot, so that sets made for one class (a volume's nodes) cannot pile up, and no
        more than `REMEMBERED` slots (a domain's nodes may name one). When the next tuple of the same set is a later hand-out of the same journal
        (`names_in_order`), the answer follows what moved; an answer that leaves names out is
        handed out with a journal of its own, for `labelled` to follow in turn."""
        known = self._among.get(slot)
        if known is not None and known[0] is names and known[1] is eligible:
            return known[2]
        moves = moves_between(known[0], names) if known is not None and known[1] is eligible else None
        answer = None if moves is None or known is None else _among_moved(known[0], known[2], names, eligible, moves)
        if answer is None:
            answer = names if eligible.issuperset(names) else NamesInOrder(filter(eligible.__contains__, names), [])
        if known is None and len(self._among) >= self.REMEMBERED:
            self._among.clear()
        self._among[slot] = (names, eligible, answer)
        return answer

    def labelled(self, label: str, names: Iterable[str], slot: Hashable = None) -> Mapping[str | None, int]:
        """How many of `names` have each value of `label` (None: how many have no value; read only).

        Given a `slot`, the answer for a tuple is kept there until another tuple comes: the
        ledger hands out the same tuple of names while the nodes with one amount free do not
        change (`Ledger.names_by_free`), so that groups planned one after the other count each
        amount once. The tuple is kept beside its answer, so that its identity names no other.
        When the next tuple is a later hand-out of the same journal, the count follows what
        moved (`names_in_order`) rather than counting every name again."""
        values = self.label_values(label)
        if slot is None or not isinstance(names, tuple):
            return Counter(map(values.get, names))
        known = self._labelled.get((label, slot))
        if known is None or known[0] is not names:
            moves = None if known is None else moves_between(known[0], names)
            counted = Counter(map(values.get, names)) if moves is None or known is None else _counted(
                known[1], values, moves)
            known = self._labelled[label, slot] = (names, counted)
        return known[1]

    def domains(self, label: str) -> Mapping[str, frozenset[str]]:
        """Value of `label` → names of the nodes that have it: the label's topology domains."""
        domains = self._domains.get(label)
        if domains is None:
            grouped: dict[str, set[str]] = {}
            for name, value in self.label_values(label).items():
                grouped.setdefault(value, set()).add(name)
            domains = self._domains[label] = {value: frozenset(names) for value, names in grouped.items()}
        return domains

    def capacity(self, label: str, resource: str) -> Mapping[str, int]:
        """Value of `label` → the whole units of `resource` its nodes' allocatable lists, in all."""
        key = (label, resource)
        capacity = self._capacities.get(key)
        if capacity is None:
            capacity = self._capacities[key] = {
                value: sum(int(self.nodes[name].allocatable.get(resource, 0)) for name in names)
                for value, names in self.domains(label).items()}
        return capacity

    def most(self, resource: str) -> Amount:
        """The most of `resource` one node's allocatable lists (0 when none lists it)."""
        most = self._most.get(resource)
        if most is None:
            most = self._most[resource] = max((node.allocatable.get(resource, 0) for node in self.nodes.values()),
                                              default=0)
        return most

    def slots(self, names: frozenset[str], resource: str, each: int) -> int:
        """How many pods asking `each` whole units of `resource` these nodes' allocatable holds in
        all, with nothing else on them (`planning.bounds`)."""
        key = (names, resource, each)
        slots = self._slots.get(key)
        if slots is None:
            if len(self._slots) >= self.REMEMBERED:
                self._slots.clear()
            slots = self._slots[key] = sum(int(self.nodes[name].allocatable.get(resource, 0)) // each
                                           for name in names if name in self.nodes)
        return slots

    def eligible(self, member: Member) -> frozenset[str]:
        """Names of the nodes that pass the member's `placement_refusal`."""
        return self._answer(member)[0]

    def refusals(self, member: Member) -> Counter:
        """How many nodes refuse the member, per reason."""
        return self._answer(member)[1]

    def _answer(self, member: Member) -> tuple[frozenset[str], Counter]:
        key = member.placement_key
        answer = self._answers.get(key)
        if answer is None:
            if len(self._answers) >= self.REMEMBERED:
                self._answers.clear()
            reasons = {name: placement_refusal(member, node) for name, node in self.nodes.items()}
            eligible = frozenset(name for name, reason in reasons.items() if reason is None)
            answer = self._answers[key] = (eligible, Counter(r for r in reasons.values() if r is not None))
        return answer


def _among_moved(before: tuple[str, ...], answer: tuple[str, ...], names: tuple[str, ...], eligible: frozenset[str],
                 moves: Sequence[Move]) -> tuple[str, ...] | None:
    """`NodePool.eligible_among`'s answer for `names`, from its `answer` for `before` and what moved
    between the two; None when it must be worked out again (names it left out come in)."""
    if answer is before:  # every name was eligible: still so if every name that came is
        return names if all(name in eligible for name, sign in moves if sign > 0) else None
    kept = [move for move in moves if move[0] in eligible]
    if not kept:
        return answer
    if type(answer) is not NamesInOrder or answer.position != len(answer.journal):
        return None
    journal = answer.journal
    if full(journal, len(answer)):
        journal = []
    else:
        journal += kept
    return NamesInOrder(moved(answer, kept), journal)


def _counted(counted: Counter, values: Mapping[str, str], moves: Sequence[Move]) -> Counter:
    """`counted` (of the names before `moves`) after them; values no name has any more are left out."""
    counted = counted.copy()
    for name, sign in moves:
        value = values.get(name)
        counted[value] += sign
        if not counted[value]:
            del counted[value]
    return counted
