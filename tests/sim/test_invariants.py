"""The invariant checks on plain events: each one catches what it is meant to, names what broke, and
stays quiet otherwise; and `Watch` feeds a checker from an API server."""

from gangkeeper import names
from sim.apiserver import APIServer
from sim.invariants import Checker, Watch
from sim.reservations import GANGS
from tests import builders


def node(name: str, gpus: int = 8) -> dict:
    return {"metadata": {"name": name}, "status": {"allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "64",
                                                                  "pods": "110"}}}


def pod(name: str, group: str = "g", size: int = 2, gpus: int = 4, node_name: str = "", reserved: str = "",
        phase: str = "Pending", gated: bool = False, namespace: str = "ns", pinned: str = "") -> dict:
    """A member; `pinned` is the node gangkeeper's release pins it to."""
    annotations = {names.MIN_COUNT_ANNOTATION: str(size)}
    if reserved:
        annotations[names.RESERVED_NODE_ANNOTATION] = reserved
    spec = {}
    if pinned:
        pin = {"key": names.PIN_FIELD, "operator": "In", "values": [pinned]}
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [pin]}]}}}
    return builders.pod(name, namespace=namespace, uid=f"uid-{name}",
                        labels={names.GROUP_LABEL: group} if group else {}, annotations=annotations,
                        gates=(names.SCHEDULING_GATE,) if gated else (), node_name=node_name, phase=phase,
                        gpus=gpus, requests={}, **spec)  # as stored: the API server copies the limit into the request


def gang(reservations: dict[str, str], name: str = "g", namespace: str = "ns") -> dict:
    """A Gang whose `status.reservations` book each named pod (of `pod`'s uid) on its node."""
    return {"metadata": {"name": name, "namespace": namespace},
            "status": {"reservations": {pod_name: {"uid": f"uid-{pod_name}", "node": node_name}
                                        for pod_name, node_name in reservations.items()}}}


def checker(*nodes) -> Checker:
    checker = Checker(bind_timeout=10)
    for n in nodes or (node("n1"),):
        checker.observe("nodes", "ADDED", n, 0)
    return checker


def kinds(checker: Checker) -> list[str]:
    return [v.kind for v in checker.violations]


def running(name: str, node_name: str = "n1", **fields) -> dict:
    return pod(name, node_name=node_name, reserved=node_name, phase="Running", **fields)


def a_running_pair(c: Checker, at: float, nodes: tuple[str, str] = ("n1", "n1")) -> None:
    """p0 and p1, reserved while gated, then bound and running, all at `at`."""
    for name, node_name in zip(("p0", "p1"), nodes):
        c.observe("pods", "ADDED", pod(name, reserved=node_name, gated=True), at)
    for name, node_name in zip(("p0", "p1"), nodes):
        c.observe("pods", "MODIFIED", running(name, node_name), at)


def a_running_pair_loses_a_member(c: Checker, at: float) -> None:
    """p0 and p1 run; p1 is deleted at `at` and its owner creates it again, gated."""
    a_running_pair(c, at)
    c.observe("pods", "DELETED", running("p1"), at)
    c.observe("pods", "ADDED", pod("p1", gated=True), at)


def test_a_whole_group_reserved_then_run_is_no_violation():
    c = checker()
    for i in (0, 1):
        c.observe("pods", "ADDED", pod(f"p{i}", gated=True), 1)
    for i in (0, 1):
        c.observe("pods", "MODIFIED", pod(f"p{i}", reserved="n1", gated=True), 2)
    for i in (0, 1):
        c.observe("pods", "MODIFIED", pod(f"p{i}", reserved="n1", node_name="n1"), 3)
    for i in (0, 1):
        c.observe("pods", "MODIFIED", pod(f"p{i}", reserved="n1", node_name="n1", phase="Running"), 4)
    c.finish(100)
    assert c.violations == []
    assert c.first_bound == {("ns", "g"): (2, 2)}, "both placed when the first was bound"
    assert c.held_during[("ns", "g")][0] == 6, "from the event that bound p0"


def by_role(pod_: dict) -> str:
    """`g/leader` or `g/worker`, from the pod's name: the parts of group `g`."""
    return f"g/{pod_['metadata']['name'].split('-')[0]}"


def test_parts_of_one_label_that_start_apart_are_checked_as_groups_of_their_own():
    """An LWS started LeaderReady: its leader runs alone before its workers exist, under one label."""
    c = Checker(bind_timeout=10, size_of=lambda p: 1, group_of=by_role)
    c.observe("nodes", "ADDED", node("n1"), 0)
    c.observe("pods", "ADDED", pod("leader-0", size=1, reserved="n1", gated=True), 1)
    c.observe("pods", "MODIFIED", running("leader-0", size=1), 2)
    c.observe("pods", "ADDED", pod("worker-1", size=1, gated=True), 3)
    assert c.violations == [] and c.first_bound == {("ns", "g/leader"): (1, 1)}
    whole = Checker(bind_timeout=10)
    whole.observe("nodes", "ADDED", node("n1"), 0)
    for event, state, at in (("ADDED", pod("leader-0", reserved="n1", gated=True), 1),
                             ("MODIFIED", running("leader-0"), 2), ("ADDED", pod("worker-1", gated=True), 3)):
        whole.observe("pods", event, state, at)
    assert "partial-bind" in kinds(whole), "counted as one group of two, the leader is bound in part"


def test_bound_plus_reserved_beyond_allocatable_is_over_commit():
    c = checker()
    c.observe("pods", "ADDED", pod("a", group="", size=1, gpus=6, node_name="n1", phase="Running"), 1)
    c.observe("pods", "ADDED", pod("b", group="y", size=1, gpus=4, reserved="n1", gated=True), 2)
    assert kinds(c) == ["over-commit"]
    [violation] = c.violations
    assert "nvidia.com/gpu 10 > 8" in violation.message and "ns/a, ns/b" in violation.message
    assert violation.namespaces == {"ns"} and violation.event == 3


def with_priority(obj: dict, priority: int) -> dict:
    obj["spec"]["priority"] = priority
    return obj


def test_room_held_for_a_preemptor_over_lower_priority_pods_is_no_over_commit_until_it_is_released():
    c = checker()
    c.observe("pods", "ADDED", with_priority(pod("victim", group="", size=1, gpus=8, node_name="n1",
                                                 phase="Running"), 10), 1)
    held = with_priority(pod("urgent", group="u", size=1, gpus=8, reserved="n1", gated=True), 1000)
    c.observe("pods", "ADDED", held, 2)
    assert kinds(c) == [], "the victim is on its way out"
    c.observe("pods", "MODIFIED", with_priority(pod("urgent", group="u", size=1, gpus=8, reserved="n1"), 1000), 3)
    assert kinds(c) == ["over-commit"], "released over the victim: the scheduler would refuse it"


def test_room_held_over_victims_that_do_not_go_is_over_commit_once_the_bind_timeout_is_past():
    c = checker()  # bind timeout 10
    victim = with_priority(pod("victim", group="", size=1, gpus=8, node_name="n1", phase="Running"), 10)
    c.observe("pods", "ADDED", victim, 1)
    c.observe("pods", "ADDED", with_priority(pod("urgent", group="u", size=1, gpus=8, reserved="n1", gated=True),
                                             1000), 2)
    c.observe("pods", "MODIFIED", victim, 11)
    assert kinds(c) == [], "within the bind timeout the victim may still be on its way out"
    c.observe("pods", "MODIFIED", victim, 13)
    assert kinds(c) == ["over-commit"], "room promised over a victim nobody takes away"


def test_room_held_over_a_victim_being_deleted_holds_for_as_long_as_it_takes():
    c = checker()
    victim = with_priority(pod("victim", group="", size=1, gpus=8, node_name="n1", phase="Running"), 10)
    c.observe("pods", "ADDED", victim, 1)
    c.observe("pods", "ADDED", with_priority(pod("urgent", group="u", size=1, gpus=8, reserved="n1", gated=True),
                                             1000), 2)
    victim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    c.observe("pods", "MODIFIED", victim, 60)
    assert kinds(c) == []


def test_room_held_over_a_victim_reserved_but_not_bound_yet_is_no_over_commit_while_it_goes():
    """A group preempted moments after its own reservation: its pods hold the node by their
    reservation, not by a binding, and go as a bound victim's do."""
    c = checker()  # bind timeout 10
    victim = with_priority(pod("least", group="l", size=1, gpus=8, reserved="n1", gated=True), 10)
    c.observe("pods", "ADDED", victim, 1)
    c.observe("pods", "ADDED", with_priority(pod("urgent", group="u", size=1, gpus=8, reserved="n1", gated=True),
                                             1000), 2)
    assert kinds(c) == [], "the victim is on its way out"
    c.observe("pods", "MODIFIED", victim, 13)
    assert kinds(c) == ["over-commit"], "room promised over a victim nobody takes away"


def placeholder(name: str, node_name: str, priority: int = -10) -> dict:
    """gangkeeper's placeholder for another group, bound by the scheduler."""
    obj = with_priority(pod(name, group="", size=1, gpus=8, node_name=node_name, phase="Running"), priority)
    obj["metadata"]["labels"] = {names.CAPACITY_FOR_LABEL: "other"}
    return obj


def test_a_placeholder_bound_into_room_released_to_a_member_is_no_over_commit_until_the_member_binds():
    """The swap's race: a placeholder deleted, another group's placeholder bound into its room before
    the controller sees it, a member released there, which preempts it (docs/autoscaling.md)."""
    c = checker()
    c.observe("pods", "ADDED", with_priority(pod("member", group="m", size=1, gpus=8, reserved="n1"), 0), 1)
    c.observe("pods", "ADDED", placeholder("other-placeholder", "n1"), 2)
    assert kinds(c) == [], "the member preempts the placeholder"
    c.observe("pods", "MODIFIED", with_priority(pod("member", group="m", size=1, gpus=8, node_name="n1",
                                                    reserved="n1", phase="Running"), 0), 3)
    assert kinds(c) == ["over-commit"], "both bound: the placeholder had to go first"


def test_a_bound_pod_that_is_no_placeholder_under_a_released_member_is_over_commit():
    c = checker()
    c.observe("pods", "ADDED", with_priority(pod("member", group="m", size=1, gpus=8, reserved="n1"), 0), 1)
    not_placeholder = with_priority(pod("low", group="", size=1, gpus=8, node_name="n1", phase="Running"), -10)
    c.observe("pods", "ADDED", not_placeholder, 2)
    assert kinds(c) == ["over-commit"]


def test_a_placeholder_that_outranks_the_member_reserved_there_is_counted():
    c = checker()
    c.observe("pods", "ADDED", with_priority(pod("member", group="m", size=1, gpus=8, reserved="n1"), -100), 1)
    c.observe("pods", "ADDED", placeholder("other-placeholder", "n1", priority=-10), 2)
    assert kinds(c) == ["over-commit"]


def test_room_held_over_pods_of_equal_priority_is_over_commit():
    c = checker()
    c.observe("pods", "ADDED", with_priority(pod("peer", group="", size=1, gpus=8, node_name="n1",
                                                 phase="Running"), 1000), 1)
    c.observe("pods", "ADDED", with_priority(pod("urgent", group="u", size=1, gpus=8, reserved="n1", gated=True),
                                             1000), 2)
    assert kinds(c) == ["over-commit"]


def test_a_terminal_pod_frees_its_node():
    c = checker()
    c.observe("pods", "ADDED", pod("a", group="x", size=1, gpus=6, node_name="n1", phase="Succeeded"), 1)
    c.observe("pods", "ADDED", pod("b", group="y", size=1, gpus=4, reserved="n1", gated=True), 2)
    assert c.violations == []


def test_accelerators_on_a_node_never_registered_are_over_commit():
    c = checker()
    c.observe("pods", "ADDED", pod("a", group="x", size=1, gpus=1, reserved="nowhere", gated=True), 1)
    assert kinds(c) == ["over-commit"]
    assert "never registered" in c.violations[0].message


def test_a_group_partly_bound_beyond_the_bind_timeout_is_reported_once():
    c = checker()
    a_running_pair_loses_a_member(c, 1)
    c.tick(10.5)
    assert c.violations == []  # within the bind timeout
    c.tick(11.5)
    c.tick(20)
    assert kinds(c) == ["incomplete-holding"]


def test_a_group_that_completes_in_time_is_no_violation():
    c = checker()
    c.observe("pods", "ADDED", pod("p1", reserved="n1", gated=True), 1)
    c.observe("pods", "ADDED", pod("p0", node_name="n1", reserved="n1", phase="Running"), 1)
    c.observe("pods", "MODIFIED", pod("p1", reserved="n1", node_name="n1", phase="Running"), 9)
    c.finish(60)
    assert c.violations == [] and c.longest_incomplete_holding == 8


def deleting(obj: dict) -> dict:
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return obj


def test_a_member_being_deleted_no_longer_counts_as_running():
    c = checker()
    a_running_pair(c, 1)
    c.observe("pods", "MODIFIED", deleting(pod("p1", node_name="n1", reserved="n1", phase="Running")), 2)
    c.tick(13)  # p0 has held its GPUs for 11 s while its group is not fully running
    assert kinds(c) == ["incomplete-holding"]


def test_a_group_whose_members_are_all_being_deleted_holds_nothing_more():
    c = checker()
    a_running_pair_loses_a_member(c, 1)
    c.observe("pods", "MODIFIED", deleting(pod("p0", node_name="n1", reserved="n1", phase="Running")), 9)
    c.tick(30)  # p0 terminates within its own grace period: given back at 9, not when it is gone
    assert c.violations == [] and c.longest_incomplete_holding == 8


def test_a_pod_on_a_deleted_node_holds_nothing_and_its_group_holds_again_only_when_bound_to_one():
    c = checker(node("n1"), node("n2"))
    a_running_pair(c, 1, nodes=("n1", "n2"))
    c.observe("nodes", "DELETED", node("n1"), 2)
    c.observe("nodes", "DELETED", node("n2"), 2)
    c.tick(30)  # both nodes gone before the pod garbage collector removed their pods
    assert c.violations == []
    c.observe("nodes", "ADDED", node("n2"), 31)
    c.tick(45)  # p1's node is back (same name): it holds again, its group incomplete
    assert kinds(c) == ["incomplete-holding"]


def test_the_reaction_allowance_extends_the_bind_timeout_and_no_more():
    c = Checker(bind_timeout=10, reaction=2)
    c.observe("nodes", "ADDED", node("n1"), 0)
    a_running_pair_loses_a_member(c, 1)
    c.tick(12.5)
    assert c.violations == []
    c.tick(13.5)
    assert kinds(c) == ["incomplete-holding"]


def test_bound_off_its_reserved_node_is_a_double_reservation():
    c = checker(node("n1"), node("n2"))
    c.observe("pods", "ADDED", pod("p0", size=1, gpus=1, reserved="n1", node_name="n2", phase="Running"), 1)
    assert kinds(c) == ["double-reservation"]


def test_a_write_that_books_more_members_than_the_groups_size_is_a_double_reservation():
    c = checker()
    for name in ("q0", "q1", "q2"):
        c.observe("pods", "ADDED", pod(name, gpus=1, gated=True), 1)
    c.observe(GANGS, "MODIFIED", gang({"q0": "n1", "q1": "n1", "q2": "n1"}), 2)
    assert kinds(c) == ["double-reservation"]
    assert "3 live members hold a reservation, more than its size 2, before 2 of them were placed" in \
        c.violations[0].message


def test_an_elastic_member_reserved_once_its_group_was_placed_is_no_double_reservation():
    """The gang is admitted with its size; the member beyond it is booked by a later write."""
    c = checker()
    for name in ("p0", "p1", "extra"):
        c.observe("pods", "ADDED", pod(name, gpus=1, gated=True), 1)
    c.observe(GANGS, "MODIFIED", gang({"p0": "n1", "p1": "n1"}), 2)
    c.observe(GANGS, "MODIFIED", gang({"p0": "n1", "p1": "n1", "extra": "n1"}), 3)
    for name in ("p0", "p1", "extra"):
        c.observe("pods", "MODIFIED", pod(name, gpus=1, pinned="n1"), 3)
        c.observe("pods", "MODIFIED", pod(name, gpus=1, pinned="n1", node_name="n1", phase="Running"), 4)
    assert c.violations == []


def test_a_gang_deleted_while_its_members_are_released_takes_no_reservation_back():
    """A RayJob suspended: its cluster is deleted, and the garbage collector deletes the cluster's
    Gang before its pods, released and not yet bound. Their pins still book them, as the
    controller counts them: no member is released short of a reservation."""
    c = checker()
    for name in ("p0", "p1"):
        c.observe("pods", "ADDED", pod(name, gated=True), 1)
    c.observe(GANGS, "MODIFIED", gang({"p0": "n1", "p1": "n1"}), 2)
    for name in ("p0", "p1"):
        c.observe("pods", "MODIFIED", pod(name, pinned="n1"), 3)
    c.observe(GANGS, "DELETED", gang({"p0": "n1", "p1": "n1"}), 4)
    assert c.pods["ns/p0"].reserved == "n1", "still booked on n1 by its pin"
    for name in ("p0", "p1"):
        c.observe("pods", "DELETED", pod(name, pinned="n1"), 4)
    assert c.violations == []


def test_a_pin_books_nothing_for_a_member_released_without_a_reservation():
    c = checker()
    c.observe("pods", "ADDED", pod("p0", gated=True), 1)
    c.observe("pods", "ADDED", pod("p1", gated=True), 1)
    c.observe("pods", "MODIFIED", pod("p0", pinned="n1"), 2)
    c.observe("pods", "MODIFIED", pod("p1", pinned="n1"), 2)
    assert kinds(c) == ["partial-release"]
    assert "released with only 0 of its 2 members reserved" in c.violations[0].message


def test_time_the_controller_was_down_does_not_count_toward_holding():
    c = checker()
    a_running_pair_loses_a_member(c, 1)
    c.controller_down(5)
    c.controller_up(9)
    c.tick(14.5)  # 13.5 s held, 4 of them with nothing to decide
    assert c.violations == [] and c.longest_incomplete_holding == 13.5
    c.controller_down(15)
    c.tick(25)  # still down: no more counted
    assert c.violations == []
    c.controller_up(25)
    c.tick(26.5)
    assert kinds(c) == ["incomplete-holding"]


def test_a_member_bound_while_another_has_neither_node_nor_reservation_is_a_partial_bind():
    c = checker()
    c.observe("pods", "ADDED", pod("p0", size=3, reserved="n1", gated=True), 1)
    c.observe("pods", "ADDED", pod("p1", size=3, reserved="n1", gated=True), 1)
    c.observe("pods", "ADDED", pod("p2", size=3, gated=True), 1)
    c.observe("pods", "MODIFIED", pod("p0", size=3, reserved="n1", node_name="n1"), 2)
    assert "partial-bind" in kinds(c)
    [violation] = [v for v in c.violations if v.kind == "partial-bind"]
    assert "ns/p0 bound while ns/p2 have neither" in violation.message
    assert c.first_bound == {("ns", "g"): (2, 3)}


def test_a_member_released_before_its_group_is_reserved_is_a_partial_release():
    c = checker()
    c.observe("pods", "ADDED", pod("p0", reserved="n1", gated=True), 1)
    c.observe("pods", "ADDED", pod("p1", gated=True), 1)
    c.observe("pods", "MODIFIED", pod("p0", reserved="n1"), 2)
    assert kinds(c) == ["partial-release"]
    assert "ns/p0 released with only 1 of its 2 members reserved" in c.violations[0].message


def test_members_beyond_the_size_may_wait_while_the_rest_is_bound():
    c = checker()
    a_running_pair(c, 1)
    c.observe("pods", "ADDED", pod("extra", gated=True), 2)  # an elastic member beyond the min count of 2
    assert c.violations == []


def test_a_group_that_lost_a_placed_member_is_checked_again_once_nothing_of_it_is_placed():
    c = checker()
    a_running_pair_loses_a_member(c, 1)  # p0 bound, its replacement p1 unplaced: waiting, not a partial bind
    assert c.violations == []
    c.observe("pods", "DELETED", running("p0"), 2)  # rolled back: nothing of the group is placed any more
    c.observe("pods", "ADDED", pod("p0", gated=True), 2)
    c.observe("pods", "MODIFIED", pod("p0", reserved="n1"), 3)  # released alone: the new placement is checked
    assert kinds(c) == ["partial-release"]


def test_violations_are_told_by_namespace_and_a_failure_of_the_checker_to_every_namespace():
    c = checker()
    c.observe("pods", "ADDED", pod("p0", size=1, gpus=1, reserved="n1", node_name="n2", namespace="a"), 1)
    c.unchecked(2, "could not check MODIFIED pods x: KeyError('metadata')")
    assert [v.kind for v in c.violations_in("a")] == ["double-reservation", "over-commit", "unchecked"]
    assert [v.kind for v in c.violations_in("b")] == ["unchecked"]


def test_watch_checks_what_exists_and_every_change_the_api_server_commits():
    api = APIServer(clock=lambda: 1_800_000_000.0)
    api.create("namespaces", {"metadata": {"name": "ns"}})
    api.create("nodes", node("n1", gpus=4))
    api.create("pods", pod("a", group="", gpus=3, node_name="n1"), namespace="ns")
    now = [10.0]
    watch = Watch(api, Checker(bind_timeout=10), clock=lambda: now[0])
    assert watch.checker.events == 2, "the node and the pod there already"
    now[0] = 11.0
    api.create("pods", pod("b", group="y", size=1, gpus=2, reserved="n1", gated=True), namespace="ns")
    [violation] = watch.violations("ns")
    assert violation.kind == "over-commit" and violation.at == 11.0
    watch.close()
    api.create("pods", pod("c", group="", gpus=1), namespace="ns")
    assert watch.checker.events == 3, "nothing more after close"


def claim(name, *devices):
    results = [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": d} for d in devices]
    return {"metadata": {"name": name, "namespace": "team"},
            "status": {"allocation": {"devices": {"results": results}}} if devices else {}}


def test_a_device_allocated_to_two_claims_is_a_violation_and_freeing_it_ends_it():
    checker = Checker(bind_timeout=60)
    checker.observe("resourceclaims", "ADDED", claim("a", "gpu-0"), 1.0)
    checker.observe("resourceclaims", "ADDED", claim("b", "gpu-1"), 2.0)
    assert checker.violations == []
    checker.observe("resourceclaims", "MODIFIED", claim("b", "gpu-0"), 3.0)
    assert [v.kind for v in checker.violations] == ["double-allocation"]
    checker.observe("resourceclaims", "DELETED", claim("a"), 4.0)
    checker.observe("resourceclaims", "MODIFIED", claim("b", "gpu-0"), 5.0)
    assert len(checker.violations) == 1


def test_an_extended_resource_a_device_class_serves_is_not_held_to_an_allocatable_that_does_not_list_it():
    checker = Checker(bind_timeout=60)
    checker.observe("nodes", "ADDED", {"metadata": {"name": "n1"}, "status": {"allocatable": {"pods": "110"}}}, 0.0)
    checker.observe("deviceclasses", "ADDED", {"metadata": {"name": "gpu"},
                                               "spec": {"extendedResourceName": "nvidia.com/gpu"}}, 0.0)
    pod = {"metadata": {"name": "p", "namespace": "team"},
           "spec": {"nodeName": "n1", "containers": [{"name": "m", "resources": {"requests": {"nvidia.com/gpu": "2"}}}]},
           "status": {"phase": "Running"}}
    checker.observe("pods", "ADDED", pod, 1.0)
    assert checker.violations == []
