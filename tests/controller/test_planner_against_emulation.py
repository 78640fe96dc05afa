"""The planner against the emulated scheduler's filters (`sim.placement`), which share no code with it.

For small generated clusters and groups: every member of a plan passes the filters on its planned
node, the members planned before it counted there; and a group of alike members the planner says
cannot fit has no assignment of its members to nodes that the filters accept (tried
exhaustively). Nodes that are not Ready are left out of that search: the controller refuses them
on purpose (docs/design.md). Groups of unlike members are not searched: the planner packs them
greedily, class by class, and may refuse one that another packing would hold (two members of 2
GPUs put on one node whose memory a third, cpu-only member needed).
"""

from itertools import product

from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.controller.model.members import group_of
from gangkeeper.controller.planning.planner import plan_group
from gangkeeper.controller.planning.plans import NoFit
from gangkeeper.controller.reading.nodes import node_from_api
from gangkeeper.controller.reading.pods import member_from_api
from sim.placement import NO_CHECKS, NodeUsage, exact_resources, filter_node, node_facts, static_reasons, usage_with
from sim.placement import PodUse as SimPodUse
from sim.resources import scheduled_requests
from tests.controller.builders import GPU, cluster, node_object, pod_object

RANK = "example.com/rank"
MOSTLY_TRUE = st.sampled_from([True, True, True, False])
MOSTLY_FALSE = st.sampled_from([False, False, False, True])
LABELS = st.dictionaries(st.sampled_from(["pool", RANK]), st.sampled_from(["a", "3", "12", "1_000"]), max_size=2)
TAINTS = st.lists(st.fixed_dictionaries({"key": st.sampled_from([GPU, "spot"]), "value": st.sampled_from(["", "x"]),
                                         "effect": st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"])}),
                  max_size=1)
NODES = st.lists(st.fixed_dictionaries({
    "labels": LABELS, "taints": TAINTS, "gpus": st.sampled_from([None, 1, 2, 4]), "cpu": st.sampled_from(["1m", "2", "4"]),
    "memory": st.sampled_from(["2Gi", "8Gi"]), "pods": st.sampled_from([1, 110, 110]),
    "ready": MOSTLY_TRUE, "unschedulable": MOSTLY_FALSE}), min_size=1, max_size=3)
# Tolerations the API server admits: an empty key only with Exists.
TOLERATIONS = st.lists(st.one_of(
    st.fixed_dictionaries({"key": st.sampled_from([GPU, "spot"]), "operator": st.sampled_from(["Exists", "Equal"]),
                           "value": st.sampled_from(["", "x"])}),
    st.just({"operator": "Exists"})), max_size=2)
# Node affinity the API server admits (a label key, the number of values its operator takes), with
# values no label has, values that are no label value, and values Go's ParseInt refuses.
EXPRESSIONS = st.one_of(
    st.fixed_dictionaries({"key": st.just("pool"), "operator": st.sampled_from(["In", "NotIn"]),
                           "values": st.lists(st.sampled_from(["a", "b", "not a value"]), min_size=1, max_size=2)}),
    st.fixed_dictionaries({"key": st.sampled_from(["pool", RANK]), "operator": st.sampled_from(["Exists", "DoesNotExist"])}),
    st.fixed_dictionaries({"key": st.just(RANK), "operator": st.sampled_from(["Gt", "Lt"]),
                           "values": st.sampled_from([["4"], ["-1"], ["+5"], ["1e3"], [" 4"]]).map(list)}))
TERMS = st.lists(st.fixed_dictionaries({"matchExpressions": st.lists(EXPRESSIONS, min_size=1, max_size=2)}),
                 min_size=1, max_size=2)
SHAPES = st.fixed_dictionaries({
    "gpus": st.sampled_from([0, 1, 2]), "cpu": st.sampled_from(["0.4m", "0.4m", "1"]),
    "memory": st.sampled_from(["1Gi", "2Gi"]), "node_selector": st.dictionaries(st.just("pool"), st.just("a"), max_size=1),
    "tolerations": TOLERATIONS, "affinity_terms": st.one_of(st.none(), st.none(), TERMS)})
GROUP = st.lists(st.tuples(SHAPES, st.integers(1, 2)), min_size=1, max_size=2).filter(
    lambda shapes: sum(count for _, count in shapes) <= 3)
BUSY = st.lists(st.tuples(st.integers(0, 2), st.sampled_from([0, 1]), st.sampled_from(["0.4m", "1"])), max_size=2)


def scenario(node_specs, busy_specs, group_specs):
    nodes = [node_object(f"n{i}", **spec) for i, spec in enumerate(node_specs)]
    bound = [pod_object(f"busy-{k}", gpus=gpus, cpu=cpu, memory="1Gi", gated=False, phase="Running",
                        node_name=nodes[i % len(nodes)]["metadata"]["name"])
             for k, (i, gpus, cpu) in enumerate(busy_specs)]
    members = [pod_object(f"m{c}-{i}", **shape) for c, (shape, count) in enumerate(group_specs) for i in range(count)]
    return nodes, bound, members


def planned(nodes, bound, members):
    pool, ledger = cluster([node_from_api(n) for n in nodes],
                           [(pod["spec"]["nodeName"], member_from_api(pod)) for pod in bound])
    group = group_of(("team", "g"), [member_from_api(pod) for pod in members], len(members), 0.0)
    return plan_group(group, pool, ledger)


def emulated_usage(bound) -> dict[str, NodeUsage]:
    usage: dict[str, NodeUsage] = {}
    for pod in bound:
        name = pod["spec"]["nodeName"]
        usage[name] = usage_with(usage.get(name, NodeUsage()), [SimPodUse(exact_resources(scheduled_requests(pod)))])
    return usage


def scheduler_accepts(assignment, facts, usage) -> bool:
    """Whether the emulated filters accept each (pod, node) in turn, counting the ones before it."""
    usage = dict(usage)
    for pod, name in assignment:
        requests = exact_resources(scheduled_requests(pod))
        used = usage.get(name, NodeUsage())
        if filter_node(requests, facts[name], used, static_reasons(pod, facts[name]), (), NO_CHECKS):
            return False
        usage[name] = usage_with(used, [SimPodUse(requests)])
    return True


@settings(max_examples=300, deadline=None)
@given(NODES, BUSY, GROUP)
def test_the_scheduler_accepts_every_plan_and_no_group_the_planner_refuses(node_specs, busy_specs, group_specs):
    nodes, bound, members = scenario(node_specs, busy_specs, group_specs)
    facts = {n["metadata"]["name"]: node_facts(n) for n in nodes}
    usage = emulated_usage(bound)
    result = planned(nodes, bound, members)
    by_uid = {pod["metadata"]["uid"]: pod for pod in members}
    if not isinstance(result, NoFit):
        assert scheduler_accepts([(by_uid[m.uid], name) for m, name in result.assignments], facts, usage), result
        return
    if any(pod["spec"] != members[0]["spec"] for pod in members):
        return
    ready = [n["metadata"]["name"] for n in nodes
             if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])]
    for names in product(ready, repeat=len(members)):
        assert not scheduler_accepts(list(zip(members, names)), facts, usage), (result.reason, names)
