"""Topology spread constraints (PodTopologySpread's filter and score), on plain data."""

from sim.interpod import placed_pod
from sim.placement import node_facts
from sim.spread import REASON_MISSING_LABEL, REASON_SKEW, spread_filter, spread_scores
from tests import builders

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def node(name, zone=None, taints=()):
    labels = {HOST: name, **({ZONE: zone} if zone else {})}
    return node_facts({"metadata": {"name": name, "labels": labels}, "spec": {"taints": list(taints)},
                       "status": {"allocatable": {"pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}})


NODES = [node("a1", "a"), node("a2", "a"), node("b1", "b")]


def pod(name, *, when="DoNotSchedule", key=ZONE, skew=1, pin=None, labels=None, **constraint):
    spec = {"topologySpreadConstraints": [{"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
                                           "labelSelector": {"matchLabels": {"app": "t"}}, **constraint}]}
    if pin:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [pin]}]}]}}}
    return builders.pod(name, labels={"app": "t"} if labels is None else labels, **spec)


def on(*placements):
    pods_on = {}
    for i, where in enumerate(placements):
        pods_on.setdefault(where, []).append(placed_pod(pod(f"e{i}"), where))
    return pods_on


def verdicts(incoming, pods_on, nodes=NODES):
    check = spread_filter(incoming, nodes, pods_on)
    return {n.name: check.reason(n) for n in nodes}


def test_a_domain_may_lead_the_emptiest_by_max_skew():
    assert verdicts(pod("p"), on("a1")) == {"a1": REASON_SKEW, "a2": REASON_SKEW, "b1": None}
    assert verdicts(pod("p", skew=2), on("a1")) == {"a1": None, "a2": None, "b1": None}
    assert verdicts(pod("p"), on("a1", "b1")) == {"a1": None, "a2": None, "b1": None}


def test_a_pod_that_does_not_match_its_own_selector_counts_nothing_for_itself():
    assert verdicts(pod("p", labels={}), on("a1")) == {"a1": None, "a2": None, "b1": None}


def test_the_pin_leaves_one_domain_so_the_check_always_passes():
    """nodeAffinityPolicy Honor (the default): only the pinned node's zone counts."""
    assert verdicts(pod("p", pin="a1"), on("a1", "a2", "a1")) == {"a1": None, "a2": None, "b1": None}
    ignoring = pod("p", pin="a1", nodeAffinityPolicy="Ignore")
    assert verdicts(ignoring, on("a1"))["a1"] == REASON_SKEW


def test_with_fewer_domains_than_min_domains_the_fewest_is_zero():
    assert verdicts(pod("p"), on("a1", "b1"))["a1"] is None
    assert verdicts(pod("p", minDomains=3), on("a1", "b1")) == {"a1": REASON_SKEW, "a2": REASON_SKEW,
                                                                "b1": REASON_SKEW}


def test_tainted_nodes_count_as_domains_unless_the_policy_honors_taints():
    tainted = [node("a1", "a"), node("b1", "b", taints=[{"key": "k", "effect": "NoSchedule"}])]
    assert verdicts(pod("p"), on("a1"), tainted)["a1"] == REASON_SKEW
    assert verdicts(pod("p", nodeTaintsPolicy="Honor"), on("a1"), tainted)["a1"] is None


def test_a_node_without_the_topology_label_is_refused():
    bare = [node("a1", "a"), node("x1")]
    assert verdicts(pod("p"), {}, bare) == {"a1": None, "x1": REASON_MISSING_LABEL}


def test_match_label_keys_narrow_the_selector_to_the_pods_own_values():
    revision = pod("p", labels={"app": "t", "rev": "2"}, matchLabelKeys=["rev"])
    assert verdicts(revision, on("a1"))["a1"] is None  # e0 has no rev=2


def test_schedule_anyway_only_scores_and_prefers_the_emptier_domain():
    soft = pod("p", when="ScheduleAnyway")
    assert spread_filter(soft, NODES, {}) is None
    assert spread_scores(soft, NODES, NODES, on("a1", "a2")) == {"a1": 0, "a2": 0, "b1": 100}
    assert spread_scores(soft, NODES, NODES, {}) == {"a1": 100, "a2": 100, "b1": 100}
    by_host = pod("p", when="ScheduleAnyway", key=HOST)
    assert spread_scores(by_host, NODES, NODES, on("a1", "a1", "a2")) == {"a1": 0, "a2": 33, "b1": 100}
    assert spread_scores(pod("p"), NODES, NODES, {}) is None
