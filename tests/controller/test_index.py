"""The incremental index agrees with a rebuild from scratch, and passes on it decide like full passes."""

import random

import jsonpatch
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper import names
from gangkeeper.controller.cache.groups import GANGS, PYTORCHJOBS, Workloads
from gangkeeper.controller.cache.index import PODS, ClusterIndex
from gangkeeper.controller.cache.occupancy import RESOURCE_SLICES
from gangkeeper.controller.deciding.memory import Memory
from gangkeeper.controller.deciding.patches import release_patch
from gangkeeper.controller.deciding.reconciler import reconcile
from gangkeeper.controller.deciding.settings import Settings
from gangkeeper.controller.reading.nodes import node_from_api
from gangkeeper.controller.reading.pods import pod_facts
from gangkeeper.controller.reading.workloads import workload_from_api
from tests.controller.builders import node_object
from tests.controller.world import NS, World, booked, member_object

OPS = st.lists(st.tuples(st.sampled_from(["add", "reserve", "bind", "finish", "delete", "regroup", "node", "book",
                                          "unbook"]),
                         st.integers(0, 11), st.integers(0, 3)), max_size=40)
BOOKING_GANG = (GANGS, NS, "bookings")
OTHER_GANG = (GANGS, NS, "another")  # a second Gang naming the same pods (its group moved to it)


def pod_variant(index: int, variant: int, rv: int) -> dict:
    """Pods that cover what the index tells apart: namespaces, groups, gated, reserved, bound, terminal."""
    name = f"p{index}"
    namespace = NS if index % 3 else "other"
    pod = member_object(name, group=f"g{variant % 2}", namespace=namespace, gpus=(0, 2, 4, 8)[variant])
    if variant == 1:
        pod["metadata"]["annotations"][names.RESERVED_NODE_ANNOTATION] = f"n{index % 3}"
    elif variant >= 2:
        pod["spec"].pop("schedulingGates")
        pod["spec"]["nodeName"] = f"n{index % 3}"
        pod["status"]["phase"] = "Running" if variant == 2 else "Succeeded"
        if index % 4 == 0:
            del pod["metadata"]["labels"][names.GROUP_LABEL]
    pod["metadata"]["resourceVersion"] = str(rv)
    return pod


def gang_booking(reservations: dict, rv: int, gang=BOOKING_GANG):
    """A Gang whose status reserves nodes for pods: name → (uid, node)."""
    return workload_from_api(GANGS, {
        "metadata": {"name": gang[2], "namespace": NS, "resourceVersion": str(rv)}, "spec": {"minCount": 1},
        "status": {"reservations": {name: {"uid": uid, "node": node} for name, (uid, node) in reservations.items()}}})


def replay(ops) -> tuple[ClusterIndex, dict, dict, dict]:
    """Apply the operations one by one to an index; return it with the final pods, nodes and workloads."""
    index = ClusterIndex(namespace=NS)
    pods, nodes, workloads = {}, {}, {}
    booked = {BOOKING_GANG: {}, OTHER_GANG: {}}
    for rv, (op, which, variant) in enumerate(ops, start=1):
        key = f"{NS if which % 3 else 'other'}/p{which}"
        if op in ("book", "unbook"):  # a Gang's reservation for a pod: for it (its uid) or for another of its name
            gang = BOOKING_GANG if variant < 2 else OTHER_GANG
            if op == "book":
                booked[gang][f"p{which}"] = (f"uid-{NS}-p{which}" if variant != 2 else "uid-gone", f"n{variant % 3}")
            else:
                booked[gang].pop(f"p{which}", None)
            workloads[gang] = gang_booking(booked[gang], rv, gang)
            index.apply([(GANGS, gang, workloads[gang])])
        elif op == "delete":
            pods.pop(key, None)
            index.apply([(PODS, key, None)])
        elif op == "node":
            nodes[f"n{which % 3}"] = node_from(which % 3, gpus=(8, 4, 0, 16)[variant])
            index.apply([("nodes", f"n{which % 3}", nodes[f"n{which % 3}"])])
        else:
            variant = {"add": 0, "reserve": 1, "bind": 2, "finish": 3, "regroup": variant}[op]
            facts = pod_facts(pod_variant(which, variant, rv))
            if facts is None:
                pods.pop(key, None)
            else:
                pods[key] = facts
            index.apply([(PODS, key, facts)])
    return index, pods, nodes, workloads


def node_from(number: int, gpus: int):
    return node_from_api(node_object(f"n{number}", gpus=gpus))


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_incremental_changes_end_where_a_rebuild_starts(ops):
    index, pods, nodes, workloads = replay(ops)
    fresh = ClusterIndex.build(pods.values(), workloads, nodes.values(), namespace=NS)
    assert index.pods == fresh.pods
    assert index.ledger.counted() == fresh.ledger.counted()
    assert all(dict(index.ledger.free(n)) == dict(fresh.ledger.free(n)) for n in nodes)
    assert index.reserved_accelerators == fresh.reserved_accelerators
    assert index._differences(fresh) == []
    groups = {v.group.key: v.group for v in index.pending({}, 0.0).views}
    assert groups == {v.group.key: v.group for v in fresh.pending({}, 0.0).views}
    assert all(key[0] == NS for key in groups), "groups only in the managed namespace"


def test_capacity_counts_pods_of_every_namespace_but_groups_only_the_managed_one():
    index = ClusterIndex(namespace=NS)
    index.apply([("nodes", "n0", node_from(0, gpus=8))])
    elsewhere = pod_variant(3, 2, 1)  # bound to n0 with 4 GPUs, in namespace "other"
    index.apply([(PODS, "other/p3", pod_facts(elsewhere)), (PODS, "other/p2", pod_facts(member_object(
        "p2", namespace="other")))])
    assert index.ledger.free("n0")["nvidia.com/gpu"] == 4
    assert index.pending({}, 0.0).views == ()


def test_an_older_version_never_replaces_a_newer_one_and_a_deletion_is_not_undone():
    index = ClusterIndex()
    pod = member_object("p0")
    new, old = dict(pod, metadata={**pod["metadata"], "resourceVersion": "9"}), \
        dict(pod, metadata={**pod["metadata"], "resourceVersion": "5"})
    index.apply([(PODS, f"{NS}/p0", pod_facts(new)), (PODS, f"{NS}/p0", pod_facts(old))])
    assert index.pods[f"{NS}/p0"].resource_version == "9"
    index.apply([(PODS, f"{NS}/p0", None), (PODS, f"{NS}/p0", pod_facts(new))])
    assert f"{NS}/p0" not in index.pods, "the answer to a write made before the deletion came late"


def test_the_version_moves_with_every_change_applied_and_not_with_one_that_changes_nothing():
    index = ClusterIndex()
    index.apply([("nodes", "n0", node_from(0, gpus=8))])
    seen = index.version
    index.apply([("nodes", "n0", node_from(0, gpus=8))])  # a heartbeat: the same node
    assert index.version == seen
    pod = member_object("p0")
    pod["metadata"]["resourceVersion"] = "5"
    index.apply([(PODS, f"{NS}/p0", pod_facts(pod))])
    assert index.version > seen
    seen = index.version
    index.apply([(PODS, f"{NS}/p0", pod_facts(pod))])  # the watch repeating what the index has
    assert index.version == seen
    index.apply([(PODS, f"{NS}/p0", None)])
    assert index.version > seen
    seen = index.version
    index.apply([("nodes", "n0", node_from(0, gpus=4))])
    assert index.version > seen
    seen = index.version
    index.apply([(RESOURCE_SLICES, "slice-0", None)])  # devices: whatever they were
    assert index.version > seen


def test_a_pass_plans_again_what_a_change_since_the_last_one_may_let_in():
    index = ClusterIndex()
    index.apply([("nodes", "n0", node_from(0, gpus=8))])
    running = member_object("running", group="busy", min_count=1, gpus=8)
    running["spec"].pop("schedulingGates")
    running["spec"]["nodeName"], running["status"]["phase"] = "n0", "Running"
    waiting = member_object("w0", group="waiting", min_count=1, gpus=8)
    index.apply([(PODS, f"{NS}/running", pod_facts(running)), (PODS, f"{NS}/w0", pod_facts(waiting))])
    first = reconcile(index, Memory(), 100.0)
    assert index.planned is not None and not booked(first)
    again = reconcile(index, first.memory, 101.0)
    assert not booked(again), "nothing changed: still no room"
    index.apply([(PODS, f"{NS}/running", None)])  # n0 is free now
    freed = reconcile(index, again.memory, 102.0)
    assert [(b.pod, b.node) for b in booked(freed)] == [("w0", "n0")]


def test_applying_changes_holds_the_garbage_collector_off_and_leaves_it_as_it_found_it():
    import gc

    from gangkeeper.controller.reading.informer import uncollected

    assert gc.isenabled()
    with uncollected():
        assert not gc.isenabled()
        with uncollected():
            assert not gc.isenabled()
        assert not gc.isenabled(), "an inner hold does not end the outer one"
    assert gc.isenabled()
    ClusterIndex().apply([("nodes", "n0", node_from(0, gpus=8))])
    assert gc.isenabled()
    gc.disable()
    try:
        ClusterIndex().apply([("nodes", "n0", node_from(0, gpus=8))])
        assert not gc.isenabled(), "off it was, off it stays"
    finally:
        gc.enable()


def test_a_gang_status_write_regroups_nothing_but_a_new_min_count_does():
    index = ClusterIndex()
    index.apply([(PODS, f"{NS}/p0", pod_facts(member_object("p0")))])
    index.pending({}, 0.0)
    gang = {"metadata": {"name": "g", "namespace": NS}, "spec": {"minCount": 2}}
    index.apply([(GANGS, f"{NS}/g", workload_from_api(GANGS, gang))])
    assert [v.group.min_count for v in index.pending({}, 0.0).views] == [2]
    index.apply([(GANGS, f"{NS}/g", workload_from_api(GANGS, {**gang, "status": {"phase": "Waiting"}}))])
    assert index._dirty == set()
    unrelated = {"metadata": {"name": "other", "namespace": NS}, "spec": {}}
    index.apply([(PYTORCHJOBS, f"{NS}/other", workload_from_api(PYTORCHJOBS, unrelated))])
    assert index._dirty == set()


def test_a_rebuild_reports_drift_and_keeps_writes_the_caches_have_not_seen():
    index = ClusterIndex()
    index.apply([("nodes", "n0", node_from(0, gpus=8))])
    reserved, bound = pod_variant(1, 1, 5), pod_variant(2, 2, 6)
    index.apply([(PODS, f"{NS}/p1", pod_facts(reserved)), (PODS, f"{NS}/p2", pod_facts(bound))])
    cache = {f"{NS}/p1": pod_facts(reserved), f"{NS}/p2": pod_facts(bound)}
    ahead = pod_variant(1, 1, 9)  # the API's answer to our write, not in the cache yet
    index.apply([(PODS, f"{NS}/p1", pod_facts(ahead))])
    fresh, differences = index.rebuilt_from(cache.values(), [], [node_from(0, gpus=8)])
    assert differences == [] and fresh.pods[f"{NS}/p1"].resource_version == "9"
    index.ledger.forget(pod_facts(bound).member.uid)  # a bookkeeping bug
    _, differences = index.rebuilt_from(cache.values(), [], [node_from(0, gpus=8)])
    assert [d.split(" on ")[0] for d in differences] == ["ledger differs"]


# --- passes on the index decide exactly what full passes decide -----------------------------------

def scenario(seed: int, passes: int = 60):
    """Groups arrive (some in parts), members bind or not, finish, disappear; nodes come and go."""
    rng = random.Random(seed)
    world = World([node_object(f"n{i}", gpus=8) for i in range(4)])
    pending_members: list[dict] = []
    for step in range(passes):
        roll = rng.random()
        if roll < 0.3:
            size, gpus = rng.choice((1, 2, 3, 4)), rng.choice((2, 4, 8))
            owner = ("Job", f"j{step}") if rng.random() < 0.5 else None
            members = [member_object(f"s{step}-{i}", group=f"s{step}", min_count=size, gpus=gpus, owner=owner,
                                     timeout=rng.choice((None, 30))) for i in range(size)]
            cut = rng.randint(1, size)
            for pod in members[:cut]:
                world.add(pod)
            pending_members += members[cut:]
        elif roll < 0.45 and pending_members:
            world.add(pending_members.pop(0))
        elif roll < 0.6:
            running = [k for k, p in world.pods.items() if p["status"]["phase"] == "Running"]
            if running:
                world.finish(rng.choice(running), rng.choice(("Succeeded", "Failed")))
        elif roll < 0.65 and world.pods:
            world.delete(rng.choice(sorted(world.pods)))
        elif roll < 0.7:
            world.node(f"n{rng.randint(0, 5)}", gpus=rng.choice((4, 8)))
        if rng.random() < 0.7:
            world.bind()
        yield world, rng.choice((1.0, 10.0, 200.0))


def test_passes_on_the_index_decide_what_full_passes_decide():
    policy_settings = Settings(bind_timeout_seconds=120.0)
    for seed in range(6):
        index, full_memory, memory, now = ClusterIndex(), Memory(), Memory(), 1_800_000_000.0
        for step, (world, elapsed) in enumerate(scenario(seed)):
            full = reconcile(world.index(), full_memory, now, policy_settings)
            index.apply(world.take_changes())
            incremental = reconcile(index, memory, now, policy_settings)
            where = f"seed {seed}, step {step}"
            assert incremental.actions == full.actions, where
            assert incremental.phases == full.phases, where
            assert incremental.reserved_accelerators == full.reserved_accelerators, where
            full_memory, memory = full.memory, incremental.memory
            world.apply(full.actions)
            now += elapsed


# --- what is gone leaves nothing behind ------------------------------------------------------------

def test_gangs_deleted_leave_no_entry_in_the_lookup_by_group():
    workloads = Workloads()
    gangs = [workload_from_api(GANGS, {"metadata": {"name": f"gang-{i}", "namespace": NS},
                                       "spec": {"minCount": 2, "groupName": f"g{i}"}}) for i in range(500)]
    for gang in gangs:
        workloads.put((GANGS, NS, gang.name), gang)
    twin = workload_from_api(GANGS, {"metadata": {"name": "twin", "namespace": NS},
                                     "spec": {"minCount": 2, "groupName": "g0"}})
    workloads.put((GANGS, NS, "twin"), twin)
    for gang in gangs:
        workloads.put((GANGS, NS, gang.name), None)
    assert workloads.gang_declaring(NS, "g0") == twin, "another Gang declaring the group is still found"
    workloads.put((GANGS, NS, "twin"), None)
    assert len(workloads) == 0 and workloads._gangs == {}, "an entry per group ever seen is a leak"


def test_groups_that_came_and_went_leave_nothing_in_the_index_or_the_memory():
    """Many groups through their whole life: gated, reserved, released, bound, finished, deleted
    (their Gangs with them). Afterwards the index and the memory hold what they started with."""
    world = World([node_object(f"n{i}", gpus=8) for i in range(2)])
    index, memory, now = ClusterIndex(namespace=NS), Memory(), 1_800_000_000.0

    def run_pass():
        nonlocal memory, now
        index.apply(world.take_changes())
        outcome = reconcile(index, memory, now)
        memory, now = outcome.memory, now + 1.0
        world.apply(outcome.actions)
        world.bind()
        return outcome

    for batch in range(10):
        groups = [f"b{batch}-g{i}" for i in range(4)]
        for group in groups:
            for member in range(4):
                world.add(member_object(f"{group}-{member}", group=group, min_count=4, gpus=1))
        for _ in range(4):
            run_pass()
        assert all(world.gang(group) is not None for group in groups), "every group got its Gang"
        for key in list(world.pods):
            world.finish(key)
        run_pass()
        for key in list(world.pods):
            world.delete(key)
        for _ in range(2):
            run_pass()
    assert world.pods == {} and world.workloads == {}, "pods deleted, their Gangs deleted by the controller"
    assert index.pods == {} and len(index.workloads) == 0 and index.workloads._gangs == {}
    assert (index._buckets, index._views, index._settled, index._unsettled, index._dirty, index._gone,
            index._dependents, index._dependencies) == ({}, {}, {}, set(), set(), set(), {}, {})
    assert index.ledger.counted() == {} and index.reserved_accelerators == 0
    assert all(len(getattr(memory, name)) == 0 for name in memory.__dataclass_fields__), memory


# --- reservations held on a Gang ------------------------------------------------------------------

def booking_index(*pods: dict) -> ClusterIndex:
    for pod in pods:
        pod["metadata"]["resourceVersion"] = "1"
    index = ClusterIndex()
    index.apply([("nodes", "n0", node_from(0, gpus=8))])
    index.apply([(PODS, f"{NS}/{pod['metadata']['name']}", pod_facts(pod)) for pod in pods])
    return index


def reserved_nodes(index: ClusterIndex) -> dict[str, str | None]:
    return {key.split("/")[1]: facts.member.reserved_node for key, facts in sorted(index.pods.items())}


def test_a_gangs_reservations_book_the_very_pods_they_name_once_they_arrive():
    index = booking_index(member_object("p0", gpus=4), member_object("p1", gpus=4))
    index.pending({}, 0.0)
    index.apply([(GANGS, BOOKING_GANG, gang_booking({"p0": (f"uid-{NS}-p0", "n0"), "p1": ("uid-gone", "n0")}, 5))])
    assert reserved_nodes(index) == {"p0": "n0", "p1": None}, "an entry for another pod of the name books nothing"
    assert index.ledger.free("n0")["nvidia.com/gpu"] == 4 and index.reserved_accelerators == 4
    assert {key[1] for key in index._dirty} == {"g"}, "the group is decided again"
    index.apply([(GANGS, BOOKING_GANG, gang_booking({}, 3))])
    assert reserved_nodes(index)["p0"] == "n0", "an older version of the Gang (a late watch event) undoes nothing"
    index.apply([(GANGS, BOOKING_GANG, gang_booking({}, 6))])
    assert reserved_nodes(index)["p0"] is None and index.ledger.free("n0")["nvidia.com/gpu"] == 8
    assert index.reserved_accelerators == 0
    later = booking_index()  # the Gang first (a relist), its members after
    later.apply([(GANGS, BOOKING_GANG, gang_booking({"p0": (f"uid-{NS}-p0", "n0")}, 5))])
    later.apply([(PODS, f"{NS}/p0", pod_facts(member_object("p0", gpus=4)))])
    assert reserved_nodes(later) == {"p0": "n0"} and later.ledger.free("n0")["nvidia.com/gpu"] == 4


def test_a_released_member_is_booked_by_its_pin_and_a_gang_deleted_books_nothing_more():
    index = booking_index(member_object("p0", gpus=4), member_object("p1", gpus=4))
    both = {"p0": (f"uid-{NS}-p0", "n0"), "p1": (f"uid-{NS}-p1", "n0")}
    index.apply([(GANGS, BOOKING_GANG, gang_booking(both, 5))])
    pod = member_object("p0", gpus=4)
    pod["metadata"]["resourceVersion"] = index.pods[f"{NS}/p0"].resource_version
    released = jsonpatch.apply_patch(pod, list(release_patch(index.pods[f"{NS}/p0"], "n0", 1.0)))
    released["metadata"]["resourceVersion"] = "7"
    index.apply([(PODS, f"{NS}/p0", pod_facts(released))])
    assert reserved_nodes(index) == {"p0": "n0", "p1": "n0"} and index.ledger.free("n0")["nvidia.com/gpu"] == 0
    index.apply([(GANGS, BOOKING_GANG, None)])
    assert reserved_nodes(index) == {"p0": "n0", "p1": None}, "the pin stays; the gated member waits again"


def test_a_rebuild_keeps_the_gang_reservations_the_caches_have_not_seen():
    pods = [member_object("p0", gpus=4)]
    index = booking_index(*pods)
    ours = gang_booking({"p0": (f"uid-{NS}-p0", "n0")}, 8)  # our write's answer: the Gang created with it
    index.apply([(GANGS, BOOKING_GANG, ours)])
    fresh, differences = index.rebuilt_from([pod_facts(p) for p in pods], [], [node_from(0, gpus=8)],
                                            assumed=[(GANGS, BOOKING_GANG, ours)])
    assert differences == [] and reserved_nodes(fresh) == {"p0": "n0"}, "in no cache yet, and kept"
    newer = gang_booking({}, 9)  # the caches are ahead of the answer: they win
    fresh, _ = index.rebuilt_from([pod_facts(p) for p in pods], [newer], [node_from(0, gpus=8)],
                                  assumed=[(GANGS, BOOKING_GANG, ours)])
    assert reserved_nodes(fresh) == {"p0": None}


def test_a_pod_two_gangs_name_is_booked_alike_however_their_news_arrives():
    index = booking_index(member_object("p0", gpus=4))
    entry = {"p0": (f"uid-{NS}-p0", "n0")}
    index.apply([(GANGS, BOOKING_GANG, gang_booking(entry, 5)),
                 (GANGS, OTHER_GANG, gang_booking(entry, 6, OTHER_GANG))])
    index.apply([(GANGS, OTHER_GANG, gang_booking({}, 7, OTHER_GANG))])
    assert reserved_nodes(index) == {"p0": "n0"}, "the other Gang still books it"
    fresh = ClusterIndex.build([index._own(key, facts) for key, facts in index.pods.items()], index.workloads,
                               [node_from(0, gpus=8)])
    assert index._differences(fresh) == []
