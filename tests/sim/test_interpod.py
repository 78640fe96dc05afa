"""Required pod affinity and anti-affinity (InterPodAffinity's PreFilter and Filter), on plain data."""

from sim.interpod import (
    REASON_AFFINITY,
    REASON_ANTI_AFFINITY,
    REASON_EXISTING_ANTI_AFFINITY,
    LabelSelector,
    affinity_filter,
    placed_pod,
)
from sim.placement import node_facts
from tests import builders

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def node(name, zone="a"):
    return node_facts({"metadata": {"name": name, "labels": {HOST: name, ZONE: zone}}, "spec": {},
                       "status": {"allocatable": {"pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}})


NODES = {n.name: n for n in (node("a1"), node("a2"), node("b1", "b"))}


def term(key, labels, **more):
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **more}


def pod(name, labels=None, namespace="ml", affinity=(), anti=()):
    rules = {}
    if affinity:
        rules["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(affinity)}
    if anti:
        rules["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(anti)}
    return builders.pod(name, namespace=namespace, labels=labels or {}, affinity=rules)


def reasons(incoming, placed, namespaces=None):
    placed = [placed_pod(p, on) for p, on in placed]
    labels = namespaces or {}
    check = affinity_filter(incoming, NODES, placed, [p for p in placed if p.anti_affinity],
                            lambda n: labels.get(n, {}))
    return None if check is None else {name: check.reason(n) for name, n in NODES.items()}


def test_nothing_to_check_without_terms_or_placed_anti_affinity():
    assert reasons(pod("w"), [(pod("ps", {"app": "ps"}), "a1")]) is None


def test_affinity_needs_a_matching_pod_in_the_nodes_domain():
    follower = pod("w", affinity=[term(ZONE, {"app": "ps"})])
    assert reasons(follower, [(pod("ps", {"app": "ps"}), "a1")]) == {"a1": None, "a2": None, "b1": REASON_AFFINITY}
    assert reasons(follower, [(pod("ps", {"app": "ps"}, namespace="other"), "a1")]) == {
        name: REASON_AFFINITY for name in NODES}


def test_the_first_pod_of_a_self_affine_series_may_go_anywhere():
    series = pod("w0", {"app": "w"}, affinity=[term(ZONE, {"app": "w"})])
    assert reasons(series, []) == {name: None for name in NODES}
    assert reasons(series, [(pod("w1", {"app": "w"}), "b1")]) == {"a1": REASON_AFFINITY, "a2": REASON_AFFINITY,
                                                                  "b1": None}
    assert reasons(pod("x", affinity=[term(ZONE, {"app": "w"})]), []) == {name: REASON_AFFINITY for name in NODES}


def test_anti_affinity_keeps_matching_pods_out_of_the_domain():
    spread = pod("p1", {"app": "s"}, anti=[term(HOST, {"app": "s"})])
    assert reasons(spread, [(pod("p0", {"app": "s"}), "a1")]) == {"a1": REASON_ANTI_AFFINITY, "a2": None, "b1": None}
    by_zone = pod("p1", {"app": "s"}, anti=[term(ZONE, {"app": "s"})])
    assert reasons(by_zone, [(pod("p0", {"app": "s"}), "a1")]) == {"a1": REASON_ANTI_AFFINITY,
                                                                   "a2": REASON_ANTI_AFFINITY, "b1": None}


def test_placed_pods_anti_affinity_keeps_the_incoming_pod_out():
    guard = pod("guard", {"app": "g"}, anti=[term(ZONE, {"app": "s"})])
    assert reasons(pod("p", {"app": "s"}), [(guard, "b1")]) == {"a1": None, "a2": None,
                                                               "b1": REASON_EXISTING_ANTI_AFFINITY}
    assert reasons(pod("q", {"app": "other"}), [(guard, "b1")]) is None


def test_the_affinity_check_comes_before_the_anti_affinity_checks():
    both = pod("p", {"app": "s"}, affinity=[term(ZONE, {"app": "ps"})], anti=[term(HOST, {"app": "s"})])
    placed = [(pod("ps", {"app": "ps"}), "a1"), (pod("s0", {"app": "s"}), "a1")]
    assert reasons(both, placed) == {"a1": REASON_ANTI_AFFINITY, "a2": None, "b1": REASON_AFFINITY}


def test_terms_select_namespaces_by_list_or_selector():
    listed = pod("w", affinity=[term(ZONE, {"app": "ps"}, namespaces=["infra"])])
    placed = [(pod("ps", {"app": "ps"}, namespace="infra"), "b1")]
    assert reasons(listed, placed)["b1"] is None
    selected = pod("w", affinity=[term(ZONE, {"app": "ps"}, namespaceSelector={"matchLabels": {"team": "infra"}})])
    assert reasons(selected, placed, {"infra": {"team": "infra"}})["b1"] is None
    assert reasons(selected, placed, {"infra": {"team": "other"}})["b1"] == REASON_AFFINITY
    everywhere = pod("w", affinity=[term(ZONE, {"app": "ps"}, namespaceSelector={})])
    assert reasons(everywhere, placed)["b1"] is None


def test_a_missing_selector_selects_nothing_and_an_empty_one_everything():
    assert not LabelSelector.parse(None).matches({})
    assert LabelSelector.parse({}).matches({"any": "thing"})
    expressions = LabelSelector.parse({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["web"]}]})
    assert expressions.matches({"tier": "db"}) and not expressions.matches({"tier": "web"})
