"""The emulated MPI operator: reconcile by reconcile, the workers and launcher Job it makes, its
launcher creation policies, its suspension and its end; then the shipped example run to its end
on the emulated API server, in a namespace gangkeeper does not enforce, what it serves held to
the real MPIJob CRD (tests/fixtures/ecosystem/crds/, read with tests/crds.py)."""

from pathlib import Path

import pytest
import yaml

from gangkeeper import names
from gangkeeper.integrations import mpijob as mpijob_integration
from sim.cluster import emulated_cluster
from sim.names import DURATION_ANNOTATION, JOBS, MPIJOBS, PODS
from sim.operators import mpijob
from sim.operators.job import job_pod
from sim.spec import load
from study.policies import gangkeeper_api
from tests.crds import defaulted, ecosystem_crd, openapi_schema, resource_schema
from tests.sim_cluster.served_schemas import OBJECT_META, validator

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "ecosystem" / "examples" / "mpijob-pi.yaml"
NS = "hpc"
CRD = ("kubeflow.org_mpijobs", "v2beta1")
RUNNING = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
T0 = "1970-01-01T00:00:00Z"


def mpijob_object(status=None, workers=2, **spec):
    template = {"spec": {"containers": [{"name": "main", "image": "mpioperator/mpi-pi:openmpi"}]}}
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": "pi", "namespace": "hpc", "uid": "pi-uid"},
            "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": template},
                                         "Worker": {"replicas": workers, "template": template}}, **spec},
            "status": status or {}}


def made(plan, kind="Pod"):
    return {child["metadata"]["name"]: child for child in plan.create if child["kind"] == kind}


def existing(children, status=None, **job_status):
    """Children as the API server stores them: the pods in `status`, the Job with `job_status`."""
    out = {}
    for name, child in children.items():
        if child["kind"] == "Pod":
            out[name] = {**child, "metadata": {**child["metadata"], "uid": f"{name}-uid"}, "status": status or {}}
        else:
            out[name] = {**child, "metadata": {**child["metadata"], "uid": "job-uid"},
                         "spec": {"suspend": False, **child["spec"]}, "status": job_status}
    return out


def conditions(status):
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_at_startup_the_workers_and_the_launcher_job_are_made_as_the_operator_makes_them():
    plan = mpijob.reconcile(mpijob_object(runPolicy={"backoffLimit": 3, "ttlSecondsAfterFinished": 60}), {}, 0.0)
    workers, [launcher] = made(plan), made(plan, "Job").values()
    assert sorted(workers) == ["pi-worker-0", "pi-worker-1"]
    worker = workers["pi-worker-1"]
    assert worker["metadata"]["labels"] == {names.KUBEFLOW_OPERATOR_NAME_LABEL: "mpi-operator",
                                            names.KUBEFLOW_JOB_NAME_LABEL: "pi",
                                            names.KUBEFLOW_JOB_ROLE_LABEL: "worker",
                                            names.KUBEFLOW_REPLICA_INDEX_LABEL: "1"}
    assert (worker["spec"]["hostname"], worker["spec"]["subdomain"], worker["spec"]["restartPolicy"]) == (
        "pi-worker-1", "pi", "Never")
    assert worker["spec"]["containers"][0]["command"] == ["/usr/sbin/sshd", "-De"]
    assert launcher["metadata"]["name"] == "pi-launcher" and launcher["metadata"]["labels"] == {"app": "pi"}
    assert launcher["metadata"]["ownerReferences"][0]["uid"] == "pi-uid"
    assert (launcher["spec"]["backoffLimit"], launcher["spec"]["ttlSecondsAfterFinished"]) == (3, 60)
    template = launcher["spec"]["template"]
    assert template["metadata"]["labels"][names.KUBEFLOW_JOB_ROLE_LABEL] == "launcher"
    assert names.KUBEFLOW_REPLICA_INDEX_LABEL not in template["metadata"]["labels"]
    assert template["spec"]["restartPolicy"] == "OnFailure"
    assert {"name": "NVIDIA_VISIBLE_DEVICES"} in template["spec"]["containers"][0]["env"], "no rank: GPUs hidden"
    assert conditions(plan.status) == {"Created": ("True", "MPIJobCreated")}


def test_gangkeepers_rule_reads_the_pods_the_operator_and_its_launcher_job_make():
    plan = mpijob.reconcile(mpijob_object(), {}, 0.0)
    [launcher] = existing(made(plan, "Job")).values()
    pods = [*made(plan).values(), job_pod(launcher, None)]
    pods[-1]["metadata"]["name"] = "pi-launcher-x7k2p"
    assert {mpijob_integration.group_of(pod).identity.name for pod in pods} == {"pi-mpijob"}


def test_a_launcher_that_runs_as_a_worker_is_rank_0_and_keeps_its_gpus():
    plan = mpijob.reconcile(mpijob_object(runLauncherAsWorker=True), {}, 0.0)
    template = made(plan, "Job")["pi-launcher"]["spec"]["template"]
    assert template["metadata"]["labels"][names.KUBEFLOW_REPLICA_INDEX_LABEL] == "0"
    assert "NVIDIA_VISIBLE_DEVICES" not in {e["name"] for e in template["spec"]["containers"][0]["env"]}
    assert made(plan)["pi-worker-0"]["metadata"]["labels"][names.KUBEFLOW_REPLICA_INDEX_LABEL] == "1"


def test_waiting_for_the_workers_the_launcher_job_comes_once_every_worker_is_ready():
    job = mpijob_object(launcherCreationPolicy=names.MPI_WAIT_FOR_WORKERS_READY)
    plan = mpijob.reconcile(job, {}, 0.0)
    assert not made(plan, "Job") and len(made(plan)) == 2
    pending = existing(made(plan), {"phase": "Pending"})
    assert not made(mpijob.reconcile(job, pending, 1.0), "Job")
    half = {**pending, "pi-worker-0": {**pending["pi-worker-0"], "status": RUNNING}}
    assert not made(mpijob.reconcile(job, half, 2.0), "Job")
    ready = existing(made(plan), RUNNING)
    assert list(made(mpijob.reconcile(job, ready, 3.0), "Job")) == ["pi-launcher"]


def test_workers_beyond_the_replicas_are_deleted():
    children = existing(made(mpijob.reconcile(mpijob_object(), {}, 0.0)), RUNNING)
    plan = mpijob.reconcile(mpijob_object(workers=1), children, 1.0)
    assert [pod["metadata"]["name"] for pod in plan.delete] == ["pi-worker-1"]


def test_running_once_the_launcher_and_every_worker_run():
    first = mpijob.reconcile(mpijob_object(), {}, 0.0)
    job = mpijob_object(first.status)
    children = {**existing(made(first), RUNNING), **existing(made(first, "Job"), active=1)}
    assert "Running" not in conditions(mpijob.reconcile(job, children, 1.0).status), "its launcher pod not ready"
    children = {**children, **existing(made(first, "Job"), active=1, ready=1)}
    status = mpijob.reconcile(job, children, 2.0).status
    assert conditions(status)["Running"] == ("True", "MPIJobRunning")
    assert status["replicaStatuses"] == {"Launcher": {"active": 1}, "Worker": {"active": 2}}


def test_suspended_the_workers_go_and_the_launcher_job_is_suspended_then_both_come_back():
    first = mpijob.reconcile(mpijob_object(), {}, 0.0)
    children = {**existing(made(first), RUNNING), **existing(made(first, "Job"), active=1, ready=1)}
    suspended = mpijob.reconcile(mpijob_object(first.status, runPolicy={"suspend": True}), children, 10.0)
    assert sorted(pod["metadata"]["name"] for pod in suspended.delete) == ["pi-worker-0", "pi-worker-1"]
    assert [patch for _, patch in suspended.patch] == [{"spec": {"suspend": True}}]
    assert not suspended.create
    assert {k: v for k, v in conditions(suspended.status).items() if k != "Created"} == {
        "Suspended": ("True", "MPIJobSuspended"), "Running": ("False", "MPIJobSuspended")}
    job = existing(made(first, "Job"))["pi-launcher"]
    job["spec"]["suspend"] = True
    resumed = mpijob.reconcile(mpijob_object(suspended.status), {"pi-launcher": job}, 20.0)
    assert [patch for _, patch in resumed.patch] == [{"spec": {"suspend": False}}]
    assert sorted(made(resumed)) == ["pi-worker-0", "pi-worker-1"]
    assert conditions(resumed.status)["Suspended"] == ("False", "MPIJobResumed")
    assert resumed.status["startTime"] == "1970-01-01T00:00:20Z", "the clock starts again"


def test_an_mpijob_created_suspended_makes_its_launcher_job_suspended_and_no_worker():
    plan = mpijob.reconcile(mpijob_object(runPolicy={"suspend": True}), {}, 0.0)
    assert list(made(plan, "Job")) == ["pi-launcher"] and not made(plan)
    assert made(plan, "Job")["pi-launcher"]["spec"]["suspend"] is True


def test_it_ends_as_its_launcher_job_does():
    first = mpijob.reconcile(mpijob_object(), {}, 0.0)
    job = mpijob_object(first.status)
    complete = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1,
                "completionTime": "1970-01-01T00:01:40Z"}
    status = mpijob.reconcile(job, {**existing(made(first), RUNNING), **existing(made(first, "Job"), **complete)},
                              100.0).status
    assert conditions(status)["Succeeded"] == ("True", "MPIJobSucceeded")
    assert conditions(status)["Running"] == ("False", "MPIJobRunning")
    assert status["completionTime"] == "1970-01-01T00:01:40Z"
    assert status["replicaStatuses"] == {"Launcher": {"succeeded": 1}, "Worker": {}}
    failed = {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                              "message": "Job has reached the specified backoff limit"}], "failed": 7}
    status = mpijob.reconcile(job, existing(made(first, "Job"), **failed), 100.0).status
    assert conditions(status)["Failed"] == ("True", "BackoffLimitExceeded") and "completionTime" in status


@pytest.mark.parametrize("policy, deleted", [("Running", ["pi-worker-0"]), ("All", ["pi-worker-0", "pi-worker-1"]),
                                             (None, [])])
def test_once_ended_the_clean_pod_policy_deletes_workers(policy, deleted):
    ended = {"conditions": [{"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded"}],
             "completionTime": T0}
    workers = existing(made(mpijob.reconcile(mpijob_object(), {}, 0.0)), RUNNING)
    workers["pi-worker-1"]["status"] = {"phase": "Succeeded"}
    run_policy = {"cleanPodPolicy": policy} if policy else {}
    plan = mpijob.reconcile(mpijob_object(ended, runPolicy=run_policy), workers, 10.0)
    assert sorted(pod["metadata"]["name"] for pod in plan.delete) == deleted
    assert not plan.create and not plan.patch


# --- on the emulated API server -----------------------------------------------------------------

@pytest.fixture
def api(clock):
    api, _ = gangkeeper_api(clock.now)  # gangkeeper's webhooks installed; this namespace is not enforced
    api.create("namespaces", {"metadata": {"name": NS}})
    return api


def shipped_example(seconds: float) -> dict:
    """The shipped pi MPIJob, its launcher's `mpirun` lasting `seconds` (the emulation's duration annotation)."""
    example = yaml.safe_load(EXAMPLE.read_text())
    example["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"] = {
        "annotations": {DURATION_ANNOTATION: f"{seconds:g}"}}
    return example


def valid(obj: dict) -> dict:
    validator(resource_schema(ecosystem_crd(CRD[0]), CRD[1], OBJECT_META)).validate(obj)
    return obj


def test_the_shipped_example_runs_to_its_end_and_its_running_workers_are_cleaned_up(api, clock):
    cluster = emulated_cluster(api, clock, spec=load("nodes: [{count: 2, gpusPerNode: 0}]"))
    example = shipped_example(60)
    api.create(MPIJOBS, example, namespace=NS)
    stored = api.get(MPIJOBS, "pi", namespace=NS)
    assert stored["spec"] == defaulted(openapi_schema(ecosystem_crd(CRD[0]), CRD[1]), example)["spec"]
    assert cluster.run_until_idle(clock.now() + 600)
    done = valid(api.get(MPIJOBS, "pi", namespace=NS))
    assert conditions(done["status"]) == {"Created": ("True", "MPIJobCreated"), "Running": ("False", "MPIJobRunning"),
                                          "Succeeded": ("True", "MPIJobSucceeded")}
    assert done["status"]["replicaStatuses"] == {"Launcher": {"succeeded": 1}, "Worker": {}}, "counts gone to 0 left out"
    [launcher] = api.list(PODS, namespace=NS)
    assert launcher["metadata"]["labels"][names.KUBEFLOW_JOB_ROLE_LABEL] == "launcher", "cleanPodPolicy: Running"
    assert launcher["status"]["phase"] == "Succeeded"
    assert launcher["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}, \
        "the example's `cpu: 1` written as the operator's Go types write a quantity"
    job = api.get(JOBS, "pi-launcher", namespace=NS)
    assert job["status"]["succeeded"] == 1 and job["metadata"]["ownerReferences"][0]["uid"] == done["metadata"]["uid"]
