"""The executor's side of a rollback and a preemption: the owner's merge patch as decided, an
audit line per member deleted or pod evicted, a refused suspension dropped, dry-run silent."""

from gangkeeper import names
from gangkeeper.controller.deciding.decisions import (
    DeletePod,
    EvictPod,
    GangEvent,
    Reason,
    Report,
    ResumeOwner,
    SaveGang,
    SuspendOwner,
)
from gangkeeper.controller.reading.kube import GANGS, MERGE_PATCH, PODS, Conflict, Throttled
from gangkeeper.integrations import job
from tests.controller_io.recording import GANG, GROUP, RecordingKube, executor

SUSPEND = SuspendOwner(GROUP, job.RESOURCE, "train", job.SUSPENSION.suspending("41", "2027-01-15T08:00:30Z"))
RESUME = ResumeOwner(GROUP, job.RESOURCE, "train", job.SUSPENSION.resuming("42"))


class PatchTypes(RecordingKube):
    """Also records the content type of every patch."""

    def __init__(self):
        super().__init__()
        self.types = []

    def patch(self, resource, namespace, name, body, patch_type=None, *, subresource=""):
        self.types.append(patch_type)
        return super().patch(resource, namespace, name, body, patch_type, subresource=subresource)


def test_an_owner_is_suspended_and_resumed_by_the_merge_patch_decided_before_gangs_and_events():
    kube = PatchTypes()
    run, audit, written = executor(kube)
    rolled_back = Report(GROUP, GangEvent.ROLLED_BACK, Reason.ROLLED_BACK, "suspended Job train", GANG, warning=True)
    assert run.execute([rolled_back, SaveGang(GROUP, "g", {"phase": "Waiting"}), SUSPEND, RESUME]).failed == 0
    jobs = job.RESOURCE.name
    assert [c[:3] for c in kube.calls[:3]] == [("patch", jobs, "train"), ("patch", jobs, "train"),
                                               ("patch/status", GANGS.name, "g")]
    assert kube.calls[0][3] == {"metadata": {"resourceVersion": "41", "annotations": {
        names.SUSPENDED_BY_ANNOTATION: names.SUSPENDED_BY_VALUE, names.RESUME_AT_ANNOTATION: "2027-01-15T08:00:30Z"}},
        "spec": {"suspend": True}}
    assert kube.calls[1][3]["metadata"]["annotations"] == {names.SUSPENDED_BY_ANNOTATION: None,
                                                          names.RESUME_AT_ANNOTATION: None}
    assert kube.types[:2] == [MERGE_PATCH, MERGE_PATCH]
    assert written == [], "an owner's answer is no pod for the cache"


def test_a_suspension_refused_for_a_stale_owner_is_dropped_and_the_rest_still_runs():
    kube = RecordingKube()
    kube.refuse[("patch", "train")] = Conflict(409, {"reason": "Conflict"})
    run, _, _ = executor(kube)
    assert run.execute([SUSPEND, DeletePod(GROUP, "p1", "uid-p1", "not bound")]).failed == 1
    assert [c[:3] for c in kube.calls] == [("patch", job.RESOURCE.name, "train"), ("delete", PODS.name, "p1")]


def test_every_member_a_rollback_deletes_gets_an_audit_line_naming_it():
    kube = RecordingKube()
    run, audit, _ = executor(kube)
    why = "plain-1 is Unschedulable on n1"
    run.execute([DeletePod(GROUP, f"plain-{i}", f"uid-{i}", why) for i in range(20)])
    assert [(line["event"], line["pod"], line["details"]["pod_uid"]) for line in audit.lines] == [
        ("gang.member_deleted", f"plain-{i}", f"uid-{i}") for i in range(20)]
    assert {(line["decision"], line["reason"], line["group"], line["details"]["why"]) for line in audit.lines} == {
        ("member_deleted", "RolledBack", "g", why)}


def test_dry_run_records_the_deletions_and_writes_nothing():
    run, audit, _ = executor(kube=None, dry_run=True)
    assert run.execute([SUSPEND, DeletePod(GROUP, "p1", "uid-p1", "not bound")]).failed == 0
    assert [(line["event"], line["details"]["dry_run"]) for line in audit.lines] == [("gang.member_deleted", True)]


def test_preemption_evicts_lone_pods_and_deletes_members_each_on_record_with_its_reason():
    kube = RecordingKube()
    run, audit, _ = executor(kube)
    why = "preempted by team/urgent (priority 1000, above its 10)"
    assert run.execute([EvictPod(("team", "lone"), "lone", "uid-lone", why),
                        DeletePod(GROUP, "low-0", "uid-low-0", why, Reason.PREEMPTED)]).failed == 0
    assert sorted(call[:2] + (call[3],) for call in kube.calls) == [("delete", PODS.name, {"uid": "uid-low-0"}),
                                                                     ("evict", PODS.name, {"uid": "uid-lone"})]
    assert sorted((line["pod"], line["decision"], line["reason"]) for line in audit.lines) == [
        ("lone", "evicted", "Preempted"), ("low-0", "member_deleted", "Preempted")]


def test_an_eviction_a_budget_refuses_is_logged_not_recorded_and_the_rest_still_runs():
    kube = RecordingKube()
    kube.refuse[("evict", "guarded")] = Throttled(429, {"reason": "TooManyRequests",
                                                        "message": "Cannot evict pod as it would violate the pod's "
                                                                   "disruption budget."})
    run, audit, _ = executor(kube)
    executed = run.execute([EvictPod(("team", "guarded"), "guarded", "uid-g", "preempted"),
                            EvictPod(("team", "free"), "free", "uid-f", "preempted"),
                            SaveGang(GROUP, "g", {"phase": "Waiting"})])
    assert executed.failed == 1
    assert [line["pod"] for line in audit.lines] == ["free"], "only what the Eviction API did is on record"
    assert ("patch/status", GANGS.name, "g") in [call[:3] for call in kube.calls]
