"""Whatever the cluster and the group: no over-commit, all or nothing, only eligible nodes."""

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.controller.cache.capacity import usage
from gangkeeper.controller.checks.eligibility import refusal
from gangkeeper.controller.model.members import group_of
from gangkeeper.controller.planning.planner import apply, plan_group
from gangkeeper.controller.planning.plans import NoFit, Plan, Topology
from tests.controller.builders import GPU, cluster, member, node

LABELS = st.dictionaries(st.sampled_from(["pool", "topology.kubernetes.io/zone", "rack"]),
                         st.sampled_from(["a", "b"]), max_size=3)
TAINTS = st.lists(st.fixed_dictionaries({"key": st.sampled_from([GPU, "spot"]), "value": st.sampled_from(["", "x"]),
                                         "effect": st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"])}),
                  max_size=2)
NODES = st.lists(st.builds(lambda labels, taints, gpus, cpu, pods, ready, cordoned: dict(
    labels=labels, taints=taints, gpus=gpus, cpu=str(cpu), pods=pods, ready=ready, unschedulable=cordoned),
    LABELS, TAINTS, st.sampled_from([None, 0, 4, 8]), st.integers(1, 32), st.integers(1, 6),
    st.booleans(), st.booleans()), min_size=1, max_size=12)
TOLERATIONS = st.lists(st.fixed_dictionaries({"key": st.sampled_from([GPU, "spot", ""]),
                                              "operator": st.sampled_from(["Exists", "Equal"]),
                                              "value": st.sampled_from(["", "x"])}), max_size=2)
SHAPES = st.builds(lambda gpus, cpu, selector, tolerations, zone_in: dict(
    gpus=gpus, cpu=str(cpu), node_selector=selector, tolerations=tolerations,
    affinity_terms=[{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In",
                                           "values": zone_in}]}] if zone_in else None),
    st.sampled_from([0, 1, 2, 4, 8]), st.integers(1, 16), st.dictionaries(st.just("pool"), st.just("a"), max_size=1),
    TOLERATIONS, st.sampled_from([None, ["a"], ["a", "b"]]))
GROUP = st.lists(st.tuples(SHAPES, st.integers(1, 4)), min_size=1, max_size=3)
BUSY = st.lists(st.tuples(st.integers(0, 11), st.sampled_from([0, 1, 2, 4]), st.integers(1, 8)), max_size=10)


def build(node_specs, busy_specs, group_specs):
    nodes = [node(f"n{i}", memory="64Gi", **spec) for i, spec in enumerate(node_specs)]
    bound = [(nodes[i % len(nodes)].name,
              member(f"busy-{k}", gpus=gpus, cpu=str(cpu), memory="1Gi", gated=False, phase="Running"))
             for k, (i, gpus, cpu) in enumerate(busy_specs)]
    members = [member(f"m{c}-{i}", memory="1Gi", **shape)
               for c, (shape, count) in enumerate(group_specs) for i in range(count)]
    pool, ledger = cluster(nodes, bound)
    return pool, ledger, group_of(("team", "g"), members, len(members), 0.0)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(NODES, BUSY, GROUP, st.booleans())
def test_plans_never_over_commit_are_all_or_nothing_and_use_only_eligible_nodes(node_specs, busy_specs,
                                                                               group_specs, racks):
    pool, ledger, group = build(node_specs, busy_specs, group_specs)
    before = {name: dict(ledger.free(name)) for name in pool.nodes}
    result = plan_group(group, pool, ledger, Topology(rack_label="rack" if racks else None))
    if isinstance(result, NoFit):
        assert 0 <= result.placeable < result.needed == len(group.members)
        assert result.reason and len(result.partial) == result.placeable
        assignments = result.partial
    else:
        assert sorted(m.uid for m, _ in result.assignments) == sorted(m.uid for m in group.members)
        assignments = result.assignments
    taken: dict[str, Counter] = {}
    for placed, name in assignments:
        assert refusal(placed, pool.nodes[name], before[name]) is None
        taken.setdefault(name, Counter()).update(usage(placed.requests))
    for name, used in taken.items():
        for resource, amount in used.items():
            assert amount <= before[name].get(resource, 0), (name, resource)
    apply(result, ledger)
    for name, used in taken.items():
        assert all(ledger.free(name)[resource] == before[name].get(resource, 0) - amount
                   for resource, amount in used.items())


@settings(max_examples=60, deadline=None)
@given(NODES, BUSY, SHAPES)
def test_a_single_member_is_placed_whenever_some_node_takes_it(node_specs, busy_specs, shape):
    pool, ledger, group = build(node_specs, busy_specs, [(shape, 1)])
    result = plan_group(group, pool, ledger)
    fits_somewhere = any(refusal(group.members[0], n, ledger.free(n.name)) is None
                         and all(ledger.free(n.name).get(r, 0) >= v for r, v in usage(group.members[0].requests).items())
                         for n in pool.nodes.values())
    assert isinstance(result, Plan) == fits_somewhere
