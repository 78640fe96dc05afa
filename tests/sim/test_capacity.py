"""The autoscaler's simulation (`sim.capacity`): pods placed first fit on a snapshot, the binpacking
estimate of new nodes of a group's template, and the least-waste expander."""

from sim.capacity import Snapshot, estimate, least_waste, wanted
from sim.placement import node_facts


def node(name: str, gpus: int = 8, cpu: str = "64", taint: bool = False) -> dict:
    capacity = {"cpu": cpu, "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {"metadata": {"name": name, "labels": {}},
            "spec": {"taints": [{"key": "dedicated", "effect": "NoSchedule"}]} if taint else {},
            "status": {"allocatable": capacity, "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, gpus: int, cpu: str = "1"):
    return wanted(f"ml/{name}", {"metadata": {"name": name}, "spec": {"containers": [
        {"name": "main", "resources": {"requests": {"cpu": cpu, "memory": "1Gi", "nvidia.com/gpu": str(gpus)}}}]}})


def test_pods_go_to_the_first_node_with_room_and_take_it():
    snapshot = Snapshot()
    for name in ("a", "b"):
        snapshot.add(node_facts(node(name)))
    assert [snapshot.place(pod(f"p{i}", 4)) for i in range(5)] == ["a", "a", "b", "b", None]
    assert not snapshot.empty("a")


def test_placing_all_or_none_takes_back_what_it_placed():
    snapshot = Snapshot()
    snapshot.add(node_facts(node("a")))
    assert not snapshot.place_all([pod("p0", 4), pod("p1", 8)])
    assert snapshot.empty("a")
    assert snapshot.place_all([pod("p0", 4), pod("p1", 4)])


def test_the_estimate_packs_the_largest_first_within_the_room_and_leaves_what_no_new_node_holds():
    """Largest by cpu and memory, as cluster-autoscaler orders pods (not by GPUs)."""
    template = node_facts(node("template", taint=True))
    assert estimate("pool", [pod("p0", 4)], template, 8).nodes == 0, "the template's taint is not tolerated"
    template = node_facts(node("template"))
    pods = [pod("small-0", 2), pod("big-0", 6, cpu="32"), pod("small-1", 2), pod("big-1", 6, cpu="32"),
            pod("huge", 16)]
    option = estimate("pool", pods, template, 8)
    assert (option.nodes, [p.key for p in option.pods]) == (2, ["ml/big-0", "ml/big-1", "ml/small-0", "ml/small-1"])
    option = estimate("pool", pods, template, 1)
    assert (option.nodes, [p.key for p in option.pods]) == (1, ["ml/big-0", "ml/small-0"])


def test_least_waste_takes_the_option_whose_new_nodes_are_used_the_most():
    pods = [pod("p0", 8, cpu="8")]
    large = estimate("large", pods, node_facts(node("t", cpu="128")), 4)
    fitting = estimate("fitting", pods, node_facts(node("t", cpu="16")), 4)
    assert least_waste([large, fitting]).group == "fitting"
    assert least_waste([fitting, estimate("same", pods, node_facts(node("t", cpu="16")), 4)]).group == "fitting"
    assert least_waste([]) is None
