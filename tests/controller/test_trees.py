"""Trees of groups (issue 25): a parent Gang's children planned, admitted, released and rolled back
as one, each inside the parent's domain; a tree's shape checked; the parent's status."""

from collections import Counter

import pytest

from gangkeeper import names
from gangkeeper.controller.cache.groups import GANGS, JOBS, JOBSETS, Workloads, build_groups
from gangkeeper.controller.cache.holders import holders
from gangkeeper.controller.cache.trees import INVALID_TREE, PARENT_HAS_NO_MEMBERS, tree_problem
from gangkeeper.controller.deciding.decisions import DeletePod, GangEvent, Release, ReserveGroup, SaveGang
from gangkeeper.controller.deciding.gangs import gang_body
from gangkeeper.controller.deciding.reconciler import reconcile
from gangkeeper.controller.deciding.settings import Settings
from gangkeeper.controller.model.members import TopologyRule, group_of
from gangkeeper.controller.planning.plans import NoFit, Plan
from gangkeeper.controller.planning.preemption import preempt
from gangkeeper.controller.planning.queue import plan_pass
from gangkeeper.controller.planning.trees import Tree, plan_tree, tree_key
from gangkeeper.controller.reading.pods import pod_facts
from gangkeeper.controller.reading.workloads import workload_from_api
from tests.controller.builders import busy, cluster, member, node, node_object, pod_object, replace
from tests.controller.world import NS, Run, World, add_group, booked, member_object, nodes, of, reports

ZONE = "topology.kubernetes.io/zone"
RACK = "example.com/rack"
BLOCK = "cloud.google.com/gce-topology-block"


def child(name, size, rule=TopologyRule(), gpus=8, first_seen=0.0, **pod):
    members = [replace(member(f"{name}-{i}", gpus=gpus, **pod), rank=(i,)) for i in range(size)]
    return replace(group_of(("team", name), members, size, first_seen), topology=rule)


def tree(children, min_group_count=None, rule=TopologyRule(), name="pair"):
    return Tree(tree_key("team", name), name, min_group_count or len(children), tuple(children), rule)


def racks(zones, per_rack=2):
    """Nodes of 8 GPUs, `per_rack` a rack, from {zone: racks}: named zone-r<i>-<j>."""
    return [node(f"{zone}-r{r}-{j}", zone=zone, labels={RACK: f"{zone}-r{r}"})
            for zone, count in zones.items() for r in range(count) for j in range(per_rack)]


def where(plan, pool, label):
    assert isinstance(plan, Plan), plan
    return Counter(pool.nodes[node_name].labels[label] for _, node_name in plan.assignments)


# --- planning ---------------------------------------------------------------------------------

def test_a_tree_that_fits_only_in_the_zone_with_four_free_racks_goes_there_one_child_a_rack():
    nodes_ = racks({"a": 4, "b": 4})
    pool, ledger = cluster(nodes_, bound=[busy("a-r0-0", 8)])  # zone a has 3 whole racks free
    children = [child(f"job{i}", 2, TopologyRule(required=RACK)) for i in range(4)]
    plan = plan_tree(tree(children, 4, TopologyRule(required=ZONE)), pool, ledger)
    assert where(plan, pool, ZONE) == {"b": 8}
    per_child = {c.key[1]: {pool.nodes[n].labels[RACK] for m, n in plan.assignments if m.name.startswith(c.key[1])}
                 for c in children}
    assert all(len(rack) == 1 for rack in per_child.values())
    assert len(set().union(*per_child.values())) == 4


def test_a_tree_three_of_whose_four_children_fit_places_nothing():
    pool, ledger = cluster(racks({"a": 3}))
    free_before = {name: dict(ledger.free(name)) for name in pool.nodes}
    children = [child(f"job{i}", 2, TopologyRule(required=RACK)) for i in range(4)]
    outcome = plan_tree(tree(children, 4, TopologyRule(required=ZONE)), pool, ledger)
    assert isinstance(outcome, NoFit)
    assert "needs 64 nvidia.com/gpu for 4 of its children in one zone; a: 48 free" in outcome.reason
    assert {name: dict(ledger.free(name)) for name in pool.nodes} == free_before
    queue = plan_pass([tree(children, 4, TopologyRule(required=ZONE))], pool, ledger, now=0.0)
    assert not queue.admitted and queue.waiting[0].no_fit is not None


def test_children_that_fit_apart_but_not_together_in_one_zone_wait():
    pool, ledger = cluster(racks({"a": 1, "b": 1}))  # 16 GPUs a zone
    outcome = plan_tree(tree([child("prefill", 2), child("decode", 2)], 2, TopologyRule(required=ZONE)), pool, ledger)
    assert isinstance(outcome, NoFit) and "needs 32 nvidia.com/gpu for 2 of its children in one zone" in outcome.reason


def test_a_tree_without_a_rule_of_its_own_is_all_or_nothing_across_the_cluster():
    pool, ledger = cluster(racks({"a": 1}, per_rack=3))  # 24 GPUs
    fits = plan_tree(tree([child("prefill", 1), child("decode", 2)]), pool, ledger)
    assert isinstance(fits, Plan) and len(fits.assignments) == 3
    too_big = plan_tree(tree([child("prefill", 2), child("decode", 2)]), pool, ledger)
    assert isinstance(too_big, NoFit)
    assert too_big.reason.startswith("tree pair: 1 of min group count 2 children fit together; prefill: 1 of 2 waiting members placeable")


def test_children_beyond_min_group_count_come_along_when_they_fit_and_are_not_needed():
    pool, ledger = cluster(racks({"a": 1}, per_rack=2))
    plan = plan_tree(tree([child("c0", 1), child("c1", 1), child("c2", 1)], 2), pool, ledger)
    assert isinstance(plan, Plan) and len(plan.assignments) == 2


def test_children_reserved_before_hold_the_domain_the_rest_go_to():
    pool, ledger = cluster(racks({"a": 2, "b": 4}))
    held = child("prefill", 2)
    held = replace(held, members=tuple(replace(m, reserved_node=f"a-r0-{i}") for i, m in enumerate(held.members)))
    for m in held.members:
        ledger.reserve(m.uid, m.reserved_node, m.requests)
    plan = plan_tree(tree([held, child("decode", 2)], 2, TopologyRule(required=ZONE)), pool, ledger)
    assert where(plan, pool, ZONE) == {"a": 2}


def test_a_tree_within_a_tree_keeps_to_its_grandparents_domain():
    pool, ledger = cluster(racks({"a": 3, "b": 3}, per_rack=1), bound=[busy("a-r0-0", 8), busy("a-r1-0", 8)])
    inner = tree([child("x", 1, TopologyRule(required=RACK)), child("y", 1, TopologyRule(required=RACK))], 2,
                 name="inner")
    outer = tree([inner, child("z", 1)], 2, TopologyRule(required=ZONE), name="outer")
    assert where(plan_tree(outer, pool, ledger), pool, ZONE) == {"b": 3}


# --- preemption ----------------------------------------------------------------------------------

def running(group, nodes_):
    return replace(group, members=tuple(replace(m, node=n, gated=False, phase="Running")
                                        for m, n in zip(group.members, nodes_)))


def test_a_tree_preempts_as_one_and_is_preempted_as_one():
    pool, ledger = cluster(racks({"a": 1}, per_rack=3))
    low = [running(child("prefill", 1, priority=0), ["a-r0-0"]), running(child("decode", 2, priority=0),
                                                                         ["a-r0-1", "a-r0-2"])]
    for group in low:
        for m in group.members:
            ledger.bind(m.uid, m.node, m.requests)
    candidates = holders(low, [], ledger, trees={g.key: "pair" for g in low})
    assert [(c.name, len(c.members)) for c in candidates] == [("team/pair (tree of decode, prefill)", 3)]
    urgent = child("urgent", 1, priority=10)
    found = preempt(urgent, candidates, pool, ledger)
    assert found is not None and len(found.victims[0].members) == 3, "one node's worth, yet the whole tree"
    high = tree([child("a", 1, priority=10), child("b", 2, priority=10)], name="high")
    by_tree = preempt(high, candidates, pool, ledger)
    assert by_tree is not None and len(by_tree.plan.assignments) == 3


# --- the shape of a tree ----------------------------------------------------------------------

def gang_object(name, spec):
    return {"metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"}, "spec": spec}


def gangs(*objects):
    workloads = Workloads()
    for obj in objects:
        workloads.put((GANGS, NS, obj["metadata"]["name"]), workload_from_api(GANGS, obj))
    return workloads


PARENT = gang_object("pair", {"minGroupCount": 2, "topology": {"required": ZONE}})
PREFILL = gang_object("prefill", {"minCount": 2, "parent": "pair"})
DECODE = gang_object("decode", {"minCount": 4, "parent": "pair"})


@pytest.mark.parametrize("objects, said", [
    ([PARENT, PREFILL, DECODE], None),
    ([PREFILL], 'Gang prefill: spec.parent: "pair" names no Gang in namespace team'),
    ([gang_object("pair", {"minCount": 2}), PREFILL],
     'Gang prefill: spec.parent: "pair" names Gang pair, which has no spec.minGroupCount: accepted: a parent Gang'),
    ([PARENT, PREFILL], "Gang pair: spec.minGroupCount: 2 is not accepted: 1 Gang names it in spec.parent (prefill): "
                        "write a whole number from 1 to 1"),
    ([gang_object("pair", {"minGroupCount": 1, "parent": "top"}), gang_object("top", {"minGroupCount": 1,
                                                                                       "parent": "pair"}), PREFILL],
     'Gang top: spec.parent: "pair" makes a cycle (prefill → pair → top → pair)'),
    ([gang_object(f"p{i}", {"minGroupCount": 1, **({"parent": f"p{i + 1}"} if i < 4 else {})}) for i in range(5)]
     + [gang_object("prefill", {"minCount": 2, "parent": "p0"})],
     'Gang p2: spec.parent: "p3" makes a tree deeper than 4 levels (prefill → p0 → p1 → p2 → p3)'),
    ([gang_object("pair", {"minGroupCount": 1, "topology": {"required": BLOCK}}),
      gang_object("prefill", {"minCount": 2, "parent": "pair", "topology": {"required": ZONE}})],
     f'Gang prefill: spec.topology.required: "{ZONE}" is coarser than its parent pair\'s spec.topology.required '
     f'"{BLOCK}": accepted: {BLOCK} or a finer label'),
])
def test_a_trees_shape_is_checked_at_the_field(objects, said):
    workloads = gangs(*objects)
    problem = tree_problem(workloads.gang(NS, "prefill"), workloads)
    assert problem == said if said is None else problem.startswith(said), problem


def test_pods_labelled_into_a_parent_or_a_child_of_a_broken_tree_wait_saying_why():
    workloads = gangs(PARENT, PREFILL)
    pods = [pod_facts(member_object(f"{group}-0", group=group)) for group in ("pair", "prefill")]
    views = {view.group.key[1]: view for view in build_groups(pods, workloads, {}, 0.0)}
    assert views["pair"].problem[0] == PARENT_HAS_NO_MEMBERS and "its children" in views["pair"].problem[1]
    assert views["prefill"].problem[0] == INVALID_TREE and "spec.minGroupCount: 2" in views["prefill"].problem[1]


# --- the pass -------------------------------------------------------------------------------------

def pair_world(node_count):
    world = World(nodes(node_count))
    for obj in (PARENT, PREFILL, DECODE):
        world.put_workload(GANGS, {**obj, "spec": {k: v for k, v in obj["spec"].items() if k != "topology"}})
    add_group(world, "prefill", 2)
    return world


def test_an_inference_pair_is_reserved_and_released_together_or_not_at_all():
    world = pair_world(4)  # room for 4 of the 6 pods
    run = Run(world)
    first = run.step()
    assert not booked(first)  # decode has no pods yet: prefill waits for it
    assert "waiting for decode (0/4 pods)" in world.gang("prefill")["status"]["conditions"][0]["message"]
    add_group(world, "decode", 4)
    second = run.step()
    assert not booked(second) and "tree pair: " in world.gang("decode")["status"]["conditions"][0]["message"]
    status = world.gang("pair")["status"]
    assert status["phase"] == "Waiting" and status["minCount"] == 2 and status["present"] == 2
    assert status["children"] == [{"name": "decode", "present": 4, "minCount": 4, "placed": 0},
                                  {"name": "prefill", "present": 2, "minCount": 2, "placed": 0}]
    world.node("n4")
    world.node("n5")
    third = run.step()
    assert Counter(b.group[1] for b in booked(third)) == {"prefill": 2, "decode": 4}
    assert len(of(run.step(), Release)) == 6
    run.world.bind()
    run.step()
    assert world.gang("pair")["status"]["phase"] == "Running"
    assert [c["placed"] for c in world.gang("pair")["status"]["children"]] == [4, 2]


def test_a_child_reserved_without_the_rest_of_its_tree_is_not_released():
    world = pair_world(6)
    add_group(world, "decode", 4)
    run = Run(world)
    outcome = reconcile(world.index(), run.memory, run.now)
    world.apply([a for a in outcome.actions if not (isinstance(a, ReserveGroup) and a.name == "decode")])
    run.memory, run.now = outcome.memory, run.now + 1  # decode's reservations never landed
    again = run.step()
    assert "reserved with tree pair" in world.gang("prefill")["status"]["conditions"][0]["message"]
    assert not of(again, Release)
    assert Counter(b.group[1] for b in booked(again)) == {"decode": 4}
    assert len(of(run.step(), Release)) == 6


def test_a_child_rolled_back_takes_its_tree_with_it():
    world = pair_world(6)
    add_group(world, "decode", 4)
    run = Run(world)
    run.step()
    run.step(bind=True)
    world.delete(f"{NS}/decode-0")  # decode falls below its minimum, and nothing recreates the pod
    for _ in range(40):
        outcome = run.step(seconds=10)
        if outcome.rollbacks:
            break
    assert outcome.rollbacks == 2
    said = {a.group[1]: a.message for a in reports(outcome, GangEvent.ROLLED_BACK)}
    assert "rolled back with tree pair: decode was" in said["prefill"]


def test_the_parents_status_is_written_only_when_it_changes():
    world = pair_world(6)
    add_group(world, "decode", 4)
    run = Run(world)
    saves = [len([a for a in of(run.step(), SaveGang) if a.name == "pair"]) for _ in range(3)]
    assert saves[0] == 1 and saves[-1] == 0
    assert world.gang("pair")["status"]["phase"] == "Admitted"


def test_a_tree_of_higher_priority_takes_lower_work_and_is_released_once_it_is_gone():
    world = World(nodes(6))
    for obj in (PARENT, PREFILL, DECODE):
        world.put_workload(GANGS, {**obj, "spec": {k: v for k, v in obj["spec"].items() if k != "topology"}})
    for i in range(6):
        world.add(member_object(f"busy-{i}", group="busy", min_count=6, gated=False, node_name=f"n{i}",
                                phase="Running"))
    add_group(world, "prefill", 2, priority=10)
    add_group(world, "decode", 4, priority=10)
    run = Run(world)
    first = run.step()
    assert Counter(b.group[1] for b in booked(first)) == {"prefill": 2, "decode": 4}
    assert len(of(first, DeletePod, "busy")) == 6 and not of(first, Release)
    assert world.gang("decode")["status"]["reason"] == "Preempting"
    assert len(of(run.step(), Release)) == 6, "released together once the room is free"


def test_a_childs_members_placed_after_admission_stay_in_its_parents_domain():
    world = World([node_object("a-0", zone="a"), node_object("a-1", zone="a"), node_object("b-0", zone="b")])
    world.put_workload(GANGS, PARENT)
    world.put_workload(GANGS, gang_object("prefill", {"minCount": 1, "parent": "pair"}))
    world.put_workload(GANGS, gang_object("decode", {"minCount": 1, "parent": "pair"}))
    for i in range(2):
        world.add(member_object(f"prefill-{i}", group="prefill", min_count=1))
    add_group(world, "decode", 1)
    run = Run(world)
    placed = [booking for _ in range(4) for booking in booked(run.step(bind=True))]
    assert sorted(b.node for b in placed) == ["a-0", "a-1"], "room in zone b, but not in the tree's zone"


def prefill_reserved_and_decodes_room_taken() -> tuple[World, Run]:
    """The pair's prefill reserved, decode's reservation lost (its write failed), and another
    team's pods then take the room decode was to have."""
    world = pair_world(6)
    add_group(world, "decode", 4)
    run = Run(world)
    outcome = reconcile(world.index(), run.memory, run.now)
    world.apply([a for a in outcome.actions if not (isinstance(a, ReserveGroup) and a.name == "decode")])
    run.memory, run.now = outcome.memory, run.now + 1
    free = sorted({f"n{i}" for i in range(6)} - {world.reserved_node(f"prefill-{i}") for i in range(2)})
    for name in free:  # another team's pods take the room decode was to have
        world.add(pod_object(f"other-{name}", gated=False, node_name=name, phase="Running"))
    return world, run


def test_a_child_reserved_while_the_rest_of_its_tree_no_longer_fits_waits_for_it_gated():
    world, run = prefill_reserved_and_decodes_room_taken()
    again = run.step()
    assert not of(again, Release) and not booked(again)
    assert world.gang("prefill")["status"]["reason"] == "WaitingForTree"


def test_a_child_that_waits_for_its_tree_past_the_bind_timeout_is_rolled_back_with_it():
    world, run = prefill_reserved_and_decodes_room_taken()
    timeout = Settings().bind_timeout_seconds
    waited = run.step(seconds=timeout - 1)
    assert not waited.rollbacks and world.gang("prefill")["status"]["reason"] == "WaitingForTree"
    assert waited.next_due == run.now + 1, "the runner wakes when the wait runs out"
    assert not run.step().rollbacks, "a second short of the bind timeout: it may still wait"
    rolled = run.step()
    assert rolled.rollbacks == 1 and not of(rolled, Release)
    (said,) = [a.message for a in reports(rolled, GangEvent.ROLLED_BACK)]
    assert f"reserved for {timeout:g}s while tree pair could not place the rest of its children" in said


# --- a parent named by a label (stage 2) ------------------------------------------------------------

def labelled(name, group, parent):
    pod = member_object(name, group=group, min_count=2)
    if parent is not None:
        pod["metadata"]["labels"][names.PARENT_LABEL] = parent
    return pod_facts(pod)


def test_members_naming_a_parent_by_label_make_a_child_whose_gang_names_it():
    (view,) = build_groups([labelled(f"decode-{i}", "decode", "pair") for i in range(2)], gangs(PARENT), {}, 0.0)
    assert view.problem is None and view.parent == "pair"
    assert gang_body(view, "decode")["spec"] == {"minCount": 2, "groupName": "decode", "parent": "pair"}


@pytest.mark.parametrize("parents, gang_spec, said", [
    (["pair", None], None, "label gangkeeper.io/parent disagrees (decode-1 say (none), decode-0 say pair): give the "
                                 "members and their owner one parent, or none"),
    (["pair", "pair"], {"minCount": 2}, "label gangkeeper.io/parent=pair and Gang decode's spec.parent (unset) "
                                        "disagree: set spec.parent: pair on Gang decode, or remove the label"),
])
def test_members_and_their_gang_that_name_different_parents_wait(parents, gang_spec, said):
    objects = [PARENT] + ([gang_object("decode", gang_spec)] if gang_spec else [])
    pods = [labelled(f"decode-{i}", "decode", parent) for i, parent in enumerate(parents)]
    (view,) = build_groups(pods, gangs(*objects), {}, 0.0)
    assert view.problem == ("Disagreement", said)


def test_a_workload_labelled_with_a_parent_names_its_groups_parent():
    job = {"metadata": {"name": "decode", "namespace": NS, "labels": {names.PARENT_LABEL: "pair"}},
           "spec": {"parallelism": 4, "completions": 4}}
    assert workload_from_api(JOBS, job).parent == "pair"


# --- a JobSet as a tree (stage 3) -------------------------------------------------------------------

def tree_jobset_world(count=None):
    annotations = {names.TREE_ANNOTATION: names.TREE_BY_REPLICATED_JOB}
    if count is not None:
        annotations[names.MIN_GROUP_COUNT_ANNOTATION] = count
    jobset = {"metadata": {"name": "train", "uid": "js-uid", "annotations": annotations}, "spec": {
        "replicatedJobs": [{"name": part, "template": {"spec": {"parallelism": 1}}} for part in ("a", "b")]}}
    world = World(nodes(2), [(JOBSETS, jobset)])
    for part in ("a", "b"):
        pod = member_object(f"train-{part}-0", group="train-js-uid-0", source=names.SOURCE_JOBSET)
        pod["metadata"]["labels"].update({names.JOBSET_NAME_LABEL: "train", names.JOBSET_UID_LABEL: "js-uid",
                                          names.JOBSET_REPLICATED_JOB_LABEL: part})
        world.add(pod)
    return world


def test_a_jobset_tree_gets_its_parent_made_before_any_child_is_planned():
    world = tree_jobset_world()
    run = Run(world)
    first = run.step()
    assert not booked(first)
    parent = world.gang("train")
    assert parent["spec"] == {"minGroupCount": 2}
    assert parent["metadata"]["ownerReferences"][0]["uid"] == "js-uid"
    children = [g for (_, _, name), g in world.workloads.items() if name.startswith("train-")]
    assert [g["spec"]["parent"] for g in children] == ["train", "train"]
    assert Counter(b.group[1] for b in booked(run.step())) == {"train-js-uid-0/a": 1, "train-js-uid-0/b": 1}


def test_a_jobset_tree_whose_min_group_count_is_unreadable_waits_saying_so():
    world = tree_jobset_world("all")
    run = Run(world)
    assert not booked(run.step()) and world.gang("train") is None
    (child,) = [g for (_, _, name), g in world.workloads.items() if name.startswith("train-a")]
    assert child["status"]["reason"] == "InvalidTree"
    assert (f"JobSet train: metadata.annotations[{names.MIN_GROUP_COUNT_ANNOTATION}] is not accepted"
            in child["status"]["conditions"][0]["message"])
