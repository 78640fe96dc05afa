"""The emulated operators: pods shaped like the recorded ones, recreation, completion."""

import re

from gangkeeper.names import JOB_COMPLETION_INDEX, JOB_NAME_LABEL, JOBSET_NAME_LABEL, KUBEFLOW_JOB_NAME_LABEL
from sim.cluster import Cluster
from sim.kubelet import Kubelet
from sim.operators.job import compress_indexes, job_operator
from sim.operators.job import reconcile as reconcile_job
from sim.operators.jobset import jobset_operator
from sim.operators.pytorchjob import pytorchjob_operator
from sim.scheduler import Scheduler
from sim.spec import load, node_manifests
from sim.training import world_size
from tests.sim.helpers import Handler, mutated_api
from tests.sim_cluster.conftest import fixture_pod, pods_of

CONTAINER = {"name": "pytorch", "image": "img", "ports": [{"name": "pytorchjob-port", "containerPort": 23456}],
             "resources": {"limits": {"nvidia.com/gpu": "1"}}}


def operators_only(api, clock):
    return Cluster(api, clock, [pytorchjob_operator(api), jobset_operator(api), job_operator(api)])


def full_cluster(api, clock, nodes=2):
    for manifest in node_manifests(load(f"nodes: [{{count: {nodes}}}]")):
        api.create("nodes", manifest)
    return Cluster(api, clock, [Scheduler(api), Kubelet(api), pytorchjob_operator(api), jobset_operator(api),
                                job_operator(api)])


def pytorchjob(name="pytorch-dist", workers=3, duration="60"):
    template = {"metadata": {"annotations": {"sim.gangkeeper.io/duration-seconds": duration}},
                "spec": {"containers": [CONTAINER]}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": "ml-training"},
            "spec": {"pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template},
                "Worker": {"replicas": workers, "restartPolicy": "OnFailure", "template": template}}}}


def jobset(name="trainer", replicas=2, parallelism=1, order=None, replicated=("workers",)):
    job_template = {"spec": {"parallelism": parallelism, "completions": parallelism, "completionMode": "Indexed",
                             "template": {"metadata": {"annotations": {
                                 "sim.gangkeeper.io/duration-seconds": "30",
                                 "sim.gangkeeper.io/world-size": str(replicas * parallelism * len(replicated))}},
                                 "spec": {"restartPolicy": "Never", "containers": [CONTAINER]}}}}
    spec = {"replicatedJobs": [{"name": r, "replicas": replicas, "template": job_template} for r in replicated]}
    if order:
        spec["startupPolicy"] = {"startupPolicyOrder": order}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": "ml-training"}, "spec": spec}


def env(pod):
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}


def test_pytorchjob_pods_look_like_the_training_operators(api, clock):
    cluster = operators_only(api, clock)
    job = api.create("pytorchjobs", pytorchjob())
    cluster.settle()
    pods = {p["metadata"]["name"]: p for p in api.list("pods")}
    assert sorted(pods) == ["pytorch-dist-master-0", "pytorch-dist-worker-0", "pytorch-dist-worker-1",
                            "pytorch-dist-worker-2"]
    for name, recorded in (("pytorch-dist-master-0", "01-mutate-create-pytorch-dist-master-0.json"),
                           ("pytorch-dist-worker-0", "03-mutate-create-pytorch-dist-worker-0.json")):
        expected = fixture_pod(recorded)
        assert pods[name]["metadata"]["labels"] == expected["metadata"]["labels"]
        reference = {**expected["metadata"]["ownerReferences"][0], "uid": job["metadata"]["uid"]}
        assert pods[name]["metadata"]["ownerReferences"] == [reference]
        assert [e["name"] for e in pods[name]["spec"]["containers"][0]["env"]] == \
            [e["name"] for e in expected["spec"]["containers"][0]["env"]]
        assert pods[name]["spec"]["restartPolicy"] == expected["spec"]["restartPolicy"]
    assert env(pods["pytorch-dist-master-0"]) | {"PYTHONUNBUFFERED": "1"} == {
        "MASTER_ADDR": "pytorch-dist-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "4", "RANK": "0",
        "PYTHONUNBUFFERED": "1"}
    assert env(pods["pytorch-dist-worker-2"])["RANK"] == "3"
    creators = {w.user for w in api.writes if w[:2] == ("create", "pods")}
    assert creators == {"system:serviceaccount:kubeflow:training-operator"}


def test_jobs_submitted_together_get_their_pods_interleaved(api, clock):
    cluster = operators_only(api, clock)
    api.create("pytorchjobs", pytorchjob("a", workers=2))
    api.create("pytorchjobs", pytorchjob("b", workers=2))
    cluster.settle()
    order = [w.name for w in api.writes if w[:2] == ("create", "pods")]
    assert order == ["a-master-0", "b-master-0", "a-worker-0", "b-worker-0", "a-worker-1", "b-worker-1"]


def test_a_deleted_pod_is_recreated_until_the_job_succeeds(api, clock):
    cluster = full_cluster(api, clock)
    api.create("pytorchjobs", pytorchjob(workers=1))
    cluster.run_until(clock.now() + 10)
    api.delete("pods", "pytorch-dist-worker-0", namespace="ml-training")
    cluster.settle()
    terminating = api.get("pods", "pytorch-dist-worker-0", namespace="ml-training")
    assert terminating["metadata"]["deletionTimestamp"]
    cluster.run_until(clock.now() + 1)  # the kubelet stops it and removes it; the operator recreates it
    replacement = api.get("pods", "pytorch-dist-worker-0", namespace="ml-training")
    assert replacement["metadata"]["uid"] != terminating["metadata"]["uid"]
    assert "deletionTimestamp" not in replacement["metadata"]
    cluster.run_until_idle(clock.now() + 3600)
    status = api.get("pytorchjobs", "pytorch-dist", namespace="ml-training")["status"]
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == {"Created": "True", "Running": "False", "Succeeded": "True"}
    assert status["replicaStatuses"]["Worker"] == {"active": 0, "succeeded": 1, "failed": 0}
    api.delete("pods", "pytorch-dist-worker-0", namespace="ml-training")
    cluster.settle()
    assert len(pods_of(api, KUBEFLOW_JOB_NAME_LABEL, "pytorch-dist")) == 1


def test_a_succeeded_job_stays_succeeded_when_its_pods_are_gone(api, clock):
    cluster = full_cluster(api, clock)
    api.create("pytorchjobs", pytorchjob(workers=1))
    cluster.run_until_idle(clock.now() + 3600)
    for name in ("pytorch-dist-master-0", "pytorch-dist-worker-0"):  # their node deleted: the pod GC removes them
        api.delete("pods", name, namespace="ml-training", grace_period_seconds=0)
    cluster.run_until_idle(clock.now() + 3600)
    status = api.get("pytorchjobs", "pytorch-dist", namespace="ml-training")["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]}["Succeeded"] == "True"
    assert pods_of(api, KUBEFLOW_JOB_NAME_LABEL, "pytorch-dist") == [], "a finished job is not run again"


def elastic(name="elastic", workers=4, duration="60", **policy):
    """A worker-only PyTorchJob with `elasticPolicy` (`policy`), as elastic jobs are written."""
    job = pytorchjob(name, workers, duration)
    del job["spec"]["pytorchReplicaSpecs"]["Master"]
    job["spec"]["elasticPolicy"] = policy
    return job


def test_an_elastic_jobs_pods_get_torchruns_rendezvous_and_no_master(api, clock):
    cluster = operators_only(api, clock)
    api.create("pytorchjobs", elastic(minReplicas=2, maxReplicas=4, maxRestarts=3))
    api.create("pytorchjobs", elastic("bounded", maxReplicas=3))
    api.create("pytorchjobs", elastic("unbounded", workers=5))
    cluster.settle()
    pods = {p["metadata"]["name"]: p for p in api.list("pods")}
    assert env(pods["elastic-worker-3"]) == {
        "PYTHONUNBUFFERED": "1", "PET_RDZV_ENDPOINT": "elastic-worker-0:23456", "PET_RDZV_BACKEND": "c10d",
        "PET_NNODES": "2:4", "PET_MAX_RESTARTS": "3"}
    assert env(pods["bounded-worker-0"])["PET_NNODES"] == "3:3", "a bound left out is the other one"
    assert env(pods["unbounded-worker-0"])["PET_NNODES"] == "5:5", "both left out: the workers' replicas"


def test_an_elastic_job_trains_with_its_minimum_running(api, clock):
    assert world_size({"metadata": {}, "spec": {"containers": [{"env": [{"name": "PET_NNODES", "value": "2:4"}]}]}}) == 2


def test_an_elastic_job_without_a_master_has_succeeded_once_a_worker_has(api, clock):
    cluster = full_cluster(api, clock, nodes=1)
    api.create("pytorchjobs", elastic(workers=2, minReplicas=1, maxReplicas=2))
    cluster.run_until_idle(clock.now() + 3600)
    status = api.get("pytorchjobs", "elastic", namespace="ml-training")["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]}["Succeeded"] == "True"


def test_a_job_scaled_down_loses_its_highest_indices(api, clock):
    cluster = operators_only(api, clock)
    api.create("pytorchjobs", elastic(minReplicas=2, maxReplicas=4))
    cluster.settle()
    api.patch("pytorchjobs", "elastic", {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2}}}},
              namespace="ml-training")  # as its HPA scales it
    cluster.settle()
    assert sorted(p["metadata"]["name"] for p in pods_of(api, KUBEFLOW_JOB_NAME_LABEL, "elastic")
                  if not p["metadata"].get("deletionTimestamp")) == ["elastic-worker-0", "elastic-worker-1"]


def batch_job(parallelism=3, completions=3, mode="Indexed"):
    spec = {"parallelism": parallelism, "completions": completions,
            "template": {"metadata": {"annotations": {"sim.gangkeeper.io/duration-seconds": "10",
                                                      "sim.gangkeeper.io/world-size": str(parallelism)}},
                         "spec": {"restartPolicy": "Never", "containers": [CONTAINER]}}}
    if mode:
        spec["completionMode"] = mode
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml"}, "spec": spec}


def test_indexed_job_pods_carry_index_and_job_labels(api, clock):
    cluster = operators_only(api, clock)
    job = api.create("jobs", batch_job())
    cluster.settle()
    pods = sorted(api.list("pods"), key=lambda p: p["metadata"]["name"])
    uid = job["metadata"]["uid"]
    for index, pod in enumerate(pods):
        assert re.fullmatch(rf"train-{index}-[bcdfghjklmnpqrstvwxz2456789]{{5}}", pod["metadata"]["name"])
        assert pod["metadata"]["labels"] == {
            "batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "train",
            "controller-uid": uid, "job-name": "train", "batch.kubernetes.io/job-completion-index": str(index)}
        assert pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == str(index)
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert {w.user for w in api.writes if w[:2] == ("create", "pods")} == {
        "system:serviceaccount:kube-system:job-controller"}


def test_non_indexed_job_pods_and_completion(api, clock):
    cluster = full_cluster(api, clock)
    api.create("jobs", batch_job(parallelism=2, completions=2, mode=None))
    cluster.settle()
    names = [p["metadata"]["name"] for p in api.list("pods")]
    assert len(names) == 2 and all(re.fullmatch(r"train-[a-z0-9]{5}", n) for n in names)
    cluster.run_until_idle(clock.now() + 3600)
    status = api.get("jobs", "train", namespace="ml")["status"]
    assert (status["succeeded"], status["active"]) == (2, 0)
    assert [c["type"] for c in status["conditions"]] == ["SuccessCriteriaMet", "Complete"]


def test_indexed_job_replaces_a_deleted_index(api, clock):
    cluster = operators_only(api, clock)
    api.create("jobs", batch_job())
    cluster.settle()
    lost = next(p for p in api.list("pods") if p["metadata"]["name"].startswith("train-1-"))
    api.delete("pods", lost["metadata"]["name"], namespace="ml")
    cluster.settle()
    indexes = sorted(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] for p in api.list("pods"))
    assert indexes == ["0", "1", "2"]


def test_a_job_counts_as_ready_only_its_active_pods():
    """`status.ready` is the Job controller's countReadyPods(activePods): a pod being deleted is not
    ready, whatever its condition still says."""
    job = {**batch_job(parallelism=2, completions=2), "metadata": {"name": "train", "namespace": "ml", "uid": "u"}}
    running = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    pods = {"train-0-a": {"metadata": {"name": "train-0-a", "annotations": {JOB_COMPLETION_INDEX: "0"}},
                          "status": running},
            "train-1-b": {"metadata": {"name": "train-1-b", "annotations": {JOB_COMPLETION_INDEX: "1"},
                                       "deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": running}}
    status = reconcile_job(job, pods, 0.0).status
    assert (status["ready"], status["active"], status["terminating"]) == (1, 1, 1)


def test_completed_indexes_are_compressed():
    assert compress_indexes({0, 1, 2, 3, 5, 7, 8}) == "0-3,5,7-8"


def test_jobset_pods_carry_the_labels_and_annotations_of_the_recorded_pod(api, clock):
    cluster = operators_only(api, clock)
    created = api.create("jobsets", jobset())
    cluster.settle()
    jobs = sorted(j["metadata"]["name"] for j in api.list("jobs"))
    assert jobs == ["trainer-workers-0", "trainer-workers-1"]
    assert {w.user for w in api.writes if w[:2] == ("create", "jobs")} == {
        "system:serviceaccount:jobset-system:jobset-controller-manager"}
    pod = next(p for p in api.list("pods") if p["metadata"]["labels"]["job-name"] == "trainer-workers-0")
    recorded = fixture_pod("05-mutate-create-trainer-workers-0-0-x7k2p.json")
    assert re.fullmatch(r"trainer-workers-0-0-[a-z0-9]{5}", pod["metadata"]["name"])
    assert set(pod["metadata"]["labels"]) == set(recorded["metadata"]["labels"])
    assert set(recorded["metadata"]["annotations"]) <= set(pod["metadata"]["annotations"])
    unique = {"batch.kubernetes.io/controller-uid", "controller-uid", "jobset.sigs.k8s.io/jobset-uid",
              "jobset.sigs.k8s.io/job-key"}
    for key, value in recorded["metadata"]["labels"].items():
        if key not in unique:
            assert pod["metadata"]["labels"][key] == value, key
    assert pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-uid"] == created["metadata"]["uid"]
    job = api.get("jobs", "trainer-workers-0", namespace="ml-training")
    assert job["metadata"]["ownerReferences"][0]["kind"] == "JobSet"


def test_jobset_pods_restart_on_failure_unless_their_template_says_as_the_jobset_webhook_defaults(api, clock):
    cluster = operators_only(api, clock)
    unsaid = jobset(name="unsaid")
    del unsaid["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["restartPolicy"]
    api.create("jobsets", unsaid)
    api.create("jobsets", jobset(name="never"))
    cluster.settle()
    policies = {p["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"]: p["spec"]["restartPolicy"]
                for p in api.list("pods")}
    assert policies == {"unsaid": "OnFailure", "never": "Never"}


def test_in_order_startup_waits_for_each_replicated_job_to_be_ready(api, clock):
    cluster = full_cluster(api, clock)
    api.create("jobsets", jobset(replicas=1, order="InOrder", replicated=("driver", "workers")))
    cluster.settle()
    assert [j["metadata"]["name"] for j in api.list("jobs")] == ["trainer-driver-0"]
    cluster.run_until(clock.now() + 5)
    assert sorted(j["metadata"]["name"] for j in api.list("jobs")) == ["trainer-driver-0", "trainer-workers-0"]


def test_a_jobset_completes_when_all_its_jobs_do(api, clock):
    cluster = full_cluster(api, clock)
    api.create("jobsets", jobset(replicas=2, parallelism=2))
    cluster.run_until_idle(clock.now() + 3600)
    status = api.get("jobsets", "trainer", namespace="ml-training")["status"]
    assert status["terminalState"] == "Completed"
    assert status["replicatedJobsStatus"] == [
        {"name": "workers", "ready": 0, "succeeded": 2, "failed": 0, "active": 0, "suspended": 0}]
    assert len(pods_of(api, JOBSET_NAME_LABEL, "trainer")) == 4
    assert all(p["status"]["phase"] == "Succeeded" for p in pods_of(api, JOB_NAME_LABEL, "trainer-workers-1"))


def test_a_refused_create_is_retried_after_a_delay_not_in_a_loop(clock):
    refusing = {"on": True}

    def decide(path, request):
        if refusing["on"]:
            raise ConnectionRefusedError("the webhook is not reachable")  # answered 500 by the API server
        return {"allowed": True}

    handler = Handler()
    handler.decide = decide
    api = mutated_api(clock, handler, "ml-training")
    cluster = operators_only(api, clock)
    api.create("pytorchjobs", pytorchjob(workers=1))
    cluster.settle()
    attempts = len([w for w in api.writes if w[:2] == ("create", "pods")])
    assert attempts == 1
    refusing["on"] = False
    cluster.run_until(clock.now() + 5)
    assert len(api.list("pods")) == 2
