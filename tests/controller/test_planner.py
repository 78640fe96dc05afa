import gc
from collections import Counter

from gangkeeper.controller.checks.eligibility import NodePool
from gangkeeper.controller.model.members import group_of
from gangkeeper.controller.planning.planner import apply, plan_group
from gangkeeper.controller.planning.plans import NoFit, Plan, Topology
from tests.controller.builders import GPU, busy, cluster, gang, member, node

TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}


def placement(plan):
    assert isinstance(plan, Plan), plan
    return Counter(node for _, node in plan.assignments)


def test_fits_by_total_count_but_not_by_node():
    nodes = [node(f"n{i}") for i in range(4)]
    pool, ledger = cluster(nodes, [busy(f"n{i}", 2) for i in range(4)])  # 4 × 6 free = 24 GPUs
    result = plan_group(gang("train", 3, gpus=8), pool, ledger)
    assert isinstance(result, NoFit)
    assert (result.placeable, result.needed, result.limiting) == (0, 3, (GPU,))
    assert "needs 3 × 8 nvidia.com/gpu" in result.reason
    assert "24 free, at most 6 on one node" in result.reason


def test_less_than_a_millicore_takes_a_millicore_as_the_scheduler_counts_it():
    """Found by tests/controller/test_planner_against_emulation.py: 0.4m + 0.4m fit 1m exactly
    counted, but the scheduler holds each pod to a whole millicore and refuses the second."""
    pool, ledger = cluster([node("small", gpus=None, cpu="1m")])
    result = plan_group(gang("tiny", 2, gpus=0, cpu="0.4m", memory="1Gi"), pool, ledger)
    assert isinstance(result, NoFit) and result.placeable == 1


def test_members_with_fewer_eligible_nodes_get_them_when_the_usual_order_fails():
    """Found by tests/controller/test_planner_against_emulation.py: the member that tolerates the
    taint went first and took the one untainted node its peer needs."""
    pool, ledger = cluster([node("n0", gpus=1), node("n1", gpus=1, taints=[TAINT])])
    tolerant = member("tolerant", gpus=1, tolerations=[{"key": GPU, "operator": "Exists"}])
    result = plan_group(group_of(("team", "g"), [tolerant, member("plain", gpus=1)], 2, 0.0), pool, ledger)
    assert {m.name: node for m, node in result.assignments} == {"tolerant": "n1", "plain": "n0"}


def test_partly_used_node_first_so_a_whole_node_job_is_not_stranded():
    pool, ledger = cluster([node("empty-1"), node("empty-2"), node("used")], [busy("used", 4)])
    small = plan_group(gang("small", 1, gpus=4), pool, ledger)
    assert placement(small) == {"used": 1}
    apply(small, ledger)
    assert placement(plan_group(gang("whole", 2, gpus=8), pool, ledger)) == {"empty-1": 1, "empty-2": 1}


def test_fragments_are_filled_before_a_whole_node_is_broken():
    pool, ledger = cluster([node("p1"), node("p2"), node("u1")], [busy("p1", 4), busy("p2", 4)])
    assert placement(plan_group(gang("g", 2, gpus=4), pool, ledger)) == {"p1": 1, "p2": 1}


def test_the_rest_of_a_group_goes_to_the_tightest_node_that_holds_it_all():
    pool, ledger = cluster([node("p6"), node("p4"), node("p2")], [busy("p6", 2), busy("p4", 4), busy("p2", 6)])
    assert placement(plan_group(gang("g", 2, gpus=2), pool, ledger)) == {"p4": 2}


def test_fewest_untouched_nodes():
    pool, ledger = cluster([node(f"n{i}") for i in range(4)])
    assert sorted(placement(plan_group(gang("g", 8, gpus=2), pool, ledger)).values()) == [4, 4]


def test_the_whole_group_in_one_zone_when_it_fits_there_the_tightest_zone_first():
    nodes = [node("a1", zone="a"), node("a2", zone="a"), node("b1", zone="b"), node("b2", zone="b"),
             node("b3", zone="b")]
    pool, ledger = cluster(nodes)
    two = plan_group(gang("two", 2, gpus=8), pool, ledger)
    assert placement(two) == {"a1": 1, "a2": 1} and two.domain == "topology.kubernetes.io/zone=a"
    three = plan_group(gang("three", 3, gpus=8), pool, ledger)
    assert set(placement(three)) == {"b1", "b2", "b3"}
    four = plan_group(gang("four", 4, gpus=8), pool, ledger)
    assert sum(placement(four).values()) == 4 and four.domain is None


def test_one_rack_before_one_zone():
    rack = "example.com/rack"
    nodes = [node("r1a", zone="a", labels={rack: "r1"}), node("r2a", zone="a", labels={rack: "r2"}),
             node("r2b", zone="a", labels={rack: "r2"}), node("r3a", zone="a", labels={rack: "r3"})]
    pool, ledger = cluster(nodes, [busy("r1a", 4)])
    plan = plan_group(gang("g", 2, gpus=8), pool, ledger, Topology(rack_label=rack))
    assert placement(plan) == {"r2a": 1, "r2b": 1} and plan.domain == f"{rack}=r2"


def test_a_node_of_the_plan_left_with_as_many_free_comes_after_the_nodes_that_had_that_many():
    pool, ledger = cluster([node("a6"), node("z2")], [busy("a6", 2), busy("z2", 6)])
    group = group_of(("team", "g"), [member("big", gpus=4), member("small", gpus=2)], 2, 0.0)
    assignments = {m.name: n for m, n in plan_group(group, pool, ledger).assignments}
    assert assignments == {"big": "a6", "small": "z2"}  # a6, 2 left after big, is not taken first by name


def test_members_of_one_group_add_up_on_a_node():
    pool, ledger = cluster([node("n1", cpu="10"), node("n2", cpu="10")])
    assert placement(plan_group(gang("g", 3, gpus=2, cpu="4"), pool, ledger)) == {"n1": 2, "n2": 1}


def test_pod_slots_add_up_too():
    pool, ledger = cluster([node("n1", pods=3), node("n2", pods=3)], [busy("n1", 0)])
    assert placement(plan_group(gang("g", 4, gpus=1), pool, ledger)) == {"n1": 2, "n2": 2}


def test_sidecars_and_overhead_count_when_planning():
    sidecar = {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "2"}}}
    pool, ledger = cluster([node("n1", cpu="12"), node("n2", cpu="12")])
    group = gang("g", 2, gpus=1, cpu="4", init_containers=[sidecar], overhead={"cpu": "500m"})
    assert placement(plan_group(group, pool, ledger)) == {"n1": 1, "n2": 1}


def test_an_init_container_step_larger_than_the_app_counts_when_planning():
    init = {"name": "warmup", "resources": {"requests": {"cpu": "8"}}}
    pool, ledger = cluster([node("n1", cpu="12")])
    result = plan_group(gang("g", 2, gpus=1, cpu="1", init_containers=[init]), pool, ledger)
    assert isinstance(result, NoFit) and result.placeable == 1 and result.limiting == ("cpu",)
    assert "each member needs 8 cpu" in result.reason


def test_only_nodes_a_member_may_run_on():
    nodes = [node("tainted", taints=[TAINT]), node("h100", labels={"pool": "h100"}), node("a100", labels={"pool": "a100"})]
    pool, ledger = cluster(nodes)
    assert placement(plan_group(gang("g", 1, node_selector={"pool": "a100"}), pool, ledger)) == {"a100": 1}


def test_no_eligible_node_says_which_filter_refuses():
    pool, ledger = cluster([node("n1", taints=[TAINT]), node("n2", taints=[TAINT]), node("n3", ready=False)])
    result = plan_group(gang("g", 1), pool, ledger)
    assert isinstance(result, NoFit) and result.limiting == ("eligibility",)
    assert "2 untolerated taint nvidia.com/gpu=present:NoSchedule, 1 not Ready" in result.reason


def test_a_launcher_joins_the_nodes_of_its_plan():
    pool, ledger = cluster([node("gpu-1"), node("gpu-2"), node("cpu-1", gpus=None)])
    workers = [member(f"w{i}", gpus=8) for i in range(2)]
    group = group_of(("team", "g"), [member("launcher", gpus=0, cpu="1")] + workers, 3, 0.0)
    assignments = dict((m.name, n) for m, n in plan_group(group, pool, ledger).assignments)
    assert assignments == {"w0": "gpu-1", "w1": "gpu-2", "launcher": "gpu-1"}


def test_pods_without_gpus_keep_off_gpu_nodes():
    pool, ledger = cluster([node("gpu-1"), node("cpu-1", gpus=None, cpu="2"), node("cpu-2", gpus=None, cpu="2")])
    assert placement(plan_group(gang("g", 5, gpus=0, cpu="1"), pool, ledger)) == {"cpu-1": 2, "cpu-2": 2, "gpu-1": 1}


def test_members_already_reserved_keep_their_reservation():
    pool, ledger = cluster([node("n1"), node("n2")])
    reserved = member("g-0", gpus=8, reserved_node="n1")
    ledger.reserve(reserved.uid, "n1", reserved.requests)
    group = group_of(("team", "g"), [reserved, member("g-1", gpus=8)], 2, 0.0)
    plan = plan_group(group, pool, ledger)
    assert [(m.name, n) for m, n in plan.assignments] == [("g-1", "n2")]


def test_no_fit_reports_where_the_placeable_members_would_go():
    pool, ledger = cluster([node("n1"), node("n2")])
    result = plan_group(gang("g", 3, gpus=8), pool, ledger)
    assert isinstance(result, NoFit) and result.placeable == 2
    assert sorted(n for _, n in result.partial) == ["n1", "n2"]
    assert result.reason.startswith("2 of 3 waiting members placeable")


def test_a_pool_that_planned_groups_before_plans_inside_zones_as_a_fresh_pool_would():
    """What the pool remembers between plans (each amount's eligible nodes, their count by zone, a
    zone's nodes of each amount) follows the nodes each admitted plan moves."""
    nodes = [node(f"n{i:02d}", zone="abcd"[i % 4 if i < 24 else 0]) for i in range(40)] + [node("big", zone="a", gpus=16)]
    pool, ledger = cluster(nodes, [busy(f"n{i:02d}", i % 8) for i in range(0, 24, 2)])
    admitted = 0
    for number, (size, gpus) in enumerate([(3, 2), (1, 8), (4, 4), (2, 1), (5, 8), (2, 6), (9, 1), (3, 8), (6, 2),
                                           (1, 16), (4, 8), (7, 1)]):
        group = gang(f"g{number}", size, gpus=gpus)
        plan = plan_group(group, pool, ledger)
        assert plan == plan_group(group, NodePool(nodes), ledger)
        if isinstance(plan, Plan):
            apply(plan, ledger)
            admitted += plan.domain is not None
    assert admitted >= 6, "most plans kept to one zone"


def test_a_larger_node_left_with_an_amount_is_partly_used_before_untouched_nodes_of_that_amount():
    pool, ledger = cluster([node("a8"), node("big", gpus=16), node("z8")], [busy("big", 8)])
    assert placement(plan_group(gang("g", 1, gpus=8), pool, ledger)) == {"big": 1}
    pool, ledger = cluster([node("a8"), node("z8")])  # no larger node: every node with 8 free is untouched
    assert placement(plan_group(gang("g", 1, gpus=8), pool, ledger)) == {"a8": 1}


def test_a_plan_leaves_no_garbage_that_only_the_cyclic_collector_frees():
    """A pass holds the cyclic collector off: what planning a group makes is freed as it is dropped."""
    nodes = [node(f"n{i}", zone="ab"[i % 2]) for i in range(6)]
    pool, ledger = cluster(nodes, [busy("n0", 4), busy("n3", 2)])
    gc.collect()
    gc.disable()
    try:
        for size, gpus in ((3, 2), (1, 8), (5, 4)):
            plan_group(gang(f"g{size}", size, gpus=gpus), pool, ledger)
        assert gc.collect() == 0
    finally:
        gc.enable()
