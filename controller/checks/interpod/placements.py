"""The pods on nodes as the inter-pod filters see them (`Placements`), kept pod by pod.

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
"""

from collections.abc import Collection, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import NamedTuple

from gangkeeper.controller.checks.interpod.tallies import Registry, Selection, Tallies, Tally, TallyKey, anchor_of
from gangkeeper.controller.checks.ports import UsedPorts
from gangkeeper.controller.model.rules import NO_RULES, PodRules, PodTerm, SpreadConstraint
from gangkeeper.controller.model.selectors import NOTHING

_NO_LABELS: Mapping[str, str] = MappingProxyType({})


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
        self._gone = 0  # entries of `_pods` left None by a removal (see cache.capacity.Ledger.forget)
        self._tallies = Tallies()
        self._by_label: dict[str, dict[str, set[str]]] | None = {}  # None in a copy: it asks its base
        self._by_namespace: dict[str, set[str]] | None = {}
        self._anti: Registry[PodTerm] = Registry()  # required anti-affinity terms of placed pods
        self._waiting: Registry[tuple[PodTerm, ...]] = Registry()  # required affinity of placed pods not yet bound
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
        clone._tallies = Tallies()
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

    def affinity_met(self, terms: tuple[PodTerm, ...], namespace: str, labels: Mapping[str, str],
                     node: str) -> bool:
        """Rules 1 and 2 of `refusal`'s module docstring."""
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

    def anti_affinity_met(self, terms: tuple[PodTerm, ...], node: str) -> bool:
        node_labels = self.node_labels(node)
        for term in terms:
            value = node_labels.get(term.topology_key)
            if value is not None and self._tally(((term.part,), False)).by(term.topology_key, self._nodes).get(value):
                return False
        return True

    def existing_anti_affinity_met(self, namespace: str, labels: Mapping[str, str], node: str) -> bool:
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

    def binding_order_safe(self, namespace: str, labels: Mapping[str, str], node: str) -> bool:
        """The last rule of `refusal`'s module docstring: join every self-started member whose terms you match."""
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

    def spread_counts(self, constraint: SpreadConstraint, namespace: str, scope: Collection[str],
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
        if self._by_label is not None and self._by_namespace is not None:  # the long-lived one
            self._index(self._by_label, self._by_namespace, uid, pod, delta)
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

    @staticmethod
    def _index(by_label: dict[str, dict[str, set[str]]], by_namespace: dict[str, set[str]], uid: str, pod: _Pod,
               delta: int) -> None:
        """Keep the namespace index and the label indexes built so far (the long-lived one only)."""
        buckets = [(by_namespace, pod.namespace)]
        if by_label:
            buckets += [(by_value, pod.labels[key]) for key, by_value in by_label.items() if key in pod.labels]
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

    def _tally(self, key: TallyKey) -> Tally:
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
                tally = Tally()
                for pod in self._candidates(key[0]):
                    self._work[0] += 1
                    if _counts(key, pod, self._namespaces):
                        tally.bump(pod.node, 1, self.node_labels(pod.node))
            self._tallies.insert(key, tally)
        return tally

    def _changed_pods(self, selection: Selection) -> Iterator[tuple[_Pod, int]]:
        """The pods this copy changed since its base that may match the selection: each as the
        base counts it (−1) and as the copy has it (+1). Only those with the selection's anchor
        label are looked at (`_changed_labels`: every label of a pod recorded here, whichever
        version), as the others match nothing it selects: a pass changes thousands of pods and
        asks about a few jobs."""
        changed = self._changed
        if changed is None:
            return  # not a copy: there is no base to have changed anything since
        anchor = anchor_of(selection)
        if anchor is None:
            uids: Iterable[str] = list(changed)
        else:
            key, values = anchor
            uids = {uid for value in values for uid in self._changed_labels.get((key, value), ()) if uid in changed}
        for uid in uids:
            for pod, delta in ((changed[uid], -1), (self._pods.get(uid), 1)):
                if pod is not None:
                    yield pod, delta

    def _candidates(self, selection: Selection) -> Iterable[_Pod]:
        """Pods that may match: those with the anchor label, or of the namespaces, or all of them."""
        if any(selector.nothing for selector, _, _ in selection):
            return ()
        # The indexes hold the uids of pods that are there: each is found in `_pods`.
        if self._by_label is not None and self._by_namespace is not None:  # the long-lived one
            anchor = anchor_of(selection)
            if anchor is not None:
                by_value = self._label_index(self._by_label, anchor[0])
                return [pod for value in anchor[1] for uid in by_value.get(value, ())
                        if (pod := self._pods[uid]) is not None]
            if all(namespace_selector.nothing for _, _, namespace_selector in selection):
                return [pod for namespace in selection[0][1] for uid in self._by_namespace.get(namespace, ())
                        if (pod := self._pods[uid]) is not None]
        return [pod for pod in self._pods.values() if pod is not None]

    def _label_index(self, by_label: dict[str, dict[str, set[str]]], key: str) -> dict[str, set[str]]:
        by_value = by_label.get(key)
        if by_value is None:
            by_value = by_label[key] = {}
            for uid, pod in self._pods.items():
                self._work[0] += 1
                if pod is not None and key in pod.labels:
                    by_value.setdefault(pod.labels[key], set()).add(uid)
        return by_value


def _counts(key: TallyKey, pod: _Pod, namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
    selection, bound_only = key
    if bound_only and not pod.bound:
        return False
    own_namespace = namespace_labels.get(pod.namespace, _NO_LABELS)
    return all((pod.namespace in namespaces or namespace_selector.matches(own_namespace))
               and selector.matches(pod.labels) for selector, namespaces, namespace_selector in selection)
