"""Elastic groups (controller/deciding/elastic.py), pass after pass on the stand-in API of
tests/controller/test_rollback.py: a running group that loses members degrades rather than
collapses, and says so; below its min count it is rolled back; its min count may change at any
time; a group of higher priority takes its elastic extras before any whole group."""

import copy

from gangkeeper import names
from gangkeeper.controller.cache.groups import GANGS, PYTORCHJOBS
from gangkeeper.controller.deciding.decisions import DeletePod, Reason, Release, SuspendOwner
from gangkeeper.controller.deciding.memory import Memory
from gangkeeper.controller.deciding.preempting import RETAKE_SECONDS
from gangkeeper.controller.deciding.reconciler import reconcile
from gangkeeper.controller.deciding.settings import Settings
from tests.controller.owners import Owners
from tests.controller.world import CREATED, NS, Run, booked, member_object, nodes, of, reports

JOB = "bert"
BIND_TIMEOUT = 20.0


class ElasticJob:
    """What the training operator does for an elastic PyTorchJob as far as its group goes: its
    `Worker.replicas` workers, 4 GPUs each, exist (gated, as admission leaves them) while it runs,
    none while it is suspended; a worker deleted comes back under its name with a new uid; a
    scale-down deletes the highest indices."""

    def __init__(self, world: Owners, least: int = 4, most: int = 8, replicas: int = 8, priority: int | None = None):
        self.world, self.priority, self.incarnation = world, priority, 0
        world.put_workload(PYTORCHJOBS, {"metadata": {"name": JOB}, "spec": {
            "elasticPolicy": {"minReplicas": least, "maxReplicas": most},
            "pytorchReplicaSpecs": {"Worker": {"replicas": replicas}}}})

    @property
    def job(self) -> dict:
        return self.world.owner(PYTORCHJOBS, JOB)

    def change(self, **fields) -> None:
        """The user (or the HPA) edits the job: `minReplicas`, `maxReplicas`, `replicas` (of the workers)."""
        job = copy.deepcopy(self.job)
        for field, value in fields.items():
            if field == "replicas":
                job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = value
            else:
                job["spec"]["elasticPolicy"][field] = value
        self.world.put_workload(PYTORCHJOBS, job)

    def workers(self) -> dict[int, str]:
        """Index → pod key of the workers there are."""
        return {int(pod["metadata"]["labels"][names.KUBEFLOW_REPLICA_INDEX_LABEL]): key
                for key, pod in self.world.pods.items() if pod["metadata"]["labels"].get(names.GROUP_LABEL) == JOB}

    def sync(self) -> None:
        present = self.workers()
        wanted = 0 if self.job["spec"].get("runPolicy", {}).get("suspend") else \
            self.job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"]
        for index, key in present.items():
            if index >= wanted:
                self.world.delete(key)
        for index in range(wanted):
            if index not in present:
                self.add(index)

    def add(self, index: int) -> None:
        pod = member_object(f"{JOB}-worker-{index}", group=JOB, source=names.SOURCE_PYTORCHJOB,
                            owner=("PyTorchJob", JOB), gpus=4, created=CREATED, priority=self.priority,
                            uid=f"uid-{JOB}-{index}-{self.incarnation}")
        pod["metadata"]["labels"].update({names.KUBEFLOW_JOB_NAME_LABEL: JOB, names.KUBEFLOW_REPLICA_TYPE_LABEL: "worker",
                                          names.KUBEFLOW_REPLICA_INDEX_LABEL: str(index)})
        self.world.add(pod)
        self.incarnation += 1


def elastic_run(node_count: int = 4, **job) -> Run:
    world = Owners(nodes(node_count))
    return Run(world, Settings(bind_timeout_seconds=BIND_TIMEOUT, rollback_backoff_seconds=30.0),
               ElasticJob(world, **job))


def steps(run: Run, count: int) -> list:
    """`count` passes, the scheduler binding what each released."""
    outcomes = []
    for _ in range(count):
        outcomes.append(run.step())
        run.world.bind()
    return outcomes


def bound(run: Run) -> int:
    return sum(1 for pod in run.world.pods.values() if pod["spec"].get("nodeName"))


def gang_status(run: Run) -> dict:
    (gang,) = [obj for key, obj in run.world.workloads.items() if key[0] == GANGS and key[2].startswith(JOB)]
    return gang["status"]


def degraded(status: dict) -> dict | None:
    return next((c for c in status.get("conditions") or () if c["type"] == "Degraded"), None)


def drain(run: Run, node: str) -> None:
    """The node cordoned and its pods evicted: their owner recreates them, gated."""
    run.world.node(node, unschedulable=True)
    for key, pod in list(run.world.pods.items()):
        if pod["spec"].get("nodeName") == node:
            run.world.delete(key)


def full(run: Run) -> None:
    steps(run, 8)
    assert bound(run) == 8


# --- degrade, don't collapse ---------------------------------------------------------------------

def test_an_elastic_job_is_admitted_at_its_minimum_and_grows_to_its_maximum_one_member_a_pass():
    run = elastic_run()
    first = run.step()
    assert len(booked(first)) == 4, "admitted at minReplicas"
    outcomes = steps(run, 6)
    assert [len(booked(o)) for o in outcomes] == [1, 1, 1, 1, 0, 0]
    assert bound(run) == 8 and degraded(gang_status(run)) is None, "growing is no loss"
    assert (gang_status(run)["placed"], gang_status(run)["peak"]) == (8, 8)


def test_a_running_job_that_loses_members_keeps_running_degraded_and_says_so_once():
    run = elastic_run()
    full(run)
    drain(run, "n3")
    outcomes = steps(run, 3 * int(BIND_TIMEOUT))
    assert not any(of(o, SuspendOwner) or of(o, DeletePod) for o in outcomes), "6 of min 4: no rollback"
    said = [r for o in outcomes for r in reports(o, "gang.degraded")]
    assert len(said) == 1 and said[0].warning and "6/8 members, min 4" in said[0].message
    status = gang_status(run)
    assert (status["phase"], status["placed"], status["peak"]) == ("Running", 6, 8)
    assert degraded(status)["status"] == "True" and degraded(status)["reason"] == Reason.MEMBERS_LOST
    assert degraded(status)["message"] == "6/8 members, min 4"
    assert outcomes[-1].degraded == {NS: 1}


def test_a_degraded_job_recovers_once_its_replacements_are_placed_and_says_so_once():
    run = elastic_run()
    full(run)
    drain(run, "n3")
    steps(run, 3)
    run.world.node("n3")  # uncordoned
    outcomes = steps(run, 5)
    assert bound(run) == 8
    assert len([r for o in outcomes for r in reports(o, "gang.recovered")]) == 1
    assert degraded(gang_status(run)) is None and outcomes[-1].degraded == {}


def test_a_restarted_controller_neither_repeats_the_degraded_event_nor_forgets_the_peak():
    run = elastic_run()
    full(run)
    drain(run, "n3")
    steps(run, 3)
    run.memory = Memory()  # a restart: the peak is read off the Gang
    restarted = steps(run, 2)
    assert not any(reports(o, "gang.degraded") for o in restarted)
    assert gang_status(run)["peak"] == 8 and restarted[-1].degraded == {NS: 1}


def test_below_its_min_count_a_degraded_job_is_rolled_back_after_the_bind_timeout():
    run = elastic_run()
    full(run)
    for node in ("n1", "n2", "n3"):
        drain(run, node)
    outcomes = steps(run, 3 * int(BIND_TIMEOUT))
    (suspended,) = [o for o in outcomes if of(o, SuspendOwner)]
    assert "2 of min count 4 members bound or reserved" in reports(suspended, "gang.rolled_back")[0].message


def test_a_job_scaled_down_lost_nothing():
    run = elastic_run()
    full(run)
    run.jobs.change(replicas=6)  # its HPA scales it down: the operator deletes the two last workers
    outcomes = steps(run, 3)
    assert not any(reports(o, "gang.degraded") for o in outcomes) and degraded(gang_status(run)) is None
    assert gang_status(run)["peak"] == 6


def test_members_beyond_the_elastic_maximum_stay_gated():
    run = elastic_run(least=2, most=4, replicas=6)
    outcomes = steps(run, 6)
    assert sum(len(booked(o)) for o in outcomes) == 4 and bound(run) == 4
    assert "2 beyond its maximum 4 stay gated" in gang_status(run)["conditions"][0]["message"]


# --- the minimum changes ---------------------------------------------------------------------------

def test_lowering_the_minimum_of_a_waiting_job_admits_it_in_the_next_pass():
    run = elastic_run(node_count=3, least=8)
    assert booked(run.step()) == [], "8 of 4 GPUs each do not fit on 3 nodes"
    run.jobs.change(minReplicas=6)
    assert len(booked(run.step())) == 6


def test_raising_the_minimum_above_what_runs_never_touches_the_members_running():
    run = elastic_run(node_count=3)
    steps(run, 6)
    assert bound(run) == 6
    run.jobs.change(minReplicas=7)
    outcomes = steps(run, 3 * int(BIND_TIMEOUT))
    assert not any(of(o, SuspendOwner) for o in outcomes) and gang_status(run)["phase"] == "Running"
    run.memory = Memory()  # nor does a restarted controller, which reads the peak off the Gang
    assert not any(of(o, SuspendOwner) for o in steps(run, 2 * int(BIND_TIMEOUT)))


def test_after_a_raised_minimum_a_loss_below_it_is_rolled_back():
    run = elastic_run(node_count=3)
    steps(run, 6)
    run.jobs.change(minReplicas=7)
    steps(run, 2)
    drain(run, "n2")
    outcomes = steps(run, 2 * int(BIND_TIMEOUT))
    (suspended,) = [o for o in outcomes if of(o, SuspendOwner)]
    assert "fewer than the 6 it had (its min count 7 was raised since)" in reports(suspended, "gang.rolled_back")[0].message


# --- preemption takes elastic extras first ---------------------------------------------------------

def urgent(world: Owners) -> None:
    """A group of one 8-GPU pod, of high priority."""
    world.add(member_object("urgent-0", group="urgent", min_count=1, gpus=8, priority=1000, created=CREATED))


def test_a_group_of_higher_priority_takes_elastic_extras_loudly_and_the_job_keeps_running():
    run = elastic_run(priority=10)
    full(run)
    urgent(run.world)
    jobs, run.jobs = run.jobs, None  # the operator has not recreated anything yet
    preempting = run.step()
    assert of(preempting, SuspendOwner) == []
    taken = of(preempting, DeletePod)
    assert sorted(a.pod for a in taken) == ["bert-worker-6", "bert-worker-7"], "the last in the job's order"
    assert all(a.reason is Reason.EXTRAS_PREEMPTED and "elastic extra" in a.why for a in taken)
    (said,) = reports(preempting, "gang.preempted")
    assert said.warning and said.on_pods and sorted(p.name for p in said.pods) == ["bert-worker-6", "bert-worker-7"]
    assert "took 2 elastic extras, members beyond its min count 4" in said.message
    assert "PyTorchJob bert recreates them, gated" in said.message
    (preemptor,) = reports(preempting, "gang.preempting")
    assert "team/bert-worker-7 (beyond the min count of bert)" in preemptor.message
    assert preempting.preemptions == {"extras": 2}
    run.jobs = jobs
    released = run.step()
    assert [a.pod for a in of(released, Release)] == ["urgent-0"], "released once the extras are gone"
    assert bound(run) == 6 and gang_status(run)["phase"] == "Running"


def test_extras_that_still_stand_are_deleted_again_never_their_owner_suspended():
    run = elastic_run(priority=10)
    full(run)
    urgent(run.world)
    run.jobs = None
    first = reconcile(run.world.index(), run.memory, run.now, run.settings)
    run.memory = first.memory
    run.world.apply([a for a in first.actions if not isinstance(a, DeletePod)])  # refused: the extras stand
    assert len(of(first, DeletePod)) == 2
    run.now += RETAKE_SECONDS
    again = run.step()
    assert sorted(a.pod for a in of(again, DeletePod)) == ["bert-worker-6", "bert-worker-7"]
    assert of(again, SuspendOwner) == []


def test_when_extras_are_not_enough_the_job_is_taken_whole():
    run = elastic_run(node_count=2, least=3, most=4, replicas=4, priority=10)
    steps(run, 4)
    assert bound(run) == 4
    urgent(run.world)
    preempting = run.step()
    assert [a.name for a in of(preempting, SuspendOwner)] == [JOB], "one extra frees half a node: taken whole"
    assert of(preempting, DeletePod) == []


def test_the_extras_come_back_gated_and_wait_for_room_taken_once():
    run = elastic_run(priority=10)
    full(run)
    urgent(run.world)
    run.step()
    outcomes = steps(run, 12)
    back = [run.world.pods[f"{NS}/bert-worker-{i}"] for i in (6, 7)]
    assert all(pod["spec"].get("schedulingGates") for pod in back), "recreated, gated, waiting for room"
    assert not any(of(o, DeletePod) for o in outcomes), "taken once"
    assert gang_status(run)["phase"] == "Running" and degraded(gang_status(run))["message"] == "6/8 members, min 4"
