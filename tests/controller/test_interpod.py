import itertools
import json
import random

import pytest

from gangkeeper.controller.checks.interpod.placements import Placements
from gangkeeper.controller.checks.interpod.refusal import (
    AFFINITY_REFUSAL,
    ANTI_AFFINITY_REFUSAL,
    BINDING_ORDER_REFUSAL,
    EXISTING_ANTI_AFFINITY_REFUSAL,
    SPREAD_LABEL_REFUSAL,
    SPREAD_REFUSAL,
    SpreadScope,
    refusal,
    spread_penalty,
)
from gangkeeper.controller.checks.ports import REFUSAL as PORTS_REFUSAL
from gangkeeper.controller.model.rules import NO_RULES
from gangkeeper.controller.model.selectors import EVERYTHING, NOTHING, LabelSelector, Requirement
from gangkeeper.controller.reading.nodes import node_from_api
from gangkeeper.controller.reading.pods import member_from_api, pinned_node, required_affinity_terms
from gangkeeper.controller.reading.rules import rules_of, term_from_api
from gangkeeper.controller.reading.selectors import selector_from_api
from gangkeeper.names import PIN_FIELD
from tests import builders
from tests.controller.builders import node
from tests.recorded import SCHEDULER

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


# --- builders ----------------------------------------------------------------------------------

def zone_nodes(*zones, extra=None):
    """One node per zone letter, named `<zone><n>`, with hostname and zone labels."""
    names = {}
    nodes = []
    for zone in zones:
        names[zone] = names.get(zone, 0) + 1
        name = f"{zone}{names[zone]}"
        nodes.append(node(name, labels={HOST: name, **(extra or {}).get(name, {})}, zone=zone))
    return nodes


def term(key=HOST, **match_labels):
    return {"labelSelector": {"matchLabels": match_labels}, "topologyKey": key}


def spread(key=ZONE, max_skew=1, when="DoNotSchedule", **fields):
    constraint = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when,
                  "labelSelector": {"matchLabels": fields.pop("match", {"app": "g"})}}
    constraint.update(fields)
    return constraint


def pod(name, labels=None, namespace="team", affinity=(), anti=(), constraints=(), host_port=None,
        node_selector=None, tolerations=None, pin=None):
    ports = {"ports": [{"containerPort": host_port, "hostPort": host_port}]} if host_port else {}
    spec = {"containers": [builders.container(**ports)]}
    pod_affinity = {}
    if affinity:
        pod_affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(affinity)}
    if anti:
        pod_affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(anti)}
    if pin:
        pod_affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": PIN_FIELD, "operator": "In", "values": [pin]}]}]}}
    if pod_affinity:
        spec["affinity"] = pod_affinity
    if constraints:
        spec["topologySpreadConstraints"] = list(constraints)
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    return builders.pod(name, namespace=namespace, uid=f"uid-{namespace}-{name}", labels=dict(labels or {}), **spec)


class World:
    """Nodes, their Placements and spread scope, and the two verbs: ask and place."""

    def __init__(self, nodes, namespace_labels=None):
        self.nodes = list(nodes)
        self.placements = Placements({n.name: n.labels for n in self.nodes}, namespace_labels)
        self.scope = SpreadScope(self.nodes)

    def ask(self, raw, node_name, placements=None):
        metadata = raw["metadata"]
        return refusal(rules_of(raw), metadata["namespace"], metadata["labels"], node_name,
                       self.placements if placements is None else placements,
                       self.scope.nodes_for(member_from_api(raw)))

    def place(self, raw, node_name, bound=True, placements=None):
        metadata = raw["metadata"]
        where = self.placements if placements is None else placements
        where.add(metadata["uid"], metadata["namespace"], metadata["labels"], node_name, rules_of(raw), bound=bound)

    def penalty(self, raw, node_name):
        metadata = raw["metadata"]
        return spread_penalty(rules_of(raw), metadata["namespace"], metadata["labels"], node_name, self.placements,
                              self.scope.nodes_for(member_from_api(raw)))


# --- selectors, terms and rules ---------------------------------------------------------------

@pytest.mark.parametrize("raw, labels, expected", [
    (None, {"app": "a"}, False),  # nil: nothing
    ({}, {}, True),  # empty: everything
    ({"matchLabels": {"app": "a"}}, {"app": "a", "x": "y"}, True),
    ({"matchLabels": {"app": "a"}}, {"app": "b"}, False),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]}, {"app": "b"}, True),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]}, {}, True),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]}, {"app": "a"}, False),
    ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {"app": ""}, True),
    ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"app": ""}, False),
    ({"matchLabels": {"app": "a"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"app": "a"}, False),
])
def test_label_selector(raw, labels, expected):
    assert selector_from_api(raw).matches(labels) is expected


def test_equal_selectors_are_equal_whatever_the_order():
    one = selector_from_api({"matchExpressions": [{"key": "b", "operator": "In", "values": ["2", "1"]},
                                                  {"key": "a", "operator": "Exists"}]})
    other = selector_from_api({"matchExpressions": [{"key": "a", "operator": "Exists"},
                                                    {"key": "b", "operator": "In", "values": ["1", "2"]}]})
    assert one == other and hash(one) == hash(other)
    assert one.anchor == ("b", ("1", "2"))
    assert selector_from_api({"matchExpressions": [{"key": "a", "operator": "Exists"}]}).anchor is None


def test_match_label_keys_and_mismatch_label_keys_merge_from_the_carrier():
    raw = {"labelSelector": {"matchLabels": {"app": "g"}}, "topologyKey": HOST,
           "matchLabelKeys": ["job", "absent"], "mismatchLabelKeys": ["replica"]}
    resolved = term_from_api(raw, "team", {"job": "j1", "replica": "0", "app": "g"})
    assert resolved.selector == LabelSelector((Requirement("app", "In", ("g",)), Requirement("job", "In", ("j1",)),
                                               Requirement("replica", "NotIn", ("0",))))
    assert resolved.matches("team", {"app": "g", "job": "j1", "replica": "1"}, {})
    assert not resolved.matches("team", {"app": "g", "job": "j1", "replica": "0"}, {})
    assert not resolved.matches("team", {"app": "g", "job": "j2", "replica": "1"}, {})
    # Merged again by the API server already: the same requirement twice changes nothing.
    again = term_from_api({**raw, "labelSelector": {"matchLabels": {"app": "g", "job": "j1"}}}, "team",
                          {"job": "j1", "replica": "0"})
    assert again.selector == resolved.selector
    nil = term_from_api({"topologyKey": HOST, "matchLabelKeys": ["job"]}, "team", {"job": "j1"})
    assert nil.selector is NOTHING


@pytest.mark.parametrize("raw, expected_namespaces, expected_selector", [
    ({}, {"team"}, NOTHING),
    ({"namespaces": ["a", "b"]}, {"a", "b"}, NOTHING),
    ({"namespaceSelector": {}}, set(), EVERYTHING),
    ({"namespaces": ["a"], "namespaceSelector": {"matchLabels": {"env": "prod"}}}, {"a"},
     LabelSelector((Requirement("env", "In", ("prod",)),))),
])
def test_term_namespaces_resolve_against_the_carrier(raw, expected_namespaces, expected_selector):
    resolved = term_from_api({"labelSelector": {}, "topologyKey": HOST, **raw}, "team", {})
    assert resolved.namespaces == frozenset(expected_namespaces)
    assert resolved.namespace_selector == expected_selector


def test_plain_pods_share_no_rules_and_identical_members_share_theirs():
    assert rules_of(pod("plain", {"app": "g"})) is NO_RULES
    assert rules_of({}) is NO_RULES
    one = rules_of(pod("m-0", {"app": "g"}, anti=[term(app="g")], constraints=[spread()]))
    other = rules_of(pod("m-1", {"app": "g"}, anti=[term(app="g")], constraints=[spread()]))
    assert one is other and not one.empty


def test_spread_defaults_are_the_schedulers():
    (constraint,) = rules_of(pod("p", {"app": "g"}, constraints=[spread()])).spread
    assert (constraint.min_domains, constraint.node_affinity_policy, constraint.node_taints_policy) == \
        (1, "Honor", "Ignore")
    assert constraint.hard
    (soft,) = rules_of(pod("p", {"app": "g"}, constraints=[spread(when="ScheduleAnyway", matchLabelKeys=["job"])])
                       ).spread
    assert not soft.hard and soft.selector.matches({"app": "g"})


# --- anti-affinity ----------------------------------------------------------------------------

def test_own_anti_affinity_refuses_the_domain_of_a_matching_pod():
    world = World(zone_nodes("a", "a", "b"))
    world.place(pod("busy", {"app": "g"}), "a1")
    member = pod("m", {"app": "g"}, anti=[term(ZONE, app="g")])
    assert world.ask(member, "a1") == ANTI_AFFINITY_REFUSAL
    assert world.ask(member, "a2") == ANTI_AFFINITY_REFUSAL  # same zone, other node
    assert world.ask(member, "b1") is None


def test_anti_affinity_on_a_node_without_the_topology_key_passes():
    world = World([node("bare", labels={HOST: "bare"}), *zone_nodes("a")])
    world.place(pod("busy", {"app": "g"}), "bare")
    assert world.ask(pod("m", {"app": "g"}, anti=[term(ZONE, app="g")]), "bare") is None


def test_anti_affinity_counts_the_namespaces_the_term_names():
    world = World(zone_nodes("a"), namespace_labels={"prod": {"env": "prod"}, "dev": {"env": "dev"}})
    world.place(pod("other", {"app": "g"}, namespace="prod"), "a1")
    assert world.ask(pod("own-namespace", {"app": "g"}, anti=[term(app="g")]), "a1") is None
    listed = {**term(app="g"), "namespaces": ["prod"]}
    assert world.ask(pod("listed", {"app": "g"}, anti=[listed]), "a1") == ANTI_AFFINITY_REFUSAL
    by_labels = {**term(app="g"), "namespaceSelector": {"matchLabels": {"env": "prod"}}}
    assert world.ask(pod("selected", {"app": "g"}, anti=[by_labels]), "a1") == ANTI_AFFINITY_REFUSAL
    dev = {**term(app="g"), "namespaceSelector": {"matchLabels": {"env": "dev"}}}
    assert world.ask(pod("not-selected", {"app": "g"}, anti=[dev]), "a1") is None


def test_an_existing_pods_anti_affinity_refuses_a_pod_without_rules():
    world = World(zone_nodes("a", "b"))
    world.place(pod("loner", {"app": "db"}, anti=[term(ZONE, app="g")]), "a1")
    assert world.ask(pod("m", {"app": "g"}), "a1") == EXISTING_ANTI_AFFINITY_REFUSAL
    assert world.ask(pod("m", {"app": "g"}), "b1") is None
    assert world.ask(pod("other", {"app": "web"}), "a1") is None
    assert world.ask(pod("elsewhere", {"app": "g"}, namespace="other"), "a1") is None
    world.placements.remove("uid-team-loner")
    assert world.ask(pod("m", {"app": "g"}), "a1") is None


def test_members_with_anti_affinity_take_pairwise_distinct_domains():
    world = World(zone_nodes("a", "a", "b", "c"))
    members = [pod(f"m-{i}", {"app": "g"}, anti=[term(ZONE, app="g")]) for i in range(4)]
    placed = []
    for member in members:
        target = next((n.name for n in world.nodes if world.ask(member, n.name) is None), None)
        if target:
            world.place(member, target, bound=False)
            placed.append(target)
    assert placed == ["a1", "b1", "c1"]  # the fourth member finds no fourth zone


# --- affinity ---------------------------------------------------------------------------------

def test_affinity_needs_a_matching_pod_in_the_domain_of_every_term():
    world = World([*zone_nodes("a", "a", "b"), node("bare", labels={HOST: "bare"})])
    world.place(pod("ps", {"app": "ps"}), "a1")
    worker = pod("w", {"app": "w"}, affinity=[term(ZONE, app="ps")])
    assert world.ask(worker, "a2") is None
    assert world.ask(worker, "b1") == AFFINITY_REFUSAL
    assert world.ask(worker, "bare") == AFFINITY_REFUSAL  # no zone label at all


def test_one_pod_must_match_all_the_terms():
    world = World(zone_nodes("a", "b"))
    world.place(pod("ps", {"app": "ps"}), "a1")
    world.place(pod("cache", {"tier": "cache"}), "a1")
    both = pod("w", {"app": "w"}, affinity=[term(ZONE, app="ps"), term(ZONE, tier="cache")])
    assert world.ask(both, "a1") == AFFINITY_REFUSAL
    world.place(pod("ps-cache", {"app": "ps", "tier": "cache"}), "a1")
    assert world.ask(both, "a1") is None


def test_a_pod_matching_its_own_affinity_starts_the_series_anywhere():
    world = World(zone_nodes("a", "b"))
    first = pod("m-0", {"app": "g"}, affinity=[term(ZONE, app="g")])
    assert world.ask(first, "b1") is None
    assert world.ask(pod("w", {"app": "w"}, affinity=[term(ZONE, app="g")]), "b1") == AFFINITY_REFUSAL


def test_self_started_members_share_one_domain():
    world = World(zone_nodes("a", "a", "b"))
    members = [pod(f"m-{i}", {"app": "g"}, affinity=[term(ZONE, app="g")]) for i in range(3)]
    world.place(members[0], "a1", bound=False)
    assert world.ask(members[1], "b1") == AFFINITY_REFUSAL
    assert world.ask(members[1], "a2") is None
    world.place(members[1], "a2", bound=False)
    assert world.ask(members[2], "a1") is None


def test_a_member_whose_affinity_only_an_unbound_member_satisfies_is_refused():
    """Released together, the worker may bind before the parameter server and be refused."""
    world = World(zone_nodes("a", "a"))
    world.place(pod("ps", {"app": "ps"}), "a1", bound=False)
    worker = pod("w", {"app": "w"}, affinity=[term(ZONE, app="ps")])
    assert world.ask(worker, "a2") == AFFINITY_REFUSAL
    world.place(pod("ps", {"app": "ps"}), "a1", bound=True)
    assert world.ask(worker, "a2") is None


def test_a_pod_matching_a_self_started_members_terms_must_join_its_domain():
    world = World(zone_nodes("a", "a", "b"))
    world.place(pod("m-0", {"app": "g"}, affinity=[term(ZONE, app="g")]), "a1", bound=False)
    launcher = pod("launcher", {"app": "g"})
    assert world.ask(launcher, "b1") == BINDING_ORDER_REFUSAL
    assert world.ask(launcher, "a2") is None
    assert world.ask(pod("unrelated", {"app": "x"}), "b1") is None
    world.place(pod("anchor", {"app": "g"}), "a2", bound=True)  # now a bound pod supports m-0
    assert world.ask(launcher, "b1") is None


# Every binding order of a plan must bind. The planner's side: place the members one by one on the
# first node that `refusal` accepts, unbound. The scheduler's side, written here from its source
# independently of the module: InterPodAffinity's filter, over the bound pods only.

TEMPLATES = [
    ({"app": "g"}, {}),
    ({"app": "g"}, {"affinity": [term(ZONE, app="g")]}),
    ({"app": "w"}, {"affinity": [term(ZONE, app="g")]}),
    ({"app": "g"}, {"anti": [term(HOST, app="g")]}),
    ({"app": "g"}, {"affinity": [term(ZONE, app="g")], "anti": [term(HOST, app="g")]}),
    ({"app": "w"}, {"anti": [term(ZONE, app="w")]}),
]


def scheduler_admits(raw, node_name, bound, node_labels):
    """InterPodAffinity's Filter for `raw` on `node_name`, beside `bound` = [(raw pod, node)]."""
    rules, labels, namespace = rules_of(raw), raw["metadata"]["labels"], raw["metadata"]["namespace"]
    here = node_labels[node_name]

    def matches_all(terms, other):
        return all(t.matches(other["metadata"]["namespace"], other["metadata"]["labels"], {}) for t in terms)

    if rules.affinity:
        if any(t.topology_key not in here for t in rules.affinity):
            return False
        matching = [(other, n) for other, n in bound if matches_all(rules.affinity, other)]
        exist = all(any(node_labels[n].get(t.topology_key) == here[t.topology_key] for _, n in matching)
                    for t in rules.affinity)
        counted = [n for _, n in matching if any(t.topology_key in node_labels[n] for t in rules.affinity)]
        if not exist and (counted or not matches_all(rules.affinity, raw)):
            return False
    for t in rules.anti_affinity:
        if t.topology_key in here and any(
                node_labels[n].get(t.topology_key) == here[t.topology_key] and matches_all([t], other)
                for other, n in bound):
            return False
    for other, n in bound:
        for t in rules_of(other).anti_affinity:
            if (t.topology_key in node_labels[n] and here.get(t.topology_key) == node_labels[n][t.topology_key]
                    and t.matches(namespace, labels, {})):
                return False
    return True


def test_every_binding_order_of_an_accepted_plan_binds():
    accepted = refused = 0
    for seed in range(150):
        rng = random.Random(seed)
        nodes = zone_nodes(*rng.sample("aabbc", 5))
        world = World(nodes)
        node_labels = {n.name: n.labels for n in nodes}
        existing = []
        for i in range(rng.randrange(3)):
            labels, kinds = rng.choice(TEMPLATES)
            raw = pod(f"e-{i}", labels, **kinds)
            target = rng.choice(nodes).name
            if world.ask(raw, target) is None:
                world.place(raw, target)
                existing.append((raw, target))
        members = []
        for i in range(rng.randrange(2, 5)):
            labels, kinds = rng.choice(TEMPLATES)
            members.append(pod(f"m-{i}", labels, **kinds))
        order = [n.name for n in nodes]
        rng.shuffle(order)
        plan = []
        for member in members:
            target = next((name for name in order if world.ask(member, name) is None), None)
            if target is None:
                break
            world.place(member, target, bound=False)
            plan.append((member, target))
        if len(plan) < len(members):
            refused += 1
            continue
        accepted += 1
        for binding in itertools.permutations(plan):
            bound = list(existing)
            for member, target in binding:
                assert scheduler_admits(member, target, bound, node_labels), (seed, member["metadata"]["name"])
                bound.append((member, target))
    assert accepted > 50 and refused > 5


# --- topology spread --------------------------------------------------------------------------

def test_do_not_schedule_keeps_the_skew_across_the_nodes_the_member_may_use():
    world = World(zone_nodes("a", "a", "b"))
    member = pod("m", {"app": "g"}, constraints=[spread()])
    world.place(pod("busy", {"app": "g"}), "a1")
    assert world.ask(member, "a2") == SPREAD_REFUSAL  # a would have 2, b 0
    assert world.ask(member, "b1") is None
    world.place(pod("other-ns", {"app": "g"}, namespace="elsewhere"), "b1")
    assert world.ask(member, "a2") == SPREAD_REFUSAL  # pods of other namespaces do not count
    world.place(pod("busy-b", {"app": "g"}), "b1")
    assert world.ask(member, "a2") is None


def test_a_member_its_selector_does_not_match_adds_nothing_to_the_skew():
    world = World(zone_nodes("a", "b"))
    world.place(pod("busy", {"app": "g"}), "a1")
    assert world.ask(pod("outsider", {"app": "x"}, constraints=[spread()]), "a1") is None


def test_a_node_without_the_topology_key_is_refused():
    world = World([*zone_nodes("a"), node("bare", labels={HOST: "bare"})])
    assert world.ask(pod("m", {"app": "g"}, constraints=[spread()]), "bare") == SPREAD_LABEL_REFUSAL


def test_min_domains_counts_the_global_minimum_as_zero_until_there_are_enough_domains():
    world = World(zone_nodes("a", "b"))
    world.place(pod("busy-a", {"app": "g"}), "a1")
    world.place(pod("busy-b", {"app": "g"}), "b1")
    assert world.ask(pod("m", {"app": "g"}, constraints=[spread()]), "a1") is None
    assert world.ask(pod("m", {"app": "g"}, constraints=[spread(minDomains=3)]), "a1") == SPREAD_REFUSAL


def test_node_affinity_policy_decides_which_domains_count():
    nodes = zone_nodes("a", "b", extra={"a1": {"gpu": "h100"}, "b1": {"gpu": "a100"}})
    world = World(nodes)
    world.place(pod("busy", {"app": "g"}), "a1")
    honoring = pod("m", {"app": "g"}, constraints=[spread()], node_selector={"gpu": "h100"})
    assert world.ask(honoring, "a1") is None  # only zone a counts: skew 1
    ignoring = pod("m", {"app": "g"}, constraints=[spread(nodeAffinityPolicy="Ignore")],
                   node_selector={"gpu": "h100"})
    assert world.ask(ignoring, "a1") == SPREAD_REFUSAL


def test_node_taints_policy_honor_leaves_out_nodes_whose_taints_the_member_does_not_tolerate():
    nodes = [*zone_nodes("a"), node("b1", labels={HOST: "b1"}, zone="b",
                                    taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}])]
    world = World(nodes)
    world.place(pod("busy", {"app": "g"}), "a1")
    assert world.ask(pod("m", {"app": "g"}, constraints=[spread()]), "a1") == SPREAD_REFUSAL  # Ignore: b counts
    honoring = pod("m", {"app": "g"}, constraints=[spread(nodeTaintsPolicy="Honor")])
    assert world.ask(honoring, "a1") is None
    tolerating = pod("m", {"app": "g"}, constraints=[spread(nodeTaintsPolicy="Honor")],
                     tolerations=[{"key": "dedicated", "operator": "Exists"}])
    assert world.ask(tolerating, "a1") == SPREAD_REFUSAL


def test_a_pinned_pod_counts_only_its_node_so_do_not_schedule_passes():
    world = World(zone_nodes("a", "a", "b"))
    world.place(pod("busy", {"app": "g"}), "a1")
    assert world.ask(pod("m", {"app": "g"}, constraints=[spread()], pin="a2"), "a2") is None
    assert world.ask(pod("m", {"app": "g"}, constraints=[spread()]), "a2") == SPREAD_REFUSAL


def test_schedule_anyway_never_refuses_and_prefers_the_emptier_domain():
    world = World(zone_nodes("a", "b", "c"))
    for name in ("x", "y"):
        world.place(pod(name, {"app": "g"}), "a1")
    world.place(pod("z", {"app": "g"}), "b1")
    member = pod("m", {"app": "g"}, constraints=[spread(when="ScheduleAnyway")])
    assert world.ask(member, "a1") is None
    assert [world.penalty(member, name) for name in ("a1", "b1", "c1")] == [3, 2, 1]
    world.placements.set_node("bare", {HOST: "bare"})
    assert world.penalty(member, "bare") > world.penalty(member, "a1")


# --- host ports -------------------------------------------------------------------------------

def test_host_ports_refuse_a_node_where_the_port_is_held():
    world = World(zone_nodes("a", "b"))
    world.place(pod("p0", host_port=29500), "a1")
    assert world.ask(pod("p1", host_port=29500), "a1") == PORTS_REFUSAL
    assert world.ask(pod("p1", host_port=29500), "b1") is None
    assert world.ask(pod("p2", host_port=29501), "a1") is None
    world.placements.remove("uid-team-p0")
    assert world.ask(pod("p1", host_port=29500), "a1") is None


# --- the recordings ---------------------------------------------------------------------------

CASES = ["pod-anti-affinity-hostname", "pod-affinity-zone", "topology-spread-do-not-schedule",
         "topology-spread-schedule-anyway", "host-port-conflict"]


def recorded(name):
    return json.loads((SCHEDULER / f"{name}.json").read_text())


def unpinned(raw):
    """The pod as it was while gated: the pin is the only node affinity these cases have."""
    spec = {**raw["spec"], "affinity": {k: v for k, v in raw["spec"]["affinity"].items() if k != "nodeAffinity"}}
    return {**raw, "spec": spec}


def replay(case, ask_pinned=True):
    """Each pod, in creation order, asked about its pinned node beside the pods bound before it."""
    nodes = [node_from_api(raw) for raw in case["nodes"]]
    placements = Placements({n.name: n.labels for n in nodes})
    scope = SpreadScope(nodes)
    outcomes = {outcome["pod"]: outcome for outcome in case["outcomes"]}
    answers = []
    for raw in case["pods"]:
        metadata = raw["metadata"]
        labels = metadata.get("labels") or {}
        target = pinned_node(required_affinity_terms(raw["spec"]))
        member = member_from_api(raw if ask_pinned else unpinned(raw))
        reason = refusal(rules_of(raw), metadata["namespace"], labels, target, placements, scope.nodes_for(member))
        outcome = outcomes[metadata["name"]]
        answers.append((metadata["name"], target, reason, outcome))
        if outcome["bound_to"]:
            placements.add(metadata["name"], metadata["namespace"], labels, outcome["bound_to"], rules_of(raw))
    return answers


@pytest.mark.parametrize("name", CASES)
def test_the_recorded_scheduler_outcomes_are_reproduced_for_pinned_pods(name):
    answers = replay(recorded(name))
    assert answers
    for pod_name, target, reason, outcome in answers:
        if outcome["bound_to"]:
            assert (pod_name, reason, outcome["bound_to"]) == (pod_name, None, target)
        else:
            assert reason is not None, pod_name
            assert f"1 {reason}" in outcome["message"], (pod_name, reason, outcome["message"])


def test_the_unpinned_check_refuses_the_spread_the_pin_let_through():
    answers = replay(recorded("topology-spread-do-not-schedule"), ask_pinned=False)
    assert [(pod_name, target, reason) for pod_name, target, reason, _ in answers] == [
        ("p0", "ts-1", None),
        ("p1", "ts-2", SPREAD_REFUSAL),  # zone a would hold 2, zone b 0: skew 2 > maxSkew 1
        ("p2", "ts-1", SPREAD_REFUSAL),  # 3 to 0
        ("p3", "ts-3", None),
    ]
    assert all(outcome["bound_to"] == target for _, target, _, outcome in answers)  # all bound, pinned


# --- Placements: copies, relabelled nodes, and the work it does -------------------------------

def test_a_copy_and_its_source_change_independently():
    world = World(zone_nodes("a", "b"))
    world.place(pod("busy", {"app": "g"}, anti=[term(ZONE, app="g")], host_port=80), "a1")
    member = pod("m", {"app": "g"}, anti=[term(ZONE, app="g")])
    assert world.ask(member, "a1") == ANTI_AFFINITY_REFUSAL  # the source has made its tallies
    trial = world.placements.copy()
    world.place(pod("m-0", {"app": "g"}), "b1", placements=trial)
    trial.remove("uid-team-busy")
    assert world.ask(member, "b1", placements=trial) == ANTI_AFFINITY_REFUSAL
    assert world.ask(member, "a1", placements=trial) is None
    assert world.ask(pod("p", host_port=80), "a1", placements=trial) is None
    assert world.ask(member, "b1") is None  # the source still has m-0 nowhere and busy on a1
    assert world.ask(member, "a1") == ANTI_AFFINITY_REFUSAL
    assert world.ask(pod("p", host_port=80), "a1") == PORTS_REFUSAL
    assert len(trial) == 1 and len(world.placements) == 1


def test_a_copy_stays_right_when_its_source_changes_after_it():
    world = World(zone_nodes("a", "b"))
    trial = world.placements.copy()
    world.place(pod("m-0", {"app": "g"}), "b1", placements=trial)
    world.place(pod("late", {"app": "g"}), "a1")  # the source changes: the copy no longer asks it
    member = pod("m", {"app": "g"}, anti=[term(ZONE, app="g")])
    assert world.ask(member, "a1", placements=trial) is None
    assert world.ask(member, "b1", placements=trial) == ANTI_AFFINITY_REFUSAL
    deeper = trial.copy()
    world.place(pod("m-1", {"app": "g"}), "a1", placements=deeper)
    assert world.ask(member, "a1", placements=deeper) == ANTI_AFFINITY_REFUSAL
    assert world.ask(member, "a1", placements=trial) is None


def test_relabelled_nodes_move_their_pods_to_the_new_domain():
    world = World(zone_nodes("a", "b"))
    world.place(pod("busy", {"app": "g"}), "a1")
    member = pod("m", {"app": "g"}, anti=[term(ZONE, app="g")])
    assert (world.ask(member, "a1"), world.ask(member, "b1")) == (ANTI_AFFINITY_REFUSAL, None)
    world.placements.set_node("a1", {HOST: "a1", ZONE: "b"})
    assert world.ask(member, "b1") == ANTI_AFFINITY_REFUSAL
    world.placements.set_node("a1", None)
    assert world.ask(member, "b1") is None


def test_a_thousand_questions_on_fifty_thousand_pods_look_at_a_bounded_number_of_pods():
    nodes = [node(f"n{i}", labels={HOST: f"n{i}"}, zone=f"z{i % 10}") for i in range(5000)]
    placements = Placements({n.name: n.labels for n in nodes})
    scope = SpreadScope(nodes)
    for i in range(50_000):
        job = f"job-{i // 10}"  # 5,000 jobs of 10 pods, each job on one node
        raw = pod(f"p{i}", {"app": job, "index": str(i % 10)}, anti=[term(app=job)] if i % 100 == 0 else ())
        placements.add(raw["metadata"]["uid"], "team", raw["metadata"]["labels"], f"n{i // 10}", rules_of(raw))
    assert placements.examined == 0  # nothing asked yet, nothing matched

    def ask(raw, target, where):
        return refusal(rules_of(raw), "team", raw["metadata"]["labels"], target, where,
                       scope.nodes_for(member_from_api(raw)))

    kinds = [{"anti": [term(ZONE, app="{job}")]}, {"affinity": [term(ZONE, app="{job}")]},
             {"constraints": [spread(match={"app": "{job}"})]}]
    questions = []
    for k in range(1000):
        job = f"job-{k % 50}"  # asked about 50 jobs of 10 pods each
        rules = json.loads(json.dumps(kinds[k % 3]).replace("{job}", job))
        questions.append((pod(f"q{k}", {"app": job}, **rules), f"n{(k * 7) % 5000}"))
    answers = [ask(raw, target, placements) for raw, target in questions]
    assert {None, ANTI_AFFINITY_REFUSAL, AFFINITY_REFUSAL, SPREAD_REFUSAL} <= set(answers)
    first = placements.examined
    # One look at every pod to index the `app` label, then the 10 pods of each job asked about,
    # once per count made: the pods matching its selector (anti-affinity and spread share it), and
    # the bound ones among them (affinity).
    assert first <= 50_000 + 50 * 2 * 10
    assert [ask(raw, target, placements) for raw, target in questions] == answers
    assert placements.examined == first  # asked again: every count is remembered

    trial = placements.copy()
    for k in range(100):  # members being placed, two zones over from their job
        trial.add(f"new-{k}", "team", {"app": f"job-{k % 50}"}, f"n{k + 2}", bound=False)
    copied = [ask(raw, target, trial) for raw, target in questions]
    assert copied.count(None) < answers.count(None)
    # The copy's counts are the source's plus its own 100 pods: no rescan of the cluster.
    assert placements.examined - first <= 50 * 2 * 100


def test_a_copy_recounts_the_pods_it_changed_not_every_placement_it_tried_and_took_back():
    placements = Placements({f"n{i}": {HOST: f"n{i}"} for i in range(100)})
    for i in range(100):
        placements.add(f"p{i}", "team", {"app": "train"}, f"n{i}")
    question = pod("q", {"app": "train"}, anti=[term(app="train")])

    def ask(where, target):
        return refusal(rules_of(question), "team", {"app": "train"}, target, where, lambda constraint: ())

    assert ask(placements, "n0") == ANTI_AFFINITY_REFUSAL  # the source counts its pods once
    trial = placements.copy()
    for attempt in range(1000):  # a planning pass tries members on nodes and takes them out again
        trial.add(f"try-{attempt}", "team", {"app": "train"}, "n100", bound=False)
        trial.remove(f"try-{attempt}")
    trial.remove("p0")
    before = placements.examined
    assert ask(trial, "n0") is None
    assert placements.examined - before <= 2  # the pod taken away, not the thousand tries


def test_a_copys_new_count_looks_only_at_the_changed_pods_with_its_selectors_anchor_label():
    placements = Placements({f"n{i}": {HOST: f"n{i}"} for i in range(100)})
    placements.add("p0", "team", {"app": "train"}, "n0")
    placements.add("p1", "team", {"app": "eval"}, "n2")
    question = pod("q", {"app": "train"}, anti=[term(app="train")])

    def ask(where, target):
        return refusal(rules_of(question), "team", {"app": "train"}, target, where, lambda constraint: ())

    trial = placements.copy()
    for k in range(500):  # a pass places members of many other jobs
        trial.add(f"other-{k}", "team", {"app": f"job-{k}"}, f"n{k % 100}", bound=False)
    trial.add("mate", "team", {"app": "train"}, "n1", bound=False)
    trial.remove("p0")
    trial.add("p1", "team", {"app": "train"}, "n2")  # relabelled: it counts from now on
    before = placements.examined
    assert ask(trial, "n0") is None and ask(trial, "n1") == ask(trial, "n2") == ANTI_AFFINITY_REFUSAL
    # The source indexes its two pods and counts p0; the copy, p0 taken away, the mate added, p1 as it
    # was and as it is: not the 500 others.
    assert placements.examined - before <= 3 + 4
    assert ask(placements, "n0") == ANTI_AFFINITY_REFUSAL and ask(placements, "n1") is ask(placements, "n2") is None
