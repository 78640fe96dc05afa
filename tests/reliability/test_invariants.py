"""The invariant checks on plain events: each one catches what it is meant to, and stays quiet otherwise."""

from gangkeeper import names
from reliability.ha import acting_overlaps
from reliability.invariants import Checker
from reliability.load import leak_verdict

GATE = [{"name": names.SCHEDULING_GATE}]


def node(name: str, gpus: int = 8) -> dict:
    return {"metadata": {"name": name}, "status": {"allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "64",
                                                                  "pods": "110"}}}


def pod(name: str, group: str = "g", size: int = 2, gpus: int = 4, node_name: str = "", reserved: str = "",
        phase: str = "Pending", gated: bool = False) -> dict:
    annotations = {names.MIN_COUNT_ANNOTATION: str(size)}
    if reserved:
        annotations[names.RESERVED_NODE_ANNOTATION] = reserved
    spec = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if node_name:
        spec["nodeName"] = node_name
    if gated:
        spec["schedulingGates"] = GATE
    return {"metadata": {"name": name, "namespace": "ns", "labels": {names.GROUP_LABEL: group},
                         "annotations": annotations}, "spec": spec, "status": {"phase": phase}}


def checker(*nodes) -> Checker:
    checker = Checker(bind_timeout=10)
    for n in nodes or (node("n1"),):
        checker.observe("nodes", "ADDED", n, 0)
    return checker


def kinds(checker: Checker) -> list[str]:
    return [v.kind for v in checker.violations]


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


def test_bound_plus_reserved_beyond_allocatable_is_over_commit():
    c = checker()
    c.observe("pods", "ADDED", pod("a", group="x", size=1, gpus=6, node_name="n1", phase="Running"), 1)
    c.observe("pods", "ADDED", pod("b", group="y", size=1, gpus=4, reserved="n1", gated=True), 2)
    assert kinds(c) == ["over-commit"]


def test_a_terminal_pod_frees_its_node():
    c = checker()
    c.observe("pods", "ADDED", pod("a", group="x", size=1, gpus=6, node_name="n1", phase="Succeeded"), 1)
    c.observe("pods", "ADDED", pod("b", group="y", size=1, gpus=4, reserved="n1", gated=True), 2)
    assert c.violations == []


def test_a_group_partly_bound_beyond_the_bind_timeout_is_reported_once():
    c = checker()
    c.observe("pods", "ADDED", pod("p0", node_name="n1", reserved="n1", phase="Running"), 1)
    c.observe("pods", "ADDED", pod("p1", gated=True), 1)
    c.tick(10.5)
    assert c.violations == []  # within the bind timeout
    c.tick(11.5)
    c.tick(20)
    assert kinds(c) == ["incomplete-holding"]


def test_a_group_that_completes_in_time_is_no_violation():
    c = checker()
    c.observe("pods", "ADDED", pod("p0", node_name="n1", reserved="n1", phase="Running"), 1)
    c.observe("pods", "ADDED", pod("p1", reserved="n1", gated=True), 1)
    c.observe("pods", "MODIFIED", pod("p1", reserved="n1", node_name="n1", phase="Running"), 9)
    c.finish(60)
    assert c.violations == [] and c.longest_incomplete_holding == 8


def deleting(obj: dict) -> dict:
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return obj


def test_a_member_being_deleted_no_longer_counts_as_running():
    c = checker()
    for i in (0, 1):
        c.observe("pods", "ADDED", pod(f"p{i}", node_name="n1", reserved="n1", phase="Running"), 1)
    c.observe("pods", "MODIFIED", deleting(pod("p1", node_name="n1", reserved="n1", phase="Running")), 2)
    c.tick(13)  # p0 has held its GPUs for 11 s while its group is not fully running
    assert kinds(c) == ["incomplete-holding"]


def test_a_group_whose_members_are_all_being_deleted_holds_nothing_more():
    c = checker()
    c.observe("pods", "ADDED", pod("p0", node_name="n1", reserved="n1", phase="Running"), 1)
    c.observe("pods", "ADDED", pod("p1", gated=True), 1)
    c.observe("pods", "MODIFIED", deleting(pod("p0", node_name="n1", reserved="n1", phase="Running")), 9)
    c.tick(30)  # p0 terminates within its own grace period: given back at 9, not when it is gone
    assert c.violations == [] and c.longest_incomplete_holding == 8


def test_a_pod_on_a_deleted_node_holds_nothing_and_its_group_holds_again_only_when_bound_to_one():
    c = checker(node("n1"), node("n2"))
    c.observe("pods", "ADDED", pod("p0", node_name="n1", reserved="n1", phase="Running"), 1)
    c.observe("pods", "ADDED", pod("p1", node_name="n2", reserved="n2", phase="Running"), 1)
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
    c.observe("pods", "ADDED", pod("p0", node_name="n1", reserved="n1", phase="Running"), 1)
    c.observe("pods", "ADDED", pod("p1", gated=True), 1)
    c.tick(12.5)
    assert c.violations == []
    c.tick(13.5)
    assert kinds(c) == ["incomplete-holding"]


def test_bound_off_its_reserved_node_or_reserved_twice_is_a_double_reservation():
    c = checker(node("n1"), node("n2"))
    c.observe("pods", "ADDED", pod("p0", size=1, gpus=1, reserved="n1", node_name="n2", phase="Running"), 1)
    assert kinds(c) == ["double-reservation"]
    c = checker()
    for i in range(3):
        c.observe("pods", "ADDED", pod(f"q{i}", group="h", size=2, gpus=1, reserved="n1", gated=True), 1)
    assert kinds(c) == ["double-reservation"]


def test_acting_intervals_that_overlap_are_found():
    def line(ts, event):
        return {"ts": f"2026-01-01T00:00:{ts:02d}.000Z", "event": event}
    a = [line(0, "leader.started"), line(1, "gang.released"), line(5, "gang.reserved")]  # killed: no stop
    b_late = [line(20, "leader.started"), line(21, "gang.released")]
    b_early = [line(3, "leader.started"), line(4, "gang.released")]
    assert acting_overlaps({"a": a, "b": b_late}) == []
    assert len(acting_overlaps({"a": a, "b": b_early})) == 1
    assert len(acting_overlaps({"a": a + [line(30, "gang.bound")] , "b": []})) == 0
    assert len(acting_overlaps({"a": [line(1, "leader.started"), line(2, "leader.stopped"),
                                      line(3, "gang.released")]})) == 1  # acted after stepping down


def test_the_leak_verdict_tells_levelling_off_from_steady_growth():
    levelling = [(t, 100 + min(t, 300) / 10) for t in range(0, 600, 5)]
    growing = [(t, 100 + t / 10) for t in range(0, 600, 5)]  # 6 MiB/min throughout
    assert leak_verdict(levelling)["levels_off"]
    assert not leak_verdict(growing)["levels_off"]


def test_time_the_controller_was_down_does_not_count_toward_holding():
    c = checker()
    c.observe("pods", "ADDED", pod("p0", node_name="n1", reserved="n1", phase="Running"), 1)
    c.observe("pods", "ADDED", pod("p1", gated=True), 1)
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
