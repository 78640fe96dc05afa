"""Kubeflow MPIJob v2beta1: its launcher and workers are one group, keyed by the MPIJob's name; the
workers, then the launcher, under WaitForWorkersReady; the launcher proven through the Job that
owns it; `spec.runPolicy.suspend` is the switch, and the MPIJob's end is its group's."""

from gangkeeper import identity, names
from gangkeeper.integrations import job, mpijob
from gangkeeper.integrations.kind import Through
from tests.integrations.pods import owner, pod

MPIJOB_UID = "0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
JOB_UID = "5f6e7d8c-9b0a-4f1e-8d2c-3b4a5f6e7d8c"
MPIJOB_OWNER = owner("MPIJob", "pi", MPIJOB_UID, "kubeflow.org/v2beta1")
LAUNCHER_JOB = owner("Job", "pi-launcher", JOB_UID, "batch/v1")


def mpi_pod(role, name, owners, gpus=0):
    """A pod as the MPI operator (a worker) or its launcher Job (the launcher) makes it."""
    labels = {names.KUBEFLOW_JOB_NAME_LABEL: "pi", names.KUBEFLOW_JOB_ROLE_LABEL: role,
              names.KUBEFLOW_OPERATOR_NAME_LABEL: "mpi-operator"}
    if role == names.MPI_LAUNCHER:
        labels.update({names.JOB_NAME_LABEL: "pi-launcher", names.JOB_CONTROLLER_UID_LABEL: JOB_UID})
    return pod(name, labels, owners=owners, gpus=gpus)


def worker(index=0, owners=(MPIJOB_OWNER,)):
    return mpi_pod(names.MPI_WORKER, f"pi-worker-{index}", owners, gpus=1)


def launcher(owners=(LAUNCHER_JOB,), gpus=0):
    return mpi_pod(names.MPI_LAUNCHER, "pi-launcher-x7k2p", owners, gpus=gpus)


def mpijob_object(status=None, **spec):
    return {"metadata": {"name": "pi", "uid": MPIJOB_UID, "resourceVersion": "4"},
            "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": {"replicas": 2}}, **spec},
            "status": status or {}}


def test_the_launcher_and_every_worker_are_one_group_named_after_the_mpijob():
    found = [identity.classify(p, namespace="ml") for p in (launcher(), worker(0), worker(1))]
    assert {(f.identity.name, f.identity.source) for f in found} == {("pi-mpijob", names.SOURCE_MPIJOB)}
    assert found[0].reason == "MPIJob pi, its launcher" and found[1].reason == "MPIJob pi, a worker"


def test_a_launcher_without_accelerators_is_a_member_and_asked_before_the_job_rule():
    assert job.group_of(launcher()) is not None, "the Job rule would group it as a Job of one"
    assert identity.classify(launcher(gpus=0), namespace="ml").identity.source == names.SOURCE_MPIJOB


def test_pods_not_owned_as_the_mpi_operator_owns_them_are_left_to_the_other_rules():
    v1_mpijob = owner("MPIJob", "pi", MPIJOB_UID, "kubeflow.org/v1")  # the training operator's MPIJob
    another_job = owner("Job", "pi-runner", JOB_UID, "batch/v1")
    not_controlling = owner("MPIJob", "pi", MPIJOB_UID, "kubeflow.org/v2beta1", controller=False)
    assert mpijob.group_of(worker(owners=(v1_mpijob,))) is None
    assert mpijob.group_of(worker(owners=(not_controlling,))) is None
    assert mpijob.group_of(worker(owners=())) is None
    assert mpijob.group_of(launcher(owners=(another_job,))) is None
    assert mpijob.group_of(launcher(owners=(MPIJOB_OWNER,))) is None, "the launcher comes from its Job"
    no_role = worker()
    del no_role["metadata"]["labels"][names.KUBEFLOW_JOB_ROLE_LABEL]
    assert mpijob.group_of(no_role) is None


def test_a_long_name_makes_a_valid_label_alike_for_the_launcher_and_the_workers():
    long = "a" * 70
    pods = [launcher(owners=(owner("Job", f"{long}-launcher", JOB_UID, "batch/v1"),)),
            worker(owners=(owner("MPIJob", long, MPIJOB_UID, "kubeflow.org/v2beta1"),))]
    for p in pods:
        p["metadata"]["labels"][names.KUBEFLOW_JOB_NAME_LABEL] = long
    labels = {mpijob.group_of(p).identity.name for p in pods}
    assert len(labels) == 1 and len(labels.pop()) <= 63


def test_at_startup_the_group_is_the_workers_and_the_launcher():
    assert mpijob.declaration(mpijob_object())["sizes"] == {"": 3}
    assert "parts" not in mpijob.declaration(mpijob_object(launcherCreationPolicy="AtStartup"))
    assert mpijob.declaration(mpijob_object(runLauncherAsWorker=True))["sizes"] == {"": 3}


def test_waiting_for_the_workers_the_launcher_is_a_part_of_its_own_after_them():
    declared = mpijob.declaration(mpijob_object(launcherCreationPolicy=names.MPI_WAIT_FOR_WORKERS_READY))
    assert declared["sizes"] == {names.MPI_WORKER: 2, names.MPI_LAUNCHER: 1}
    assert declared["parts"] == {"worker": "worker", "launcher": "launcher"}
    assert mpijob.INTEGRATION.part_label == names.KUBEFLOW_JOB_ROLE_LABEL


def test_workers_not_given_are_none_as_the_operator_defaults_them():
    assert mpijob.declaration({"metadata": {}, "spec": {"mpiReplicaSpecs": {"Launcher": {}}}})["sizes"] == {"": 1}


def test_a_worker_declares_through_its_owner_and_the_launcher_through_its_job():
    labels = {names.KUBEFLOW_JOB_NAME_LABEL: "pi", names.KUBEFLOW_JOB_ROLE_LABEL: names.MPI_WORKER}
    assert mpijob.declarer("pi-mpijob", labels, ("pi", MPIJOB_UID)) == ("pi", MPIJOB_UID)
    labels[names.KUBEFLOW_JOB_ROLE_LABEL] = names.MPI_LAUNCHER
    assert mpijob.declarer("pi-mpijob", labels, ("pi-launcher", JOB_UID)) == (
        "pi", Through("jobs.batch", "pi-launcher", JOB_UID))
    assert mpijob.declarer("pi-mpijob", labels, None) is None
    assert set(mpijob.INTEGRATION.kept_labels) == {names.KUBEFLOW_JOB_NAME_LABEL, names.KUBEFLOW_JOB_ROLE_LABEL}


def test_run_policy_suspend_is_the_switch():
    declared = mpijob.declaration(mpijob_object(runPolicy={"suspend": True}))
    assert declared["suspend"].suspended and declared["suspend"].resource_version == "4"
    assert mpijob.SUSPENSION.patch(mpijob_object(), True) == {"metadata": {"resourceVersion": "4"},
                                                             "spec": {"runPolicy": {"suspend": True}}}


def test_the_mpijob_has_ended_once_its_operator_says_so_with_a_completion_time():
    succeeded = {"type": "Succeeded", "status": "True"}
    failed = {"type": "Failed", "status": "True"}
    running = {"type": "Running", "status": "False"}
    stamp = "2027-01-15T08:00:00Z"
    assert mpijob.declaration(mpijob_object({"conditions": [running, succeeded], "completionTime": stamp}))[
        "finished"] == "Succeeded"
    assert mpijob.declaration(mpijob_object({"conditions": [failed], "completionTime": stamp}))["finished"] == "Failed"
    assert "finished" not in mpijob.declaration(mpijob_object({"conditions": [failed]})), "evicted: not over yet"
    assert "finished" not in mpijob.declaration(mpijob_object({"conditions": [{**succeeded, "status": "False"}],
                                                               "completionTime": stamp}))
