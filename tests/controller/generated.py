"""Clusters and groups generated for the planner's property tests (hypothesis strategies), and
what they build: a node pool, a ledger of busy pods and a group."""

from hypothesis import strategies as st

from gangkeeper.controller.model.members import group_of
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
