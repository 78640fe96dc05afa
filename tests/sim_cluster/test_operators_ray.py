"""The emulated KubeRay operator, reconcile by reconcile: a RayCluster's pods as KubeRay makes
and counts them, and a RayJob's way from its cluster to its submitter to its end, suspended and resumed."""

from gangkeeper import names
from gangkeeper.integrations import raycluster, rayjob
from sim.operators import ray
from sim.patching import apply_merge_patch

RUNNING = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}


def cluster(suspend=False, **group):
    worker = {"groupName": "gpu", "replicas": 2, "minReplicas": 1, "maxReplicas": 4, **group,
              "template": {"metadata": {"labels": {"team": "ml"}}, "spec": {"containers": [{"name": "ray-worker"}]}}}
    return {"kind": "RayCluster", "metadata": {"name": "rc", "namespace": "ml", "uid": "rc-uid"},
            "spec": {"suspend": suspend, "headGroupSpec": {"template": {"spec": {"containers": [
                {"name": "ray-head", "image": "rayproject/ray:2.52.0"}]}}}, "workerGroupSpecs": [worker]}}


def existing(plan, status=RUNNING):
    """The pods of a plan as the API server would store them, named, and running."""
    return {f"{pod['metadata']['generateName']}{index}": {**pod, "metadata": {
        **pod["metadata"], "name": f"{pod['metadata']['generateName']}{index}"}, "status": status}
        for index, pod in enumerate(plan.create)}


def test_a_cluster_makes_its_head_and_each_groups_replicas_labelled_and_owned_as_kuberay_does():
    plan = ray.reconcile_cluster(cluster(), {}, 0.0)
    assert [pod["metadata"]["generateName"] for pod in plan.create] == ["rc-head-", "rc-gpu-worker-", "rc-gpu-worker-"]
    head, worker = plan.create[0], plan.create[1]
    assert head["metadata"]["labels"][names.RAY_GROUP_LABEL] == names.RAY_HEAD_GROUP
    assert worker["metadata"]["labels"]["team"] == "ml"
    for pod in (head, worker):
        found = raycluster.group_of(pod)
        assert found.identity.name == "rc-rc-uid", "gangkeeper's rule reads the pods the operator makes"


def test_replicas_are_held_between_min_and_max_and_a_suspended_group_runs_none():
    assert ray.desired_workers({"replicas": 9, "minReplicas": 1, "maxReplicas": 4}) == 4
    assert ray.desired_workers({"replicas": 0, "minReplicas": 2, "numOfHosts": 2}) == 4
    assert ray.desired_workers({"replicas": 3, "suspend": True}) == 0


def test_a_cluster_is_ready_once_its_head_and_workers_run_and_deletes_what_its_count_lost():
    pods = existing(ray.reconcile_cluster(cluster(), {}, 0.0))
    status = ray.reconcile_cluster(cluster(), pods, 1.0).status
    assert status["state"] == "ready" and status["readyWorkerReplicas"] == 2
    scaled_down = ray.reconcile_cluster(cluster(replicas=1), pods, 2.0)
    assert len(scaled_down.delete) == 1 and not scaled_down.create


def test_a_suspended_cluster_deletes_every_pod_and_says_so_once_they_are_gone():
    pods = existing(ray.reconcile_cluster(cluster(), {}, 0.0))
    plan = ray.reconcile_cluster(cluster(suspend=True), pods, 1.0)
    assert len(plan.delete) == 3 and not plan.create
    assert ray.reconcile_cluster(cluster(suspend=True), {}, 2.0).status["state"] == "suspended"


def rayjob_object(status=None, **spec):
    return {"kind": "RayJob", "metadata": {"name": "rj", "namespace": "ml", "uid": "rj-uid"},
            "spec": {"entrypoint": "python main.py", "rayClusterSpec": cluster()["spec"], **spec},
            "status": status or {}}


def test_a_rayjob_creates_its_cluster_then_its_submitter_once_the_cluster_is_ready():
    started = ray.reconcile_rayjob(rayjob_object(), {}, 0.0)
    [made] = started.create
    assert started.status["jobDeploymentStatus"] == "Initializing"
    assert made["metadata"]["name"] == started.status["rayClusterName"] and made["metadata"]["name"].startswith("rj-")
    assert rayjob.switch_of(made) == ("rayjobs.ray.io", "rj", "rj-uid"), "the RayJob controls its cluster"
    job = rayjob_object(started.status)
    waiting = {made["metadata"]["name"]: {**made, "status": {"state": ""}}}
    assert not ray.reconcile_rayjob(job, waiting, 1.0).create, "no submitter before the cluster is ready"
    ready = {made["metadata"]["name"]: {**made, "status": {"state": "ready"}}}
    running = ray.reconcile_rayjob(job, ready, 2.0)
    [submitter] = running.create
    assert running.status["jobDeploymentStatus"] == "Running" and submitter["kind"] == "Job"
    template_labels = submitter["spec"]["template"]["metadata"]["labels"]
    assert template_labels[names.RAY_ORIGINATED_FROM_CRD_LABEL] == "RayJob"
    pod = {"metadata": {"labels": {**template_labels, names.JOB_NAME_LABEL: "rj"}}, "spec": {}}
    assert rayjob.group_of(pod) is not None, "gangkeeper leaves the submitter's pod alone"


def written(job: dict, plan) -> dict:
    """The RayJob once the API server merged the status the plan writes."""
    if plan.status is None:
        return job
    return {**job, "status": apply_merge_patch(job.get("status") or {}, plan.status)}


RUNNING_JOB = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "rayClusterName": "rj-abcde",
               "jobId": "rj-xyz12", "dashboardURL": "rj-abcde-head-svc.ml.svc.cluster.local:8265",
               "rayClusterStatus": {"state": "ready"}, "startTime": "2026-01-01T00:00:00Z", "succeeded": 0, "failed": 0}
CHILDREN = {"rj-abcde": {"kind": "RayCluster", "metadata": {"name": "rj-abcde"}, "status": {"state": "ready"}},
            "rj": {"kind": "Job", "metadata": {"name": "rj"}}}


def test_a_rayjob_counts_its_runs_from_its_first_status_and_completes_when_its_submitter_does():
    first = ray.reconcile_rayjob(rayjob_object(), {}, 0.0).status
    assert (first["succeeded"], first["failed"]) == (0, 0), "counted from the first status"
    done = {"type": "Complete", "status": "True"}
    children = {**CHILDREN, "rj": {**CHILDREN["rj"], "status": {"conditions": [done]}}}
    complete = written(rayjob_object(RUNNING_JOB), ray.reconcile_rayjob(rayjob_object(RUNNING_JOB), children, 5.0))
    assert (complete["status"]["jobDeploymentStatus"], complete["status"]["jobStatus"]) == ("Complete", "SUCCEEDED")
    assert (complete["status"]["succeeded"], complete["status"]["failed"]) == (1, 0)


def test_a_suspended_rayjob_deletes_its_cluster_and_submitter_and_starts_anew_when_resumed():
    """As KubeRay writes it: Suspending, then Suspended with what named the cluster and the Ray job
    cleared; resumed, New (no deployment status), then Initializing on a new cluster from a new
    start time. The suspension counts as no failure."""
    job = rayjob_object(RUNNING_JOB, suspend=True, shutdownAfterJobFinishes=True)
    suspending = ray.reconcile_rayjob(job, CHILDREN, 1.0)
    assert {child["kind"] for child in suspending.delete} == {"RayCluster", "Job"}
    job = written(job, suspending)
    assert job["status"]["jobDeploymentStatus"] == "Suspending"
    job = written(job, ray.reconcile_rayjob(job, {}, 2.0))
    assert job["status"] == {"jobDeploymentStatus": "Suspended", "startTime": "2026-01-01T00:00:00Z",
                             "succeeded": 0, "failed": 0}
    job = {**job, "spec": {**job["spec"], "suspend": False}}
    job = written(job, ray.reconcile_rayjob(job, {}, 3.0))
    assert job["status"] == {"startTime": "2026-01-01T00:00:00Z", "succeeded": 0, "failed": 0}, "New"
    started = ray.reconcile_rayjob(job, {}, 4.0)
    job = written(job, started)
    assert job["status"]["jobDeploymentStatus"] == "Initializing" and job["status"]["startTime"] == "1970-01-01T00:00:04Z"
    assert job["status"]["rayClusterName"] != "rj-abcde" and started.create[0]["kind"] == "RayCluster"
    assert (job["status"]["succeeded"], job["status"]["failed"]) == (0, 0)


def test_a_suspension_begun_is_carried_through_when_the_switch_is_cleared_meanwhile():
    job = written(rayjob_object(RUNNING_JOB, suspend=True, shutdownAfterJobFinishes=True),
                  ray.reconcile_rayjob(rayjob_object(RUNNING_JOB, suspend=True, shutdownAfterJobFinishes=True),
                                       CHILDREN, 1.0))
    cleared = {**job, "spec": {**job["spec"], "suspend": False}}
    still = ray.reconcile_rayjob(cleared, CHILDREN, 2.0)
    assert {child["kind"] for child in still.delete} == {"RayCluster", "Job"} and not still.create
    assert written(cleared, ray.reconcile_rayjob(cleared, {}, 3.0))["status"]["jobDeploymentStatus"] == "Suspended"


def test_kuberay_refuses_to_suspend_a_rayjob_that_keeps_its_cluster():
    plan = ray.reconcile_rayjob(rayjob_object({"jobDeploymentStatus": "Running"}, suspend=True), {}, 1.0)
    assert plan.status["jobDeploymentStatus"] == "ValidationFailed" and not plan.delete
