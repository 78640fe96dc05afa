"""`kubectl gang why`: a group, where each member stands, and what the controller's own planning
decides for it on the cluster as read — why it waits in full, the nodes that came closest, its
place in the queue and its preemption options."""

from gangkeeper.controller.planning.queue import Order, QueuePolicy
from gangkeeper.controller.reading import kube as api
from gangkeeper.plugin import explain
from gangkeeper.plugin.reading import read_cluster
from tests.controller.builders import pod_object
from tests.plugin.fakekube import FakeKube
from tests.plugin.world import CREATED, NOW, gang, member, node, running, waiting, why


def lone_pod(name, node_name, gpus, priority=0):
    return api.PODS, pod_object(name, gpus=gpus, node_name=node_name, gated=False, phase="Running",
                                priority=priority, created=CREATED)


def test_a_group_that_does_not_fit_names_the_constraint_and_what_each_node_lacks():
    cluster = [node("a"), node("b"), node("c"), *running("busy", ["b"]), lone_pod("half", "c", 4),
               *waiting("train", 2)]
    answer = why(cluster, "train-0")
    assert answer["verdict"] == "Waits" and answer["constraint"] == "nvidia.com/gpu"
    assert answer["reason"].startswith("1 of 2 waiting members placeable: needs 2 × 8 nvidia.com/gpu")
    assert answer["placeable"] == {"members": 1, "of": 2}
    assert [(c["node"], c["takes"], c["lacks"]) for c in answer["closest"]] == [
        ("a", 1, ""), ("c", 0, "lacks 4 nvidia.com/gpu"), ("b", 0, "lacks 8 nvidia.com/gpu")]
    assert answer["closest"][1]["free"] == {"cpu": "92", "memory": "960Gi", "nvidia.com/gpu": "4"}


def test_a_node_a_filter_refuses_comes_last_with_the_filters_words():
    cluster = [node("a"), node("b", unschedulable=True), node("c", ready=False), *running("busy", ["a"]),
               *waiting("train", 1)]
    answer = why(cluster, "train-0")
    assert [(c["node"], c["lacks"]) for c in answer["closest"]] == [
        ("a", "lacks 8 nvidia.com/gpu"), ("b", "cordoned"), ("c", "not Ready")]


def test_each_member_says_where_it_stands():
    cluster = [node("a"), node("b"), node("c"),
               member("train", 0, size=3, node_name="a"),
               member("train", 1, size=3, gated=False),
               member("train", 2, size=3, reserved_node="c")]
    answer = why(cluster, "train")
    assert [(m["pod"], m["state"], m["node"]) for m in answer["members"]] == [
        ("train-0", "bound", "a"), ("train-1", "released", None), ("train-2", "reserved", "c")]
    assert answer["verdict"] == "Admitted"
    assert answer["reason"] == ("admitted: 1 bound, 1 released (waiting for the scheduler), 1 reserved (to be "
                                "released)")


def test_a_group_that_fits_now_is_placed_on_named_nodes():
    answer = why([node("a"), node("b"), *waiting("train", 2, gpus=4)], "train-1")
    assert answer["verdict"] == "Fits"
    assert answer["placement"]["nodes"] == [{"node": "a", "pods": ["train-0", "train-1"]}]


def test_its_place_in_the_queue_is_by_priority_then_age():
    cluster = [node("a"), *running("busy", ["a"]), *waiting("urgent", 1, priority=10, created="2025-01-01T00:05:00Z"),
               *waiting("older", 1), *waiting("train", 1, created="2025-01-01T00:01:00Z")]
    answer = why(cluster, "train-0", planning=explain.Planning(preemption=False))
    assert answer["queue"] == {"position": 3, "of": 3, "ahead": [
        {"group": "team/urgent", "priority": 10, "verdict": "Waits"},
        {"group": "team/older", "priority": 0, "verdict": "Waits"}]}


def test_a_group_of_higher_priority_preempts_a_lower_group_whole():
    cluster = [node("a"), node("b"), *running("low", ["a", "b"]), *waiting("urgent", 2, priority=100)]
    answer = why(cluster, "urgent-0")
    assert answer["verdict"] == "Preempts"
    (victim,) = answer["preemption"]["victims"]
    assert victim == {"name": "team/low", "kind": "group", "owner": None, "priority": 0, "pods": 2, "accelerators": 16,
                      "nodes": ["a", "b"]}
    assert sorted(n["node"] for n in answer["placement"]["nodes"]) == ["a", "b"]


def test_preemption_options_say_why_there_are_none():
    full = [node("a"), *running("low", ["a"])]
    same_priority = why([*full, *waiting("train", 1)], "train-0")
    assert same_priority["preemption"] == {
        "victims": [], "reason": "no running group or pod of priority below 0 holds capacity"}
    switched_off = why([*full, *waiting("train", 1, priority=5)], "train-0",
                       planning=explain.Planning(preemption=False))
    assert switched_off["preemption"]["reason"] == "preemption is off (the controller runs with --preemption=Never)"
    never = why([*full, *waiting("train", 1, priority=5, preemption_policy="Never")], "train-0")
    assert never["preemption"]["reason"] == "its PriorityClass says preemptionPolicy: Never: it never preempts"
    too_big = why([*full, *waiting("train", 2, priority=5)], "train-0")
    assert too_big["verdict"] == "Waits" and too_big["preemption"] == {
        "victims": [], "reason": "taking all 1 groups and pods of priority below 5 would still leave no room for it"}


def test_an_incomplete_group_waits_for_its_pods():
    answer = why([node("a"), member("train", 0, size=2)], "train-0")
    assert (answer["verdict"], answer["reason"]) == ("Incomplete", "waiting for its pods: 1 of min count 2 members "
                                                                   "present")


def test_a_group_whose_declarations_disagree_says_so():
    cluster = [node("a"), member("train", 0, size=2), member("train", 1, size=3)]
    answer = why(cluster, "train-0")
    assert answer["verdict"] == "Problem" and answer["constraint"] == "Disagreement"
    assert "declared sizes disagree" in answer["reason"]


def test_the_gang_is_found_by_its_name_and_says_what_the_controller_wrote():
    status = {"phase": "Waiting", "reason": "NoFit", "waitingSince": CREATED,
              "conditions": [{"type": "Admitted", "status": "False", "reason": "NoFit", "message": "no room"}]}
    cluster = [node("a"), *running("busy", ["a"]), *waiting("train", 2), gang("train-3f9c", "train", 2, status=status)]
    answer = why(cluster, "gang/train-3f9c")
    assert (answer["group"], answer["gang"]) == ("train", "train-3f9c")
    assert answer["status"] == {"phase": "Waiting", "reason": "NoFit", "message": "no room", "waitingSince": CREATED}
    assert why(cluster, "train-3f9c")["group"] == "train"


def test_a_name_of_nothing_is_no_group():
    index = read_cluster(FakeKube([node("a"), *waiting("train", 1)]), ["team"]).index()
    views = index.pending({}, NOW).views
    assert explain.find_group(index, views, "team", "gang/train-0") is None
    assert explain.find_group(index, views, "other", "train-0") is None
    assert explain.find_group(index, views, "team", "pod/train") is None


def test_the_events_shown_are_the_newest_oldest_first():
    events = [{"type": "Normal", "reason": f"R{i}", "message": f"m{i}", "lastTimestamp": f"2025-01-01T00:0{i}:00Z",
               "involvedObject": {"kind": "Gang", "name": "train"}} for i in range(9, -1, -1)]
    answer = why([node("a"), *waiting("train", 1)], "train-0", events=events)
    assert [e["reason"] for e in answer["events"]] == [f"R{i}" for i in range(2, 10)]
    assert answer["events"][0]["object"] == "Gang/train"


def test_the_policy_it_plans_with_is_the_controllers():
    cluster = [node("a"), *running("busy", ["a"]), *waiting("first", 1), *waiting("train", 1, gpus=0)]
    strict = explain.Planning(QueuePolicy(Order.STRICT_FIFO))
    assert why(cluster, "train-0")["verdict"] == "Fits"
    assert why(cluster, "train-0", planning=strict)["reason"] == "behind team/first in StrictFIFO order"
