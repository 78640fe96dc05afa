"""Rollback that harms nothing (controller/deciding/rollback.py), pass after pass on a stand-in API.

A group whose release fails to bind is taken back whole: an owner with a suspend switch is
suspended, marked as gangkeeper's until its backoff ends, then resumed; members without an owner
are all deleted (or kept, when told to) and their Gang says what to resubmit. The stand-in API is
tests/controller/world.py's, with owners that carry a resourceVersion and take merge patches
guarded by it, and a stand-in Job controller that deletes a suspended Job's pods and creates them,
gated, while it runs.
"""

from datetime import datetime, timezone

from gangkeeper import names
from gangkeeper.controller.cache.groups import JOBS, JOBSETS, PYTORCHJOBS
from gangkeeper.controller.deciding.decisions import DeleteGang, DeletePod, ResumeOwner, SaveGang, SuspendOwner
from gangkeeper.controller.deciding.memory import Memory
from gangkeeper.controller.deciding.reconciler import reconcile
from gangkeeper.controller.deciding.settings import Ownerless, Settings
from gangkeeper.integrations import mpijob, trainjob
from gangkeeper.integrations.lws import RESOURCE as LWS_RESOURCE
from tests.controller.owners import BACKOFF, JobController, Owners, merged
from tests.controller.world import CREATED, NOW, NS, Run, booked, member_object, nodes, of, reports

JOB = ("batch/v1", "Job", "train")
LEADERWORKERSETS = LWS_RESOURCE.name
MPIJOBS = mpijob.RESOURCE.name


def stamp(moment: float) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def released_and_refused(run: Run, refused: str) -> None:
    """Reserve, release; the scheduler binds every member but `refused`, which it reports Unschedulable."""
    run.step()
    run.step()
    for key, pod in list(run.world.pods.items()):
        name = pod["metadata"]["name"]
        if not pod["spec"].get("schedulingGates") and name != refused:
            run.world.bind_one(name)
    run.world.refuse(refused)


def job_run(**settings) -> Run:
    world = Owners(nodes(2))
    run = Run(world, Settings(rollback_backoff_seconds=BACKOFF, **settings), JobController(world))
    return run


# --- an owner with a suspend switch -----------------------------------------------------------

def test_a_job_that_fails_to_bind_is_suspended_not_deleted_and_resumed_when_its_backoff_ends():
    run = job_run()
    released_and_refused(run, "train-1")
    before = run.world.owner(JOBS, "train")["metadata"]["resourceVersion"]
    rolled_back = run.step()
    (suspend,) = of(rolled_back, SuspendOwner)
    assert (suspend.resource.name, suspend.name) == (JOBS, "train")
    assert suspend.patch == {"metadata": {"resourceVersion": before, "annotations": {
        names.SUSPENDED_BY_ANNOTATION: "gangkeeper", names.RESUME_AT_ANNOTATION: stamp(NOW + 2 + BACKOFF)}},
        "spec": {"suspend": True}}
    assert of(rolled_back, DeletePod) == [], "deleting a Job's pods would spend its backoffLimit"
    (on_job,) = reports(rolled_back, "gang.suspended")
    assert on_job.involved[:3] == JOB and on_job.involved.uid == "uid-train" and on_job.warning
    assert "suspended Job train until" in reports(rolled_back, "gang.rolled_back")[0].message

    waited = [run.step() for _ in range(int(BACKOFF) - 1)]  # the Job controller deletes its pods meanwhile
    assert run.world.pods == {}
    assert not any(of(outcome, ResumeOwner) for outcome in waited)
    assert waited[-1].next_due == NOW + 2 + BACKOFF, "the runner wakes when the resume falls due"
    suspended = run.world.owner(JOBS, "train")
    resumed = run.step()
    assert [a.patch for a in of(resumed, ResumeOwner)] == [{
        "metadata": {"resourceVersion": suspended["metadata"]["resourceVersion"], "annotations": {
            names.SUSPENDED_BY_ANNOTATION: None, names.RESUME_AT_ANNOTATION: None}}, "spec": {"suspend": False}}]
    assert [r.involved[:3] for r in reports(resumed, "gang.resumed")] == [JOB]
    job = run.world.owner(JOBS, "train")
    assert job["spec"]["suspend"] is False and job["metadata"]["annotations"] == {}
    assert len(booked(run.step())) == 2, "its pods come back gated and are planned at once"


def test_a_suspension_that_meets_the_job_changed_since_it_was_read_is_decided_again():
    """The Job controller writes the Job's status whenever its pods change: a suspend patch sent
    on the Job as read before fails its resourceVersion precondition. Nothing was suspended, so
    nothing is to be resumed; the next pass finds the group as it was and suspends it again."""
    run = job_run()
    released_and_refused(run, "train-1")
    job = run.world.owner(JOBS, "train")
    rolled_back = reconcile(run.world.index(run.settings.accelerator_patterns), run.memory, run.now, run.settings)
    run.memory, run.now = rolled_back.memory, run.now + 1
    run.world.put_workload(JOBS, {**job, "status": {"active": 2}})  # the Job controller's write comes first
    run.world.apply(rolled_back.actions)
    assert of(rolled_back, SuspendOwner) and run.world.conflicts == 1
    assert not run.world.owner(JOBS, "train")["spec"].get("suspend"), "the suspension did not take effect"
    again = run.step()
    assert len(of(again, SuspendOwner)) == 1
    assert run.world.owner(JOBS, "train")["spec"]["suspend"] is True, "suspended on the next pass"
    assert not any(of(outcome, ResumeOwner) for outcome in (rolled_back, again))


def test_the_backoff_doubles_from_one_suspension_to_the_next():
    run = job_run()
    released_and_refused(run, "train-1")
    run.step()
    for _ in range(int(BACKOFF) + 1):
        run.step()
    released_and_refused(run, "train-3")
    again = run.step()
    (suspend,) = of(again, SuspendOwner)
    assert suspend.patch["metadata"]["annotations"][names.RESUME_AT_ANNOTATION] == stamp(run.now - 1 + 2 * BACKOFF)
    assert "rolled back 2×" in reports(again, "gang.rolled_back")[0].message


def test_a_new_leader_resumes_on_time_what_its_predecessor_suspended():
    run = job_run()
    released_and_refused(run, "train-1")
    run.step()
    run.step()
    run.memory = Memory()  # a new leader: all it knows is on the Job
    early = run.step()
    assert of(early, ResumeOwner) == [] and early.next_due == NOW + 2 + BACKOFF
    run.now = NOW + 2 + BACKOFF
    assert len(of(run.step(), ResumeOwner)) == 1


def test_an_owner_a_user_suspended_is_never_resumed_and_its_pods_are_not_planned():
    world = Owners(nodes(2))
    jobs = JobController(world)
    jobs.sync()  # its pods exist, gated, when the user suspends it
    world.put_workload(JOBS, merged(jobs.job, {"spec": {"suspend": True}}))
    run = Run(world, Settings())
    outcomes = [run.step(seconds=600) for _ in range(5)]
    assert not any(of(o, ResumeOwner) or booked(o) or of(o, SuspendOwner) for o in outcomes)
    assert "not by gangkeeper" in of(outcomes[0], SaveGang)[0].status["conditions"][0]["message"]


def test_a_user_who_takes_gangkeepers_mark_off_keeps_the_owner_suspended():
    run = job_run()
    released_and_refused(run, "train-1")
    run.step()
    run.step()
    job = run.world.owner(JOBS, "train")
    run.world.patch_owner(JOBS, "train", {"metadata": {"annotations": {names.SUSPENDED_BY_ANNOTATION: None}}})
    assert job["spec"]["suspend"] is True
    outcomes = [run.step(seconds=10) for _ in range(10)]
    assert not any(of(o, ResumeOwner) for o in outcomes)
    assert run.world.owner(JOBS, "train")["spec"]["suspend"] is True and run.world.pods == {}


def test_a_user_who_resumes_the_owner_first_is_left_alone_and_the_group_is_planned_at_once():
    run = job_run()
    released_and_refused(run, "train-1")
    run.step()
    run.step()
    run.world.patch_owner(JOBS, "train", {"spec": {"suspend": False}})  # our marks stay on it
    outcomes = [run.step() for _ in range(3)]
    assert not any(of(o, ResumeOwner) or of(o, SuspendOwner) for o in outcomes)
    assert len(booked(outcomes[0])) == 2, "its backoff ends with the suspension"
    assert run.now < NOW + 2 + BACKOFF


def test_a_resume_refused_for_a_stale_owner_is_sent_again_on_the_fresh_one_and_reported_once():
    run = job_run()
    released_and_refused(run, "train-1")
    run.step()
    run.now = NOW + 2 + BACKOFF
    run.jobs.sync()
    decided = reconcile(run.world.index(run.settings.accelerator_patterns), run.memory, run.now, run.settings)
    run.memory = decided.memory
    run.world.put_workload(JOBS, run.world.owner(JOBS, "train"))  # its controller writes first: a new version
    run.world.apply(decided.actions)
    assert run.world.conflicts == 1 and run.world.owner(JOBS, "train")["spec"]["suspend"] is True
    again = run.step()
    assert len(of(again, ResumeOwner)) == 1 and reports(again, "gang.resumed") == []
    assert run.world.owner(JOBS, "train")["spec"]["suspend"] is False
    assert len(reports(decided, "gang.resumed")) == 1


def test_a_pytorchjob_is_suspended_by_its_own_switch():
    world = Owners(nodes(2), [(PYTORCHJOBS, {"metadata": {"name": "pj"},
                                             "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2}}}})])
    for index in range(2):
        world.add(member_object(f"pj-{index}", group="pj-uid-pj", source=names.SOURCE_PYTORCHJOB,
                                owner=("PyTorchJob", "pj"), gpus=8, created=CREATED))
    run = Run(world, Settings())
    released_and_refused(run, "pj-1")
    (suspend,) = of(run.step(), SuspendOwner)
    assert suspend.patch["spec"] == {"runPolicy": {"suspend": True}}
    assert world.owner(PYTORCHJOBS, "pj")["spec"]["runPolicy"]["suspend"] is True


def trainjob_world(suspended_by_kueue: bool = False) -> Owners:
    """TrainJob `tune` and the JobSet the trainer renders for it (same name, owned by it), its two
    `node` pods gated; Kueue, when it manages the TrainJob, holds it suspended."""
    world = Owners(nodes(2))
    world.put_workload(trainjob.RESOURCE.name, {"metadata": {"name": "tune"}, "spec": {"suspend": suspended_by_kueue}})
    world.put_workload(JOBSETS, {"metadata": {"name": "tune", "ownerReferences": [
        {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "tune", "uid": "uid-tune",
         "controller": True}]}, "spec": {"suspend": suspended_by_kueue, "replicatedJobs": [
             {"name": "node", "template": {"spec": {"parallelism": 2, "completions": 2}}}]}})
    for index in range(2):
        pod = member_object(f"tune-node-0-{index}", group="tune-uid-tune-0", source=names.SOURCE_JOBSET,
                            owner=("Job", "tune-node-0"), gpus=8, created=CREATED)
        pod["metadata"]["labels"].update({names.JOBSET_NAME_LABEL: "tune", names.JOBSET_UID_LABEL: "uid-tune",
                                          names.JOBSET_REPLICATED_JOB_LABEL: "node"})
        world.add(pod)
    return world


def test_a_trainjobs_group_is_suspended_through_the_trainjob_whose_switch_sticks():
    world = trainjob_world()
    run = Run(world, Settings(rollback_backoff_seconds=BACKOFF))
    released_and_refused(run, "tune-node-0-1")
    (suspend,) = of(run.step(), SuspendOwner)
    assert (suspend.resource, suspend.name, suspend.patch["spec"]) == (trainjob.RESOURCE, "tune", {"suspend": True})
    assert world.owner(trainjob.RESOURCE.name, "tune")["spec"]["suspend"] is True
    assert world.owner(JOBSETS, "tune")["spec"]["suspend"] is False, "the JobSet's own switch is the trainer's to set"
    for key in list(world.pods):  # the trainer copies the switch onto the JobSet, whose Jobs' pods go
        world.delete(key)
    run.now = NOW + 10 + BACKOFF
    (resume,) = of(run.step(), ResumeOwner)
    assert (resume.resource, resume.name) == (trainjob.RESOURCE, "tune")
    assert world.owner(trainjob.RESOURCE.name, "tune")["spec"]["suspend"] is False


def test_a_trainjob_kueue_suspended_is_neither_planned_nor_resumed():
    run = Run(trainjob_world(suspended_by_kueue=True), Settings())
    outcomes = [run.step(seconds=600) for _ in range(3)]
    assert not any(of(o, ResumeOwner) or booked(o) or of(o, SuspendOwner) for o in outcomes)
    message = of(outcomes[0], SaveGang)[0].status["conditions"][0]["message"]
    assert message.startswith("TrainJob tune is suspended, not by gangkeeper")


def test_a_running_job_left_incomplete_past_the_bind_timeout_is_suspended():
    run = job_run(bind_timeout_seconds=20)
    run.step()
    run.step()
    for key in list(run.world.pods):
        run.world.bind_one(run.world.pods[key]["metadata"]["name"])
    lost = next(iter(run.world.pods))
    del run.world.nodes[run.world.pods[lost]["spec"]["nodeName"]]  # with its node; the replacement cannot fit
    run.world.delete(lost)
    outcomes = [run.step() for _ in range(25)]
    suspended = [o for o in outcomes if of(o, SuspendOwner)]
    assert len(suspended) == 1 and "incomplete" in reports(suspended[0], "gang.rolled_back")[0].message
    assert not any(of(o, DeletePod) for o in outcomes)


# --- members without an owner -----------------------------------------------------------------

def plain_run(**settings) -> Run:
    world = Owners(nodes(2))
    for index in range(2):
        world.add(member_object(f"plain-{index}", group="plain", min_count=2, gpus=8, created=CREATED))
    return Run(world, Settings(**settings))


def test_a_group_without_owner_that_fails_to_bind_loses_every_member_loudly_and_keeps_its_gang():
    run = plain_run()
    released_and_refused(run, "plain-1")
    assert run.world.pods[f"{NS}/plain-0"]["spec"]["nodeName"], "plain-0 is bound and holds 8 GPUs"
    rolled_back = run.step()
    assert [(a.pod, bool(a.why)) for a in of(rolled_back, DeletePod)] == [("plain-0", True), ("plain-1", True)]
    (report,) = reports(rolled_back, "gang.rolled_back")
    assert report.warning and report.on_pods and [p.name for p in report.pods] == ["plain-0", "plain-1"]
    assert report.involved[1:3] == ("Gang", "plain")
    status = of(rolled_back, SaveGang)[0].status
    assert status["phase"] == "Failed"
    rolled = next(c for c in status["conditions"] if c["type"] == "RolledBack")
    assert rolled["status"] == "True" and "1 bound, holding 8 accelerators" in rolled["message"]
    assert f"resubmit them (label {names.GROUP_LABEL}=plain): plain-0, plain-1" in rolled["message"]
    assert run.world.pods == {}
    gone = run.step()
    assert of(gone, DeleteGang) == [] and run.world.gang("plain") is not None, "its Gang says what to resubmit"


def test_a_group_given_up_stays_failed_while_its_members_go_and_is_planned_when_resubmitted():
    run = plain_run()
    released_and_refused(run, "plain-1")
    rolled_back = reconcile(run.world.index(run.settings.accelerator_patterns), run.memory, run.now, run.settings)
    run.memory = rolled_back.memory
    run.world.apply([a for a in rolled_back.actions if not (isinstance(a, DeletePod) and a.pod == "plain-0")])
    terminating = run.step()  # plain-0 is still on its node, terminating: it looks bound and running
    assert booked(terminating) == [] and reports(terminating, "gang.bound") == []
    status = run.world.gang("plain")["status"]
    assert status["phase"] == "Failed"
    assert "resubmit" in next(c for c in status["conditions"] if c["type"] == "RolledBack")["message"]
    run.world.delete(f"{NS}/plain-0")
    for index in (2, 3):
        run.world.add(member_object(f"plain-{index}", group="plain", min_count=2, gpus=8, created=CREATED))
    assert len(booked(run.step())) == 2


def test_keeping_members_without_owner_says_what_they_hold():
    run = plain_run(rollback_ownerless=Ownerless.KEEP)
    released_and_refused(run, "plain-1")
    rolled_back = run.step()
    assert of(rolled_back, DeletePod) == []
    message = reports(rolled_back, "gang.rolled_back")[0].message
    assert "kept 2 members no owner recreates (--rollback-ownerless=keep): 1 bound, holding 8 accelerators" in message
    status = of(rolled_back, SaveGang)[0].status
    assert status["phase"] == "Waiting"
    assert "holding 8 accelerators" in next(c for c in status["conditions"] if c["type"] == "RolledBack")["message"]
    assert len(run.world.pods) == 2


def test_a_group_that_lost_a_member_nothing_recreates_is_incomplete_and_rolled_back_after_the_bind_timeout():
    world = Owners(nodes(2))
    run = Run(world, Settings(bind_timeout_seconds=10.0))
    for i in range(2):
        world.add(member_object(f"pair-{i}", group="pair", min_count=2, gpus=8, created=CREATED))
    run.step()
    run.step()
    for name in ("pair-0", "pair-1"):
        world.bind_one(name)
    assert run.step().phases.get("Running") == 1
    lost_at = run.now
    world.delete(f"{NS}/pair-1")  # say, the stock scheduler preempted it: nothing recreates a plain pod
    deleted_at = []
    for _ in range(14):
        now = run.now
        deleted_at += [now for _ in of(run.step(), DeletePod)]
    assert deleted_at == [lost_at + 10], "a bind timeout after the loss, a replacement's chance"


def test_a_job_whose_pod_failed_gets_a_bind_timeout_for_its_replacement_before_it_is_rolled_back():
    run = job_run(bind_timeout_seconds=10.0)
    run.step()
    run.step()
    for name in ("train-0", "train-1"):
        run.world.bind_one(name)
    run.step()
    run.jobs = None  # the Job controller waits out its failure backoff before it recreates the pod
    failed_at = run.now
    run.world.finish(f"{NS}/train-0", "Failed")
    suspended_at = []
    for _ in range(14):
        now = run.now
        suspended_at += [now for _ in of(run.step(), SuspendOwner)]
    assert suspended_at == [failed_at + 10]


# --- an owner without a suspend switch: a LeaderWorkerSet --------------------------------------

class LeaderWorkerSets:
    """What an LWS's StatefulSets do as far as a rollback goes: its group 0's leader `ws-0` and
    worker `ws-0-1` exist, gated; a pod deleted comes back under its name with a new uid."""

    def __init__(self, world: Owners):
        self.world, self.incarnations = world, 0
        world.put_workload(LEADERWORKERSETS, {"metadata": {"name": "ws"}, "spec": {
            "replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {}}}})

    def sync(self) -> None:
        missing = [(index, name, owner) for index, (name, owner) in enumerate((("ws-0", "ws"), ("ws-0-1", "ws-0")))
                   if f"{NS}/{name}" not in self.world.pods]
        for worker_index, name, owner in missing:
            pod = member_object(name, group="ws-0-r1", source=names.SOURCE_LEADERWORKERSET,
                                owner=("StatefulSet", owner), gpus=8, created=CREATED,
                                uid=f"uid-{name}-{self.incarnations}")
            pod["metadata"]["labels"].update({names.LWS_NAME_LABEL: "ws",
                                              names.LWS_WORKER_INDEX_LABEL: str(worker_index)})
            self.world.add(pod)
        self.incarnations += bool(missing)


def test_an_lws_group_that_fails_to_bind_loses_its_pods_loudly_and_comes_back_whole():
    """No suspend switch: the group's pods are deleted, each on record, with Warning Events on the
    Gang and the pods; its StatefulSets create them again gated, and after the backoff the group is
    reserved whole again."""
    world = Owners(nodes(2))
    run = Run(world, Settings(rollback_backoff_seconds=BACKOFF), LeaderWorkerSets(world))
    released_and_refused(run, "ws-0-1")
    rolled_back = run.step()
    assert of(rolled_back, SuspendOwner) == []
    assert [(a.pod, a.uid, bool(a.why)) for a in of(rolled_back, DeletePod)] == [
        ("ws-0", "uid-ws-0-0", True), ("ws-0-1", "uid-ws-0-1-0", True)]
    (report,) = reports(rolled_back, "gang.rolled_back")
    assert report.warning and report.on_pods and [p.name for p in report.pods] == ["ws-0", "ws-0-1"]
    assert "deleted 2 members for their owner to recreate them gated" in report.message
    status = of(rolled_back, SaveGang)[0].status
    assert status["phase"] == "Waiting"
    recreated = [run.step() for _ in range(int(BACKOFF) - 1)]
    assert all(booked(outcome) == [] for outcome in recreated), "backing off"
    assert {p["metadata"]["uid"] for p in world.pods.values()} == {"uid-ws-0-1", "uid-ws-0-1-1"}
    assert {b.pod for b in booked(run.step())} == {"ws-0", "ws-0-1"}


# --- an MPIJob: its launcher is a Job's pod, its switch the MPIJob's runPolicy.suspend ------------

class MPIOperator:
    """What the MPI operator does as far as a rollback goes: MPIJob `pi`'s launcher Job (which
    makes the launcher pod) and its two workers, gated while it runs; none while it is suspended
    (the workers deleted, the launcher Job suspended, whose pod the Job controller deletes)."""

    def __init__(self, world: Owners):
        self.world, self.created = world, 0
        world.put_workload(MPIJOBS, {"metadata": {"name": "pi"}, "spec": {
            "runPolicy": {"suspend": False},
            "mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": {"replicas": 2}}}})
        world.put_workload(JOBS, {"metadata": {"name": "pi-launcher", "ownerReferences": [
            {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "pi", "uid": "uid-pi",
             "controller": True}]}, "spec": {}})

    def sync(self) -> None:
        pods = {pod["metadata"]["name"]: key for key, pod in self.world.pods.items()}
        if self.world.owner(MPIJOBS, "pi")["spec"]["runPolicy"]["suspend"]:
            for key in pods.values():
                self.world.delete(key)
            return
        for name, role, owner in (("pi-launcher-0", names.MPI_LAUNCHER, ("Job", "pi-launcher")),
                                  ("pi-worker-0", names.MPI_WORKER, ("MPIJob", "pi")),
                                  ("pi-worker-1", names.MPI_WORKER, ("MPIJob", "pi"))):
            if name not in pods:
                pod = member_object(name, group="pi-mpijob", source=names.SOURCE_MPIJOB, owner=owner, gpus=8,
                                    created=CREATED, uid=f"uid-{name}-{self.created}")
                pod["metadata"]["labels"].update({names.KUBEFLOW_JOB_NAME_LABEL: "pi",
                                                  names.KUBEFLOW_JOB_ROLE_LABEL: role})
                self.world.add(pod)
        self.created += 1


def test_an_mpijob_that_fails_to_bind_is_suspended_by_its_run_policy_and_resumed_whole():
    world = Owners(nodes(3))
    run = Run(world, Settings(rollback_backoff_seconds=BACKOFF), MPIOperator(world))
    released_and_refused(run, "pi-worker-1")
    rolled_back = run.step()
    (suspend,) = of(rolled_back, SuspendOwner)
    assert (suspend.resource.name, suspend.name, suspend.patch["spec"]) == (MPIJOBS, "pi",
                                                                          {"runPolicy": {"suspend": True}})
    assert of(rolled_back, DeletePod) == [], "its operator takes the pods back, the launcher's without a failure"
    run.now = NOW + 3 + BACKOFF
    (resume,) = of(run.step(), ResumeOwner)
    assert (resume.name, resume.patch["spec"]) == ("pi", {"runPolicy": {"suspend": False}})
    assert {b.pod for b in booked(run.step())} == {"pi-launcher-0", "pi-worker-0", "pi-worker-1"}


def test_an_mpijob_kueue_suspended_is_neither_planned_nor_resumed():
    world = Owners(nodes(3))
    MPIOperator(world).sync()  # its pods exist, gated, when Kueue suspends it
    world.put_workload(MPIJOBS, merged(world.owner(MPIJOBS, "pi"), {"spec": {"runPolicy": {"suspend": True}}}))
    run = Run(world, Settings())
    outcomes = [run.step(seconds=600) for _ in range(3)]
    assert not any(of(o, ResumeOwner) or booked(o) or of(o, SuspendOwner) for o in outcomes)
    assert of(outcomes[0], SaveGang)[0].status["conditions"][0]["message"].startswith(
        "MPIJob pi is suspended, not by gangkeeper")
