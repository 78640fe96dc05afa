"""The emulated operators against the Job controller's recording (tests/fixtures/kube-controller-manager-v1.36):
a pod deleted before it finished counts as failed, past backoffLimit the Job fails, and suspending
and resuming an owner takes its pods away and brings them back, gated again, without counting them.

Each test runs the operators on the emulated API server with gangkeeper's real webhook gating
the pods of an enforced namespace (nothing releases them: the recording's pods were gated too),
and checks what the operators write against the same schemas as the served-shapes test.
"""

import kubernetes_validate
import pytest

from gangkeeper import names
from sim.cluster import Cluster
from sim.operators.job import job_operator
from sim.operators.jobset import jobset_operator
from sim.operators.pytorchjob import pytorchjob_operator
from study.policies import gangkeeper_api
from tests.sim_cluster.served_schemas import JOBSET, KUBERNETES, PYTORCHJOB, validator

NS = "ml"
CONTAINER = {"name": "pytorch", "image": "img", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
TEMPLATE = {"spec": {"restartPolicy": "Never", "containers": [CONTAINER]}}


@pytest.fixture
def api(clock):
    api, _ = gangkeeper_api(clock.now)
    api.create("namespaces", {"metadata": {"name": NS, "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
    return api


@pytest.fixture
def cluster(api, clock):
    return Cluster(api, clock, [job_operator(api), jobset_operator(api), pytorchjob_operator(api)])


def indexed_job(name="train", backoff_limit=None):
    """The recording's Job: Indexed, parallelism 2, completions 2."""
    spec = {"parallelism": 2, "completions": 2, "completionMode": "Indexed", "template": TEMPLATE}
    if backoff_limit is not None:
        spec["backoffLimit"] = backoff_limit
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def pods(api) -> dict[str, dict]:
    return {p["metadata"]["uid"]: p for p in api.list("pods", namespace=NS)}


def all_gated(found: dict[str, dict]) -> bool:
    return all(any(g["name"] == names.SCHEDULING_GATE for g in p["spec"].get("schedulingGates") or ())
               for p in found.values())


def conditions(obj: dict) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in (obj.get("status") or {}).get("conditions") or ()}


def suspend(api, resource: str, name: str, suspended: bool, path=("spec", "suspend")) -> None:
    patch: dict = {path[-1]: suspended}
    for key in reversed(path[:-1]):
        patch = {key: patch}
    api.patch(resource, name, patch, namespace=NS)


def job(api, name="train") -> dict:
    return api.get("jobs", name, namespace=NS)


def valid_job(obj: dict) -> dict:
    assert kubernetes_validate.validate({"apiVersion": "batch/v1", "kind": "Job", **obj}, KUBERNETES,
                                        strict=True) == KUBERNETES
    return obj


def test_the_recorded_table_a_deleted_gated_pod_fails_suspending_and_resuming_counts_nothing(api, cluster):
    api.create("jobs", indexed_job(backoff_limit=6), namespace=NS)
    cluster.settle()
    created = pods(api)
    assert (job(api)["status"]["active"], job(api)["status"]["failed"]) == (2, 0)
    assert len(created) == 2 and all_gated(created)

    api.delete("pods", next(iter(created.values()))["metadata"]["name"], namespace=NS)
    cluster.settle()
    assert job(api)["status"]["failed"] == 1, "a gated, never scheduled pod deleted counts as failed"
    assert len(pods(api)) == 2 and all_gated(pods(api)), "replaced, gated"

    suspend(api, "jobs", "train", True)
    cluster.settle()
    suspended = valid_job(job(api))
    assert suspended["status"]["failed"] == 1 and pods(api) == {}
    assert conditions(suspended) == {"Suspended": ("True", "JobSuspended")}

    before = set(pods(api))
    suspend(api, "jobs", "train", False)
    cluster.settle()
    resumed = valid_job(job(api))
    assert (resumed["status"]["failed"], resumed["status"]["active"]) == (1, 2)
    assert conditions(resumed) == {"Suspended": ("False", "JobResumed")}
    assert resumed["status"]["startTime"] >= suspended["status"]["startTime"]
    again = pods(api)
    assert len(again) == 2 and not set(again) & before and all_gated(again), "new pods, through admission again"


def test_a_job_whose_pods_are_deleted_past_its_backoff_limit_fails_and_creates_no_more(api, cluster):
    api.create("jobs", indexed_job(), namespace=NS)  # backoffLimit defaults to 6
    cluster.settle()
    for _ in range(6):
        api.delete("pods", next(iter(pods(api).values()))["metadata"]["name"], namespace=NS)
        cluster.settle()
    assert job(api)["status"]["failed"] == 6 and "Failed" not in conditions(job(api)) and len(pods(api)) == 2
    api.delete("pods", next(iter(pods(api).values()))["metadata"]["name"], namespace=NS)
    cluster.settle()
    failed = valid_job(job(api))
    assert failed["status"]["failed"] == 8, "the seventh failure, and the other active pod deleted with the Job"
    assert conditions(failed) == {"FailureTarget": ("True", "BackoffLimitExceeded"),
                                  "Failed": ("True", "BackoffLimitExceeded")}
    assert pods(api) == {}
    cluster.settle()
    assert pods(api) == {}, "a failed Job creates no more pods"


def test_a_job_created_suspended_creates_no_pod_and_has_not_started(api, cluster):
    manifest = indexed_job()
    manifest["spec"]["suspend"] = True
    api.create("jobs", manifest, namespace=NS)
    cluster.settle()
    status = valid_job(job(api))["status"]
    assert pods(api) == {} and "startTime" not in status
    assert conditions(job(api)) == {"Suspended": ("True", "JobSuspended")}


def pytorchjob(name="pt", workers=1):
    replicas = {"Master": {"replicas": 1, "template": TEMPLATE}, "Worker": {"replicas": workers, "template": TEMPLATE}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
            "spec": {"pytorchReplicaSpecs": replicas}}


def test_a_pytorchjob_suspended_loses_its_pods_and_gets_them_back_gated_when_resumed(api, cluster):
    api.create("pytorchjobs", pytorchjob(), namespace=NS)
    cluster.settle()
    before = pods(api)
    assert len(before) == 2 and all_gated(before)
    suspend(api, "pytorchjobs", "pt", True, ("spec", "runPolicy", "suspend"))
    cluster.settle()
    suspended = api.get("pytorchjobs", "pt", namespace=NS)
    validator(PYTORCHJOB).validate(suspended)
    assert pods(api) == {} and conditions(suspended)["Suspended"] == ("True", "PyTorchJobSuspended")
    suspend(api, "pytorchjobs", "pt", False, ("spec", "runPolicy", "suspend"))
    cluster.settle()
    resumed = api.get("pytorchjobs", "pt", namespace=NS)
    validator(PYTORCHJOB).validate(resumed)
    assert conditions(resumed)["Suspended"] == ("False", "PyTorchJobResumed")
    again = pods(api)
    assert len(again) == 2 and not set(again) & set(before) and all_gated(again)


def jobset(name="js", replicas=2):
    job_template = {"spec": {"parallelism": 1, "completions": 1, "completionMode": "Indexed", "template": TEMPLATE}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name},
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": replicas, "template": job_template}]}}


def test_a_jobset_suspends_its_jobs_whose_pods_go_uncounted_and_come_back_gated(api, cluster):
    api.create("jobsets", jobset(), namespace=NS)
    cluster.settle()
    before = pods(api)
    assert len(before) == 2 and all_gated(before)
    suspend(api, "jobsets", "js", True)
    cluster.settle()
    suspended = api.get("jobsets", "js", namespace=NS)
    validator(JOBSET).validate(suspended)
    assert conditions(suspended)["Suspended"] == ("True", "SuspendedJobs")
    assert suspended["status"]["replicatedJobsStatus"][0]["suspended"] == 2
    jobs = api.list("jobs", namespace=NS)
    assert [j["spec"]["suspend"] for j in jobs] == [True, True] and pods(api) == {}
    assert [valid_job(j)["status"]["failed"] for j in jobs] == [0, 0]
    suspend(api, "jobsets", "js", False)
    cluster.settle()
    resumed = api.get("jobsets", "js", namespace=NS)
    validator(JOBSET).validate(resumed)
    assert conditions(resumed)["Suspended"] == ("False", "ResumeJobs")
    assert [j["spec"]["suspend"] for j in api.list("jobs", namespace=NS)] == [False, False]
    again = pods(api)
    assert len(again) == 2 and not set(again) & set(before) and all_gated(again)
