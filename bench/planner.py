"""How long the planning core takes on a large cluster, and how much memory its model holds.

`run` builds, for each node count, a cluster of 8-GPU nodes in 4 zones and racks of 16 nodes,
binds `bound_pods` pods to it (GPU and CPU pods, never beyond a node's allocatable), queues
`waiting_groups` gangs of mixed sizes (1 to 64 members of 1, 4 or 8 GPUs), then times:
  - building the ledger from the bound pods (what the controller does after a restart),
  - one full planning pass over every waiting group (`plan_pass`), the first (eligibility not
    yet remembered) and a second one,
  - `plan_group` per group, and for a 64 × 8-GPU group alone on that cluster and on an idle one,
  - the pass again with a topology rule on every group (`TopologyRule`, issue 13): each one
    requires one zone, and those of 4 members or more come in slices of 4 ranks, each slice
    inside one rack; this pass and the plain one are timed in turn `TOPOLOGY_ROUNDS` times and
    the least of each is reported with their ratio (the machines are noisy), with checks that every
    admitted group sits in one zone and each of its slices in one rack,
  - the pass again with 20% of the groups in trees of groups (issue 25, `planning.trees`): every
    fifth group, in trees of `TREE_CHILDREN` children under a parent requiring one zone, all of
    them needed (`min_group_count`); timed in turn with the plain pass `TOPOLOGY_ROUNDS` times, the
    least of each with their ratio, with a check that every admitted tree sits in one zone,
and measures with tracemalloc the memory held by the bound pods' model, the ledger and the
node pool. Everything is seeded: two runs plan the same thing.
"""

import random
import time
import tracemalloc
from dataclasses import replace
from statistics import median

from msgspec import structs

from gangkeeper import names
from gangkeeper.controller.cache.capacity import Ledger
from gangkeeper.controller.checks.eligibility import NodePool
from gangkeeper.controller.model.members import Group, Member, TopologyRule, group_of
from gangkeeper.controller.model.nodes import Node
from gangkeeper.controller.planning.planner import plan_group
from gangkeeper.controller.planning.plans import Plan, Topology
from gangkeeper.controller.planning.queue import QueuePolicy, plan_pass
from gangkeeper.controller.planning.trees import Tree, tree_key
from gangkeeper.controller.reading.nodes import node_from_api
from gangkeeper.controller.reading.pods import member_from_api

GPU = "nvidia.com/gpu"
RACK_LABEL = "example.com/rack"
ZONES = 4
RACK_SIZE = 16
TOPOLOGY = Topology(rack_label=RACK_LABEL)
ZONE_LABEL = "topology.kubernetes.io/zone"
SLICE_SIZE = 4
TOPOLOGY_ROUNDS = 3  # passes of each kind, in turn
TREE_SHARE = 5  # every fifth group is a child in a tree: 20%
TREE_CHILDREN = 4
GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}


def run(nodes: tuple[int, ...] = (500, 2000, 5000), bound_pods: int = 50_000, waiting_groups: int = 500) -> dict:
    return {f"nodes={count}": _scenario(count, bound_pods, waiting_groups) for count in nodes}


def _scenario(node_count: int, bound_pods: int, waiting_groups: int) -> dict:
    rng = random.Random(node_count)
    node_list = [node_from_api(_node_object(i)) for i in range(node_count)]
    bound = _bound_pods(node_list, bound_pods, rng)
    groups = [_waiting_group(i, rng) for i in range(waiting_groups)]

    started = time.perf_counter()
    ledger = _ledger(node_list, bound)
    ledger_seconds = time.perf_counter() - started
    pool = NodePool(node_list)
    policy = QueuePolicy(starvation_seconds=600, topology=TOPOLOGY)
    first_pass, result = _timed(lambda: plan_pass(groups, pool, ledger, now=1_000.0, policy=policy))
    second_pass, _ = _timed(lambda: plan_pass(groups, pool, ledger, now=1_000.0, policy=policy))
    per_group = sorted(_timed(lambda g=g: plan_group(g, pool, ledger, TOPOLOGY))[0] for g in groups)
    big = group_of(("bench", "big"), [_member(f"big-{i}", "bench", 8, 0) for i in range(64)], 64, 0.0)
    big_times = [_timed(lambda: plan_group(big, pool, ledger, TOPOLOGY)) for _ in range(5)]
    idle = Ledger(node_list)
    idle_times = [_timed(lambda: plan_group(big, pool, idle, TOPOLOGY)) for _ in range(5)]
    topology = _topology_passes(groups, pool, ledger, policy)
    return {
        "bound_pods": len(bound),
        "free_gpus": sum(int(ledger.free(n.name).get(GPU, 0)) for n in node_list),
        "ledger_build_ms": _ms(ledger_seconds),
        "pass_first_ms": _ms(first_pass),
        "pass_second_ms": _ms(second_pass),
        "admitted": len(result.admitted),
        "waiting": len(result.waiting),
        "plan_group_p50_ms": _ms(per_group[len(per_group) // 2]),
        "plan_group_p95_ms": _ms(per_group[int(len(per_group) * 0.95)]),
        "plan_group_max_ms": _ms(per_group[-1]),
        "plan_64x8gpu_ms": _ms(median(seconds for seconds, _ in big_times)),
        "plan_64x8gpu_fits": isinstance(big_times[0][1], Plan),
        "plan_64x8gpu_idle_cluster_ms": _ms(median(seconds for seconds, _ in idle_times)),
        "plan_64x8gpu_idle_cluster_fits": isinstance(idle_times[0][1], Plan),
        **_memory(node_list, bound_pods, node_count),
        **topology,
        **_tree_passes(groups, pool, ledger, policy),
    }


def _ruled(group: Group) -> Group:
    """The group requiring one zone, and in slices of `SLICE_SIZE` ranks, each in one rack, when it is that large."""
    members = tuple(structs.replace(member, rank=(position,)) for position, member in enumerate(group.members))
    sliced = len(members) >= SLICE_SIZE
    rule = TopologyRule(required=ZONE_LABEL, slice_required=RACK_LABEL if sliced else None,
                        slice_size=SLICE_SIZE if sliced else None)
    return replace(group, members=members, topology=rule)


def _topology_passes(groups: list[Group], pool: NodePool, ledger: Ledger, policy: QueuePolicy) -> dict:
    """The plain pass and the pass with every group ruled, in turn; the least time of each."""
    ruled = [_ruled(group) for group in groups]
    plain_times, ruled_times = [], []
    plain = result = None
    for _ in range(TOPOLOGY_ROUNDS):
        seconds, plain = _timed(lambda: plan_pass(groups, pool, ledger, now=1_000.0, policy=policy))
        plain_times.append(seconds)
        seconds, result = _timed(lambda: plan_pass(ruled, pool, ledger, now=1_000.0, policy=policy))
        ruled_times.append(seconds)
    zones, racks = pool.label_values(ZONE_LABEL), pool.label_values(RACK_LABEL)
    in_one_zone = sum(len({zones[node] for node in plan.nodes}) == 1 for _, plan in result.admitted)
    slices = [[node for member, node in sorted(plan.assignments, key=lambda a: a[0].rank)]
              for group, plan in result.admitted if group.topology.slice_required]
    runs = [nodes[start:start + SLICE_SIZE] for nodes in slices for start in range(0, len(nodes), SLICE_SIZE)]
    return {"topology_plain_ms": _ms(min(plain_times)), "topology_ruled_ms": _ms(min(ruled_times)),
            "topology_ratio": round(min(ruled_times) / min(plain_times), 2),
            "topology_plain_admitted": len(plain.admitted), "topology_admitted": len(result.admitted),
            "topology_waiting": len(result.waiting), "topology_in_one_zone": in_one_zone,
            "topology_slices": len(runs), "topology_slices_in_one_rack": sum(len({racks[n] for n in run}) == 1
                                                                             for run in runs)}


def _forest(groups: list[Group]) -> list[Group | Tree]:
    """Every `TREE_SHARE`-th group a child, `TREE_CHILDREN` to a tree requiring one zone; the rest as they are."""
    children = groups[::TREE_SHARE]
    alone: list[Group | Tree] = [group for position, group in enumerate(groups) if position % TREE_SHARE]
    trees = [Tree(tree_key("bench", f"tree-{start}"), f"tree-{start}", len(part), tuple(part),
                  TopologyRule(required=ZONE_LABEL))
             for start in range(0, len(children), TREE_CHILDREN) if (part := children[start:start + TREE_CHILDREN])]
    return sorted(alone + trees, key=lambda unit: unit.first_seen)


def _tree_passes(groups: list[Group], pool: NodePool, ledger: Ledger, policy: QueuePolicy) -> dict:
    """The plain pass and the pass with 20% of the groups in trees, in turn; the least time of each."""
    units = _forest(groups)
    plain_times, tree_times = [], []
    result = None
    for _ in range(TOPOLOGY_ROUNDS):
        plain_times.append(_timed(lambda: plan_pass(groups, pool, ledger, now=1_000.0, policy=policy))[0])
        seconds, result = _timed(lambda: plan_pass(units, pool, ledger, now=1_000.0, policy=policy))
        tree_times.append(seconds)
    zones = pool.label_values(ZONE_LABEL)
    trees = [plan for unit, plan in result.admitted if isinstance(unit, Tree)]
    return {"trees_plain_ms": _ms(min(plain_times)), "trees_ms": _ms(min(tree_times)),
            "trees_ratio": round(min(tree_times) / min(plain_times), 2),
            "trees": sum(isinstance(unit, Tree) for unit in units), "trees_admitted": len(trees),
            "trees_in_one_zone": sum(len({zones[node] for node in plan.nodes}) == 1 for plan in trees),
            "trees_groups_admitted": len(result.admitted)}


def _memory(node_list: list[Node], bound_pods: int, node_count: int) -> dict:
    """Bytes held by the bound pods' model, the ledger built from them, and the node pool."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        bound = _bound_pods(node_list, bound_pods, random.Random(node_count))
        after_members = tracemalloc.get_traced_memory()[0]
        ledger = _ledger(node_list, bound)
        after_ledger = tracemalloc.get_traced_memory()[0]
        pool = NodePool(node_list)
        pool.eligible(bound[0][1])
        after_pool = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del ledger, pool
    return {"members_mib": _mib(after_members - before), "ledger_mib": _mib(after_ledger - after_members),
            "pool_mib": _mib(after_pool - after_ledger)}


def _ledger(node_list: list[Node], bound: list[tuple[str, Member]]) -> Ledger:
    ledger = Ledger(node_list)
    for node_name, member in bound:
        ledger.bind(member.uid, node_name, member.requests)
    return ledger


def _node_object(index: int) -> dict:
    labels = {"topology.kubernetes.io/zone": f"zone-{index % ZONES}",
              RACK_LABEL: f"rack-{index % ZONES}-{index // (ZONES * RACK_SIZE)}"}
    return {"metadata": {"name": f"node-{index:05d}", "labels": labels},
            "spec": {"taints": [GPU_TAINT]},
            "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110", GPU: "8"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _bound_pods(node_list: list[Node], count: int, rng: random.Random) -> list[tuple[str, Member]]:
    """Pods spread over the nodes, a GPU pod only where its GPUs are still free."""
    free_gpus = {node.name: 8 for node in node_list}
    slots = {node.name: 100 for node in node_list}
    bound: list[tuple[str, Member]] = []
    while len(bound) < count and any(slots.values()):
        node = node_list[rng.randrange(len(node_list))].name
        if not slots[node]:
            continue
        gpus = rng.choice((0, 0, 0, 1, 2, 4))
        gpus = gpus if gpus <= free_gpus[node] else 0
        free_gpus[node] -= gpus
        slots[node] -= 1
        member = _member(f"pod-{len(bound)}", "busy", gpus, 0, node_name=node)
        bound.append((node, member))
    return bound


def _waiting_group(index: int, rng: random.Random) -> Group:
    size = rng.choice((1, 1, 2, 4, 8, 16, 64))
    gpus = rng.choice((1, 4, 8, 8))
    namespace = f"team-{index % 20}"
    members = [_member(f"job-{index}-{i}", namespace, gpus, rng.choice((0, 100))) for i in range(size)]
    return group_of((namespace, f"job-{index}"), members, size, float(index))


def _member(name: str, namespace: str, gpus: int, priority: int, node_name: str | None = None) -> Member:
    requests = {"cpu": "2", "memory": "16Gi"}
    if gpus:
        requests[GPU] = str(gpus)
    spec = {"containers": [{"name": "main", "resources": {"requests": requests}}],
            "tolerations": [GPU_TOLERATION], "priority": priority}
    if node_name:
        spec["nodeName"] = node_name
    else:
        spec["schedulingGates"] = [{"name": names.SCHEDULING_GATE}]
    return member_from_api({"metadata": {"name": name, "namespace": namespace, "uid": f"{namespace}/{name}"},
                            "spec": spec, "status": {"phase": "Running" if node_name else "Pending"}})


def _timed(call):
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _mib(size: int) -> float:
    return round(size / 2**20, 2)


def markdown(figures: dict) -> str:
    """The figures of `run` as the results file shows them: one row per cluster size."""
    header = ("| nodes | bound pods | ledger from pods ms | full pass ms (1st / 2nd) | admitted / waiting "
              "| plan_group p50 / p95 ms | 64×8-GPU group ms (loaded / idle) | model MiB (members / ledger / pool) |")
    lines = [header, "|" + "---|" * 8]
    for label, row in figures.items():
        lines.append(
            f"| {label.split('=')[1]} | {row['bound_pods']:,} | {row['ledger_build_ms']} "
            f"| {row['pass_first_ms']} / {row['pass_second_ms']} | {row['admitted']} / {row['waiting']} "
            f"| {row['plan_group_p50_ms']} / {row['plan_group_p95_ms']} "
            f"| {row['plan_64x8gpu_ms']} / {row['plan_64x8gpu_idle_cluster_ms']} "
            f"| {row['members_mib']} / {row['ledger_mib']} / {row['pool_mib']} |")
    ruled = ["| nodes | plain pass ms (least of {rounds}) | ruled pass ms (least of {rounds}) | ratio "
             "| admitted (plain / ruled) | ruled admitted in one zone | slices in one rack |".format(rounds=TOPOLOGY_ROUNDS),
             "|" + "---|" * 7]
    for label, row in figures.items():
        ruled.append(
            f"| {label.split('=')[1]} | {row['topology_plain_ms']} | {row['topology_ruled_ms']} "
            f"| {row['topology_ratio']} | {row['topology_plain_admitted']} / {row['topology_admitted']} "
            f"| {row['topology_in_one_zone']} of {row['topology_admitted']} "
            f"| {row['topology_slices_in_one_rack']} of {row['topology_slices']} |")
    trees = ["| nodes | plain pass ms (least of {rounds}) | pass with trees ms (least of {rounds}) | ratio "
             "| trees admitted (of) | admitted trees in one zone | entries admitted |".format(rounds=TOPOLOGY_ROUNDS),
             "|" + "---|" * 7]
    for label, row in figures.items():
        trees.append(
            f"| {label.split('=')[1]} | {row['trees_plain_ms']} | {row['trees_ms']} | {row['trees_ratio']} "
            f"| {row['trees_admitted']} ({row['trees']}) | {row['trees_in_one_zone']} of {row['trees_admitted']} "
            f"| {row['trees_groups_admitted']} |")
    return ("## Planner: one full planning pass over 500 waiting groups\n\n"
            "`bench/planner.py`: 8-GPU nodes in 4 zones and racks of 16, bound pods spread over "
            "them, 500 waiting gangs of 1–64 members. Target: a full pass ≤ 1 s at 5,000 nodes.\n\n"
            + "\n".join(lines) + "\n\n"
            "With a topology rule on every group: each requires one zone "
            "(`topology.kubernetes.io/zone`), and those of 4 members or more come in slices of 4 ranks, "
            "each inside one rack (`example.com/rack`); timed in turn with the plain pass on the same "
            "cluster. Target: the ruled pass ≤ 1 s at 5,000 nodes.\n\n"
            + "\n".join(ruled) + "\n\n"
            f"With 20% of the groups in trees of groups (issue 25): every {TREE_SHARE}th group a child, "
            f"{TREE_CHILDREN} children to a tree whose parent requires one zone and needs all of them; "
            "timed in turn with the plain pass on the same cluster (its entries: groups alone and whole "
            "trees). Target: the pass with trees ≤ 1 s at 5,000 nodes.\n\n"
            + "\n".join(trees) + "\n")


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
