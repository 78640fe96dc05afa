"""Whatever the cluster and the group: no over-commit, all or nothing, only eligible nodes."""

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.controller.cache.capacity import usage
from gangkeeper.controller.checks.eligibility import refusal
from gangkeeper.controller.planning.planner import apply, plan_group
from gangkeeper.controller.planning.plans import NoFit, Plan, Topology
from tests.controller.generated import BUSY, GROUP, NODES, SHAPES, build


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
