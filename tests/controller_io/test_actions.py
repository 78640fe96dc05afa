"""The executor: what it writes for each action, Events deduplicated, conflicts dropped, dry-run silent."""

import threading
import time

import pytest

from gangkeeper import names
from gangkeeper.audit import AuditLog
from gangkeeper.controller.acting import executor as actions
from gangkeeper.controller.acting.executor import Executor
from gangkeeper.controller.deciding.capabilities import ApiCapabilities
from gangkeeper.controller.deciding.decisions import (
    DeletePod,
    EvictPod,
    GangEvent,
    Involved,
    Reason,
    Release,
    Report,
    Reserve,
    ReserveGroup,
    SaveGang,
    TellPod,
)
from gangkeeper.controller.reading.kube import (
    EVENTS,
    GANGS,
    JSON_PATCH,
    PODS,
    Conflict,
    Forbidden,
    NotFound,
)
from tests.controller_io.recording import GANG, GROUP, Lines, RecordingKube, executor


def release(pod="p0", node="n1"):
    return Release(GROUP, pod, node, ({"op": "test", "path": "/metadata/resourceVersion", "value": "8"},), "g", "8")


def released(pods=("p0", "p1")):
    return Report(GROUP, GangEvent.RELEASED, Reason.RELEASED, "released 2 members", GANG,
                  tuple(Involved("v1", "Pod", pod, f"uid-{pod}") for pod in pods), on_pods=True)


ACTIONS = (released(),
           SaveGang(GROUP, "g", {"phase": "Admitted"}, {"metadata": {"name": "g"}}),
           Reserve(GROUP, "p0", "7", "n1"),
           release(),
           DeletePod(GROUP, "p1", "uid-p1"))


def test_each_action_is_one_narrow_write_pods_first_and_the_api_answers_are_assumed():
    kube = RecordingKube()
    run, audit, written = executor(kube)
    assert run.execute(ACTIONS).failed == 0
    methods = [(method, resource, name) for method, resource, name, _ in kube.calls]
    assert methods[:5] == [("patch", PODS.name, "p0"), ("patch", PODS.name, "p0"), ("delete", PODS.name, "p1"),
                           ("create", GANGS.name, "g"), ("patch/status", GANGS.name, "g")]
    assert {resource for _, resource, _ in methods[5:]} == {EVENTS.name}
    reserve = kube.calls[0][3]
    assert reserve == {"metadata": {"resourceVersion": "7", "annotations": {names.RESERVED_NODE_ANNOTATION: "n1"}}}
    assert isinstance(kube.calls[1][3], list), f"a release is a {JSON_PATCH}"
    assert kube.calls[2][3] == {"uid": "uid-p1"}
    assert len(written) == 2, "both pod patches are laid over the cache at once"
    assert [line["event"] for line in audit.lines] == ["gang.released"]


def test_a_group_reservation_is_one_status_write_on_its_gang_before_the_gangs_other_writes():
    kube = RecordingKube()
    run, _, written = executor(kube)
    body = {"metadata": {"name": "g"}}
    booking = {"p0": {"uid": "uid-p0", "node": "n1"}, "gone": None}
    assert run.execute([SaveGang(GROUP, "g", {"phase": "Admitted"}, body), ReserveGroup(GROUP, "g", booking, body),
                        release("p1", "n0")]).failed == 0
    assert [(method, name) for method, resource, name, _ in kube.calls if resource == GANGS.name] == [
        ("create", "g"), ("patch/status", "g"), ("create", "g"), ("patch/status", "g")]
    assert kube.calls[0][1] == GANGS.name, "with the pod writes, ahead of the Gang's status"
    assert kube.calls[1][3] == {"status": {"reservations": booking}}, "a merge patch: null removes an entry"
    assert [obj["metadata"]["name"] for obj in written] == ["g", "p1"], "the Gang's answer is laid over the cache"


def test_a_release_report_is_an_event_on_the_gang_and_on_each_pod():
    kube = RecordingKube()
    run, _, _ = executor(kube)
    run.execute([released()])
    involved = sorted(tuple(e["involvedObject"][f] for f in ("kind", "name", "uid", "namespace", "apiVersion"))
                      for e in kube.events.values())
    assert involved == [("Gang", "g", "uid-g", "team", "gangkeeper.io/v1alpha1"), ("Pod", "p0", "uid-p0", "team", "v1"),
                        ("Pod", "p1", "uid-p1", "team", "v1")], "kubectl describe selects Events by uid"
    assert all(e["source"] == {"component": "gangkeeper-controller"} for e in kube.events.values())
    pod_event = next(e for e in kube.events.values() if e["involvedObject"]["name"] == "p0")
    assert pod_event["message"] == "gang g: released 2 members", "named as `kubectl get gang` takes it"


def tell(pod="p0", reason=Reason.NO_FIT, message="Waiting: no room (kubectl get gang g -n team)", warning=False):
    return TellPod(GROUP, Involved("v1", "Pod", pod, f"uid-{pod}"), reason, message, warning)


def test_a_member_told_why_it_waits_gets_an_event_on_itself_after_the_pod_writes_and_no_audit_line():
    kube = RecordingKube()
    run, audit, _ = executor(kube)
    problem = tell("p2", "Disagreement", "Waiting: declared sizes disagree: annotation says 2, Gang g says 3", warning=True)
    assert run.execute([tell(), DeletePod(GROUP, "p1", "uid-p1"), problem]).failed == 0
    assert [(method, resource) for method, resource, _, _ in kube.calls] == [
        ("delete", PODS.name), ("create", EVENTS.name), ("create", EVENTS.name)]
    event = next(e for e in kube.events.values() if e["involvedObject"]["name"] == "p0")
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "name": "p0", "namespace": "team",
                                       "uid": "uid-p0"}, "kubectl describe pod selects Events by uid"
    assert (event["reason"], event["message"], event["type"], event["source"]) == (
        "NoFit", "Waiting: no room (kubectl get gang g -n team)", "Normal", {"component": "gangkeeper-controller"})
    assert {e["type"] for e in kube.events.values() if e["involvedObject"]["name"] == "p2"} == {"Warning"}
    assert audit.lines == [], "the group's decision has its own audit line"


def test_telling_a_member_the_same_again_bumps_its_event():
    kube = RecordingKube()
    run, _, _ = executor(kube)
    run.execute([tell()])
    run.execute([tell()])
    (event,) = kube.events.values()
    assert event["count"] == 2


def test_each_pods_event_names_its_own_group_when_a_pass_reports_on_several():
    # The message was made when the Event was written, from the last group reported: every pod's
    # Event in the pass named that group.
    kube = RecordingKube()
    run, _, _ = executor(kube)
    run.execute([Report(("team", group), GangEvent.RELEASED, Reason.RELEASED, "released 1 member",
                        GANG._replace(name=f"gang-{group}", uid=f"uid-gang-{group}"),
                        (Involved("v1", "Pod", f"{group}-0", f"uid-{group}-0"),), on_pods=True) for group in "ab"])
    messages = {e["involvedObject"]["name"]: e["message"] for e in kube.events.values()}
    assert messages["a-0"] == "gang gang-a: released 1 member"
    assert messages["b-0"] == "gang gang-b: released 1 member"


def test_a_groups_report_on_its_pods_names_the_group_when_it_has_no_gang():
    kube = RecordingKube()
    run, _, _ = executor(kube)
    reported_on, other = Involved("v1", "Pod", "p0", "uid-p0"), Involved("v1", "Pod", "p1", "uid-p1")
    run.execute([Report(GROUP, GangEvent.RELEASED, Reason.RELEASED, "released 2 members", reported_on, (other,),
                        on_pods=True)])
    messages = {e["involvedObject"]["name"]: e["message"] for e in kube.events.values()}
    assert messages["p1"] == "group team/g: released 2 members"


def test_the_same_news_bumps_one_event_and_survives_a_restart():
    kube = RecordingKube()
    report = Report(GROUP, GangEvent.WAITING, Reason.NO_FIT, "no room", GANG, warning=True)
    first, _, _ = executor(kube)
    first.execute([report, report])
    (name,) = kube.events
    assert kube.events[name]["count"] == 2 and kube.events[name]["type"] == "Warning"
    restarted, _, _ = executor(kube)
    restarted.execute([report])
    assert len(kube.events) == 1 and kube.events[name]["count"] == 2
    other = Report(GROUP, GangEvent.WAITING, Reason.NO_FIT, "other message", GANG)
    first.execute([other])
    assert len(kube.events) == 2


def test_a_gang_created_in_the_same_pass_gets_its_event_with_the_uid_the_api_gave_it():
    kube = RecordingKube()
    run, _, _ = executor(kube)
    unborn = GANG._replace(uid="")
    report = Report(GROUP, GangEvent.WAITING, Reason.INCOMPLETE, "1/2 pods", unborn)
    assert run.execute([report, SaveGang(GROUP, "g", {"phase": "Waiting"}, {"metadata": {"name": "g"}})]).failed == 0
    (event,) = kube.events.values()
    assert event["involvedObject"]["uid"] == "uid-g", "written after the Gang, with its uid"


def test_no_event_is_written_about_a_gang_that_does_not_exist():
    kube = RecordingKube()
    kube.refuse[("create", "g")] = Forbidden(403, {"reason": "Forbidden"})
    kube.refuse[("patch/status", "g")] = NotFound(404, {"reason": "NotFound"})
    run, audit, _ = executor(kube)
    report = Report(GROUP, GangEvent.WAITING, Reason.INCOMPLETE, "1/2 pods", GANG._replace(uid=""))
    assert run.execute([report, SaveGang(GROUP, "g", {"phase": "Waiting"}, {"metadata": {"name": "g"}})]).failed == 1
    assert kube.events == {} and [line["event"] for line in audit.lines] == ["gang.waiting"], \
        "the audit line still says it"


def test_a_conflict_is_dropped_and_the_rest_still_runs():
    kube = RecordingKube()
    kube.refuse[("patch", "p0")] = Conflict(422, {"reason": "Invalid"})
    kube.refuse[("delete", "p1")] = Forbidden(403, {"reason": "Forbidden"})
    run, _, written = executor(kube)
    assert run.execute(ACTIONS).failed == 2
    assert [c[:3] for c in kube.calls if c[2] == "p0"] == [("patch", PODS.name, "p0")] * 2, \
        "the refused reserve is not retried; the release still runs"
    assert len(kube.events) == 3
    assert ("create", GANGS.name, "g", {"metadata": {"name": "g"}}) in kube.calls


def test_dry_run_audits_every_decision_and_writes_nothing():
    run, audit, written = executor(kube=None, dry_run=True)
    assert run.execute(ACTIONS).failed == 0
    assert written == []
    assert [(line["event"], line["details"]["dry_run"]) for line in audit.lines] == [("gang.released", True)]


# --- writes in parallel ----------------------------------------------------------------------

class GatedKube(RecordingKube):
    """Pod writes wait at a barrier until `together` of them are in flight at once (a deadline,
    not a timed assertion: one after the other, the first would wait in vain and fail); every
    call is stamped with the moment it started and ended, in a shared sequence."""

    def __init__(self, together: int):
        super().__init__()
        self.barrier = threading.Barrier(together, timeout=10)
        self.sequence, self.lock = [], threading.Lock()

    def _call(self, method, resource, name, body=None):
        with self.lock:
            self.sequence.append(("start", resource.name, name))
        if resource is PODS and self.barrier.parties > 1:
            self.barrier.wait()
        try:
            return super()._call(method, resource, name, body)
        finally:
            with self.lock:
                self.sequence.append(("end", resource.name, name))


def reserves(count):
    return [Reserve(GROUP, f"p{i}", str(i), f"n{i}") for i in range(count)]


def parallel_executor(kube, concurrency):
    audit, written = Lines(), []
    run = Executor(kube, AuditLog("controller", audit), written=written.append, concurrency=concurrency)
    return run, audit, written


def test_independent_pod_writes_are_in_flight_at_once():
    kube = GatedKube(together=4)
    run, _, written = parallel_executor(kube, concurrency=4)
    try:
        assert run.execute(reserves(4)).failed == 0, "all four met at the barrier"
    finally:
        run.close()
    assert sorted(obj["metadata"]["name"] for obj in written) == ["p0", "p1", "p2", "p3"]


def test_one_after_the_other_they_would_not_be():
    kube = GatedKube(together=2)
    kube.barrier = threading.Barrier(2, timeout=0.2)
    run, _, _ = parallel_executor(kube, concurrency=1)
    assert run.execute(reserves(2)).failed == 2, \
        "the first waits alone, the barrier breaks, both fail (and the loop goes on)"


def test_gangs_wait_for_every_pod_write_and_events_for_every_gang():
    kube = GatedKube(together=1)
    run, _, _ = parallel_executor(kube, concurrency=8)
    actions = [released(), SaveGang(GROUP, "g", {"phase": "Admitted"}), *reserves(6)]
    try:
        assert run.execute(actions).failed == 0
        run.drain()
    finally:
        run.close()
    order = kube.sequence
    last_pod_end = max(i for i, (edge, resource, _) in enumerate(order) if edge == "end" and resource == PODS.name)
    first_gang = min(i for i, (edge, resource, _) in enumerate(order) if edge == "start" and resource == GANGS.name)
    last_gang_end = max(i for i, (edge, resource, _) in enumerate(order) if edge == "end" and resource == GANGS.name)
    first_event = min(i for i, (edge, resource, _) in enumerate(order) if edge == "start" and resource == EVENTS.name)
    assert last_pod_end < first_gang and last_gang_end < first_event


def test_writes_to_one_object_keep_the_passes_order_and_records_keep_it_too():
    kube = RecordingKube()
    run, audit, written = parallel_executor(kube, concurrency=8)
    preempted = [EvictPod(GROUP, f"p{i}", f"uid-p{i}", why="preempted") for i in range(2, 8)]
    try:
        assert run.execute([*ACTIONS, *preempted]).failed == 0
    finally:
        run.close()
    assert [c[0] for c in kube.calls if c[2] == "p0" and c[1] == PODS.name] == ["patch", "patch"]
    assert isinstance([c for c in kube.calls if c[2] == "p0"][1][3], list), "the reserve first, then the release"
    assert [line.get("pod") for line in audit.lines if line["event"] == "gang.member_deleted"] == \
        [f"p{i}" for i in range(2, 8)], "audit lines in the pass's order, whichever eviction was answered first"
    assert len(written) == 2


def test_the_same_news_twice_in_one_pass_is_one_event_counted_twice_in_parallel_too():
    kube = RecordingKube()
    report = Report(GROUP, GangEvent.WAITING, Reason.NO_FIT, "no room", GANG, warning=True)
    run, _, _ = parallel_executor(kube, concurrency=8)
    try:
        run.execute([report, report, released(pods=[f"p{i}" for i in range(8)])])
        run.drain()
    finally:
        run.close()
    counts = sorted(event["count"] for event in kube.events.values())
    assert counts == [1] * 9 + [2], "one Event bumped, one per released pod and one on the Gang"


def test_a_write_no_longer_allowed_is_not_sent_and_counts_as_left():
    kube = RecordingKube()
    run, _, written = parallel_executor(kube, concurrency=1)
    assert run.execute(reserves(4), proceed=lambda: len(kube.calls) < 2).failed == 2
    assert [c[2] for c in kube.calls] == ["p0", "p1"] and len(written) == 2


class SteppingDownKube(RecordingKube):
    """The leader steps down while its first pod write is in flight."""

    def __init__(self):
        super().__init__()
        self.leading = True

    def patch(self, resource, namespace, name, body, patch_type=None, *, subresource=""):
        self.leading = False
        return super().patch(resource, namespace, name, body, patch_type, subresource=subresource)


@pytest.mark.parametrize("concurrency", [1, 8])
def test_a_leader_that_steps_down_mid_pass_has_recorded_what_it_began_and_sends_nothing_more(concurrency):
    kube = SteppingDownKube()
    run, audit, _ = parallel_executor(kube, concurrency=concurrency)
    release_p0 = release()
    try:
        assert run.execute([released(pods=("p0",)), SaveGang(GROUP, "g", {"phase": "Admitted"}), release_p0],
                           proceed=lambda: kube.leading).failed == 2, "the Gang's write and the Events are left"
        run.drain()
    finally:
        run.close()
    assert [c[2] for c in kube.calls] == ["p0"], "the write under way lands; nothing after it is sent"
    assert [line["event"] for line in audit.lines] == ["gang.released"], \
        "the release was sent while leading: it is on record, written before the write"


def test_a_pass_begun_after_the_leader_stepped_down_records_and_sends_nothing():
    kube = RecordingKube()
    run, audit, _ = parallel_executor(kube, concurrency=8)
    try:
        assert run.execute([released(), *reserves(2)], proceed=lambda: False).failed == 3
    finally:
        run.close()
    assert kube.calls == [] and audit.lines == []


class HeldEventsKube(RecordingKube):
    """Event writes wait until `letting_go` is set (a deadline of 10 s, not a timed assertion)."""

    def __init__(self):
        super().__init__()
        self.letting_go = threading.Event()

    def create(self, resource, namespace, body):
        if resource is EVENTS:
            self.letting_go.wait(10)
        return super().create(resource, namespace, body)


def test_events_are_written_in_the_background_and_do_not_hold_up_the_pass():
    kube = HeldEventsKube()
    run, audit, _ = parallel_executor(kube, concurrency=8)
    try:
        assert run.execute([released(), *reserves(2)]).failed == 0
        assert kube.events == {}, "the pass is over, its Events are still being written"
        assert [line["event"] for line in audit.lines] == ["gang.released"], "its audit line is not"
        kube.letting_go.set()
        run.drain()
    finally:
        run.close()
    assert len(kube.events) == 3, "the Gang's and each pod's, written once let go"


def test_events_beyond_those_waiting_already_are_dropped_and_said(monkeypatch, caplog):
    monkeypatch.setattr(actions, "PENDING_EVENTS", 2)
    kube = HeldEventsKube()
    run, _, _ = parallel_executor(kube, concurrency=8)
    try:
        run.execute([released(pods=[f"p{i}" for i in range(5)])])
        kube.letting_go.set()
        run.drain()
    finally:
        run.close()
    assert len(kube.events) == 2, "two waited, the other four were dropped"
    assert "dropped 4 Events: 2 are waiting to be written already" in caplog.text


def test_closing_drops_the_events_not_yet_begun():
    kube = HeldEventsKube()
    run, _, _ = parallel_executor(kube, concurrency=8)
    run.execute([released(pods=[f"p{i}" for i in range(20)])])
    closing = threading.Thread(target=run.close)
    closing.start()  # while the first Events hang, as on an API server that is gone
    deadline = time.monotonic() + 10
    while len(run._queued) > actions.EVENT_WRITERS and time.monotonic() < deadline:
        time.sleep(0.01)
    kube.letting_go.set()
    closing.join(10)
    assert len(kube.events) == actions.EVENT_WRITERS, "those begun were written, the other 17 dropped"


def test_a_group_a_member_of_which_changed_since_the_pass_read_it_is_not_released_at_all():
    """p1 was deleted and created again (its cache a little behind): releasing p0 alone would leave
    the group part released with p1's new pod unreserved."""
    kube = RecordingKube()
    kube.versions = {"p1": "12"}
    run, audit, written = executor(kube)
    saved = SaveGang(GROUP, "g", {"phase": "Admitted"})
    told = tell("p0", Reason.RELEASED, "Released to n1 with its group of 2")
    executed = run.execute([released(), release("p0"), release("p1", "n0"), saved, told, tell("p2")])
    assert executed.failed == 0 and executed.held == {GROUP}, "held back, which is no failure"
    assert [e["involvedObject"]["name"] for e in kube.events.values() if e["involvedObject"]["kind"] == "Pod"] == [
        "p2"], "a member is not told of a release held back"
    assert kube.checked == [f"{names.GROUP_LABEL}=g"], "one request for the group"
    assert [c for c in kube.calls if c[1] == PODS.name] == [] and written == [], "no member released"
    assert audit.lines == [], "and no release on record"
    kube.versions = {}
    assert run.execute([released(), release("p0"), release("p1", "n0")]).failed == 0
    assert sorted(c[2] for c in kube.calls if c[1] == PODS.name) == ["p0", "p1"]


class CheckingKube(RecordingKube):
    """The release check answers with `answer` (an exception to raise, or a side effect first)."""

    def __init__(self, answer):
        super().__init__()
        self.answer = answer

    def resource_versions(self, resource, namespace, label_selector):
        versions = super().resource_versions(resource, namespace, label_selector)
        if isinstance(self.answer, BaseException):
            raise self.answer
        self.answer()
        return versions


def test_a_leader_that_steps_down_during_the_release_check_records_and_sends_nothing():
    leading = [True]
    kube = CheckingKube(lambda: leading.__setitem__(0, False))
    run, audit, _ = executor(kube)
    assert run.execute([released(pods=("p0",)), release("p0")], proceed=lambda: leading[0]).failed == 2
    assert kube.calls == [] and audit.lines == []


def test_a_release_check_that_breaks_holds_its_group_back_and_the_pass_goes_on(caplog):
    kube = CheckingKube(AttributeError("'NoneType' object has no attribute 'get'"))
    run, audit, _ = executor(kube)
    executed = run.execute([released(pods=("p0",)), release("p0"), DeletePod(GROUP, "p1", "uid-p1")])
    assert executed.failed == 0
    assert [(method, name) for method, _, name, _ in kube.calls] == [("delete", "p1")]
    assert executed.held == {GROUP} and audit.lines == []
    assert "could not be checked before their release" in caplog.text


class KeepingKube(RecordingKube):
    """A Gang's status write answered with the status written, as a CRD that keeps it answers."""

    def patch_status(self, resource, namespace, name, body, patch_type=None):
        return {**super().patch_status(resource, namespace, name, body, patch_type), "status": body["status"]}


RESERVED_ON_GANG = ReserveGroup(GROUP, "g", {"p0": {"uid": "uid-p0", "node": "n1"}, "gone": None})


def test_a_gang_answered_with_its_reservations_teaches_nothing(caplog):
    run, _, _ = executor(KeepingKube())
    assert run.execute([RESERVED_ON_GANG]).capabilities == ApiCapabilities()
    assert "prunes" not in caplog.text


def test_a_gang_answered_without_its_reservations_has_a_crd_that_prunes_them_said_when_it_is_news(caplog):
    run, _, _ = executor(RecordingKube())  # answers a status write with no status
    learned = run.execute([RESERVED_ON_GANG]).capabilities
    assert learned == ApiCapabilities(keeps_gang_reservations=False)
    assert run.execute([RESERVED_ON_GANG], learned).capabilities == learned
    assert caplog.text.count("prunes status.reservations") == 1
