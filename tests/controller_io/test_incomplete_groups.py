"""A group that never completes, seen from outside the controller's loop on a fake clock: the
Warning Event written to the API, the Gang's `Stuck` condition, `gangkeeper_stuck_incomplete_groups`
and the audit line, each once, and all of them gone when the group completes."""

from gangkeeper.audit import AuditLog
from gangkeeper.controller.deciding.settings import Settings
from gangkeeper.controller.metrics import Metrics
from gangkeeper.controller.runner import Controller
from tests.controller_io.loop import (
    DEBOUNCE,
    NS,
    WALL,
    AuditEvents,
    FakeClock,
    World,
    leading,
    member,
    node,
    reserved,
    sample,
)

SET_TIME = 300.0


class Loop:
    """The controller's loop (Events written in order, no background writers) and what it writes."""

    def __init__(self):
        self.clock, self.audit = FakeClock(), AuditEvents()
        self.world = World(self.clock)
        self.controller = Controller(self.world.kube, Settings(incomplete_group_seconds=SET_TIME),
                                     AuditLog("controller", self.audit), Metrics(), debounce_seconds=DEBOUNCE,
                                     clock=self.clock.clock(), make_informer=self.world.informer, concurrent_writes=1)

    def submit(self, *names: str, size: int = 4) -> None:
        self.world.add(*(member(name, "train", size) for name in names))

    def turn(self, after: float = 0.0):
        """A turn `after` seconds from now; the Gangs it wrote reach its cache, as their watch brings them."""
        self.clock.now += after
        outcome = self.controller.turn(leading)
        self.world.deliver("gangs")
        return outcome

    def warnings(self, reason: str = "IncompleteGroup") -> list[tuple[str, str, int]]:
        """The Warning Events written (created, or their count bumped)."""
        return sorted((e["involvedObject"]["kind"], e["involvedObject"]["name"], e["count"])
                      for e in self.world.api.list("events", namespace=NS)
                      if e["reason"] == reason and e["type"] == "Warning")

    def stuck_condition(self) -> dict | None:
        conditions = self.world.gang("train")["status"]["conditions"]
        return next((c for c in conditions if c["type"] == "Stuck"), None)

    def stuck_groups(self) -> float | None:
        return sample(self.controller, "gangkeeper_stuck_incomplete_groups", namespace=NS)


def test_two_of_four_gated_with_no_new_pod_for_the_set_time_are_reported_once_and_cleared_when_complete():
    loop = Loop()
    loop.world.add(node("n0"), node("n1"))
    loop.submit("train-0", "train-1")
    first = loop.turn()
    assert loop.stuck_groups() == 0 and loop.stuck_condition() is None
    assert first.next_due == WALL + SET_TIME, "the loop wakes when the set time falls due"

    loop.turn(after=SET_TIME)
    assert loop.warnings() == [("Gang", "train", 1), ("Pod", "train-0", 1), ("Pod", "train-1", 1)]
    condition = loop.stuck_condition()
    assert (condition["status"], condition["reason"]) == ("True", "IncompleteGroup")
    assert "2 of 4 pods present" in condition["message"] and "waiting for 2 more pods" in condition["message"]
    assert loop.stuck_groups() == 1
    assert loop.audit.events.count("gang.stuck") == 1

    loop.turn(after=60)
    loop.turn(after=600)
    assert loop.warnings() == [("Gang", "train", 1), ("Pod", "train-0", 1), ("Pod", "train-1", 1)], \
        "no second Event: it said the same"
    assert loop.audit.events.count("gang.stuck") == 1 and loop.stuck_groups() == 1

    loop.submit("train-2", "train-3")  # the missing members arrive: the group is complete, and fits
    assert len(reserved(loop.turn(after=1))) == 4
    assert loop.stuck_condition() is None, "the condition goes, as TimedOut does"
    assert loop.stuck_groups() == 0


def test_a_group_still_receiving_pods_is_not_reported():
    loop = Loop()
    loop.submit("train-0")
    loop.turn()
    for name in ("train-1", "train-2"):  # one more pod within each set time
        loop.clock.now += SET_TIME - 10
        loop.submit(name)
        loop.turn()
    loop.turn(after=SET_TIME - 10)
    assert loop.warnings() == [] and loop.stuck_condition() is None and loop.stuck_groups() == 0
    assert "gang.stuck" not in loop.audit.events
    loop.turn(after=10)
    assert loop.stuck_groups() == 1, "the set time from the last pod that came"


def test_a_complete_group_waiting_for_capacity_is_not_reported_as_incomplete():
    loop = Loop()  # no node: the group is complete, and does not fit
    loop.submit("train-0", "train-1", size=2)
    loop.turn()
    loop.turn(after=10 * SET_TIME)
    assert loop.world.gang("train")["status"]["reason"] == "NoFit"
    assert loop.warnings() == [] and loop.stuck_condition() is None and loop.stuck_groups() == 0
    assert "gang.stuck" not in loop.audit.events


def test_a_new_leader_counts_the_set_time_from_the_newest_pods_creation():
    loop = Loop()
    loop.submit("train-0")
    loop.clock.now += 100
    loop.submit("train-1")  # the newest pod, created at WALL + 100
    loop.turn()
    loop.clock.now += 100
    loop.controller.turn(lambda: False)  # the lead is lost, and taken again 50 s later: nothing remembered
    loop.turn(after=50)
    assert loop.stuck_groups() == 0
    loop.turn(after=SET_TIME - 151)
    assert loop.stuck_groups() == 0, "not from the oldest pod's creation"
    loop.turn(after=1)
    assert loop.stuck_groups() == 1, "from the newest pod's creation, not from when the new leader saw it"
    assert loop.warnings() == [("Gang", "train", 1), ("Pod", "train-0", 1), ("Pod", "train-1", 1)]


def test_the_gauge_is_by_namespace_and_goes_with_the_namespaces_last_group_and_with_the_lead():
    loop = Loop()
    loop.submit("train-0")
    loop.turn()
    loop.turn(after=SET_TIME)
    assert loop.stuck_groups() == 1
    loop.controller.turn(lambda: False)
    assert loop.stuck_groups() is None, "a standby reports no groups"
    loop.turn()
    assert loop.stuck_groups() == 1, "the next term counts it again, from the newest pod's creation"
    loop.world.delete(NS, "train-0")
    loop.turn()
    assert loop.stuck_groups() is None, "no series left for a namespace without groups"
