"""`plan -f`'s reading of a manifest: the pods each kind's operator would create, admitted as the
API server's Priority plugin and gangkeeper's webhook would admit them, grouped and sized by the
controller's own grouping — the groups and sizes gangkeeper would find once it is submitted."""

import pytest
import yaml

from gangkeeper import names
from gangkeeper.controller.reading.pods import pod_facts
from gangkeeper.controller.reading.workloads import workload_from_api
from gangkeeper.plugin import submitted
from gangkeeper.plugin.reading import Cluster
from tests.plugin.world import CREATED, NOW
from tests.recorded import FIXTURES

ECOSYSTEM = FIXTURES / "ecosystem" / "examples"
GPU = {"resources": {"limits": {"nvidia.com/gpu": "8"}}}


def template(**spec):
    return {"metadata": {"labels": {"app": "train"}}, "spec": {"containers": [{"name": "main", **GPU}], **spec}}


def groups_of(*documents, classes=None):
    """{group key: (min count, members, problem)} as the controller would group the pods the
    documents make, and the pods and documents left out."""
    made = submitted.expand(list(documents), "team", CREATED)
    pods, left_out = [], list(made.left_out)
    for pod in made.pods:
        admitted, reason = submitted.admitted(pod, classes or {}, names.DEFAULT_ACCELERATORS)
        if admitted is None:
            left_out.append(f"{pod['metadata']['name']}: {reason}")
        else:
            pods.append(pod_facts(admitted))
    workloads = [workload_from_api(resource, obj) for resource, obj in made.owners]
    index = Cluster((), (), {}, (), ()).index(pods, workloads)
    views = index.pending({}, NOW).views
    return {view.group.key: (view.group.min_count, len(view.group.members), view.problem) for view in views}, left_out


def obj(kind, api_version, name, spec, **metadata):
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, **metadata}, "spec": spec}


def test_a_job_is_one_group_of_the_pods_it_runs_at_once():
    job = obj("Job", "batch/v1", "train", {"parallelism": 3, "completions": 5, "template": template()})
    assert groups_of(job) == ({("team", "train-new"): (3, 3, None)}, [])


def test_a_jobsets_replicated_jobs_are_one_group_or_one_per_stage():
    spec = {"replicatedJobs": [
        {"name": "driver", "replicas": 1, "template": {"spec": {"template": template()}}},
        {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 2, "completions": 2,
                                                                  "template": template()}}}]}
    assert groups_of(obj("JobSet", "jobset.x-k8s.io/v1alpha2", "run", spec))[0] == {
        ("team", "run-new-0"): (5, 5, None)}
    in_order = {**spec, "startupPolicy": {"startupPolicyOrder": "InOrder"}}
    assert groups_of(obj("JobSet", "jobset.x-k8s.io/v1alpha2", "run", in_order))[0] == {
        ("team", "run-new-0/driver"): (1, 1, None), ("team", "run-new-0/workers"): (4, 4, None)}


def test_a_pytorchjob_counts_every_replica_unless_it_says_fewer_suffice():
    spec = {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template()},
                                    "Worker": {"replicas": 3, "template": template()}}}
    assert groups_of(obj("PyTorchJob", "kubeflow.org/v1", "pt", spec))[0] == {("team", "pt-new"): (4, 4, None)}
    elastic = {**spec, "runPolicy": {"schedulingPolicy": {"minAvailable": 2}}}
    assert groups_of(obj("PyTorchJob", "kubeflow.org/v1", "pt", elastic))[0] == {("team", "pt-new"): (2, 4, None)}


def test_an_mpijobs_launcher_is_a_member_or_a_group_after_its_workers():
    spec = {"mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": template()},
                                "Worker": {"replicas": 2, "template": template()}}}
    assert groups_of(obj("MPIJob", "kubeflow.org/v2beta1", "mpi", spec))[0] == {("team", "mpi-mpijob"): (3, 3, None)}
    waits = {**spec, "launcherCreationPolicy": "WaitForWorkersReady"}
    assert groups_of(obj("MPIJob", "kubeflow.org/v2beta1", "mpi", waits))[0] == {
        ("team", "mpi-mpijob/launcher"): (1, 1, None), ("team", "mpi-mpijob/worker"): (2, 2, None)}


def test_a_leaderworkerset_is_a_group_per_replica():
    spec = {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "workerTemplate": template()}}
    assert groups_of(obj("LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1", "serve", spec))[0] == {
        ("team", "serve-0-new"): (3, 3, None), ("team", "serve-1-new"): (3, 3, None)}


def test_a_ray_cluster_is_its_head_and_minimum_workers_and_a_rayjob_makes_one():
    cluster = {"headGroupSpec": {"template": template()},
               "workerGroupSpecs": [{"groupName": "gpu", "replicas": 3, "minReplicas": 2, "maxReplicas": 4,
                                     "template": template()}]}
    assert groups_of(obj("RayCluster", "ray.io/v1", "ray", cluster))[0] == {("team", "ray-new"): (3, 4, None)}
    rayjob = obj("RayJob", "ray.io/v1", "job", {"rayClusterSpec": cluster, "shutdownAfterJobFinishes": True})
    assert groups_of(rayjob)[0] == {("team", "job-cluster-new"): (3, 4, None)}


def test_pods_a_gang_declares_and_a_lone_accelerator_pod_and_what_the_webhook_leaves_alone():
    labelled = [obj("Pod", "v1", f"p{i}", template()["spec"], labels={names.GROUP_LABEL: "pair"}) for i in range(2)]
    declared = obj("Gang", "gangkeeper.io/v1alpha1", "pair", {"minCount": 2})
    lone = obj("Pod", "v1", "solo", template()["spec"])
    web = obj("Pod", "v1", "web", {"containers": [{"name": "nginx"}]})
    groups, left_out = groups_of(*labelled, declared, lone, web)
    assert groups == {("team", "pair"): (2, 2, None), ("team", "solo/pod/solo"): (1, 1, None)}
    assert left_out == ["web: not a training pod: no group label, no training owner, no accelerator request"]


def test_what_plan_does_not_read_is_left_out_and_said_why():
    trainjob = obj("TrainJob", "trainer.kubeflow.org/v1alpha1", "t", {})
    deployment = obj("Deployment", "apps/v1", "d", {})
    config = obj("ConfigMap", "v1", "c", {})
    v1_mpijob = obj("MPIJob", "kubeflow.org/v1", "old", {})
    made = submitted.expand([trainjob, deployment, config, v1_mpijob], "team", CREATED)
    assert made.pods == () and [line.split(":")[0] for line in made.left_out] == [
        "TrainJob t", "Deployment d", "ConfigMap c", "MPIJob old"]
    assert "(Cluster)TrainingRuntime" in made.left_out[0]


def test_a_suspended_workload_makes_no_pods_until_it_is_resumed():
    job = obj("Job", "batch/v1", "train", {"suspend": True, "template": template()})
    pytorch = obj("PyTorchJob", "kubeflow.org/v1", "pt", {"runPolicy": {"suspend": True},
                                                         "pytorchReplicaSpecs": {"Worker": {"template": template()}}})
    made = submitted.expand([job, pytorch], "team", CREATED)
    assert made.pods == () and made.left_out == (
        "Job train: it is suspended (spec.suspend): its operator creates no pods until it is resumed",
        "PyTorchJob pt: it is suspended (spec.runPolicy.suspend): its operator creates no pods until it is resumed")


def test_pods_get_their_priority_as_the_api_server_gives_it():
    job = obj("Job", "batch/v1", "train", {"template": template(priorityClassName="high")})
    (pod,) = submitted.expand([job], "team", CREATED).pods
    high = {"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"}
    fallback = {"metadata": {"name": "fallback"}, "value": 7, "globalDefault": True}
    admitted, _ = submitted.admitted(pod, {"high": high, "fallback": fallback}, names.DEFAULT_ACCELERATORS)
    assert (admitted["spec"]["priority"], admitted["spec"]["preemptionPolicy"]) == (1000, "Never")
    unnamed = submitted.expand([obj("Job", "batch/v1", "t", {"template": template()})], "team", CREATED).pods[0]
    admitted, _ = submitted.admitted(unnamed, {"fallback": fallback}, names.DEFAULT_ACCELERATORS)
    assert (admitted["spec"]["priority"], admitted["spec"]["priorityClassName"]) == (7, "fallback")
    assert names.SCHEDULING_GATE in [gate["name"] for gate in admitted["spec"]["schedulingGates"]]
    with pytest.raises(submitted.BadManifest, match="spec.priorityClassName 'high' names no PriorityClass"):
        submitted.admitted(pod, {"fallback": fallback}, names.DEFAULT_ACCELERATORS)


@pytest.mark.parametrize("document, message", [
    ({"apiVersion": "v1", "metadata": {"name": "x"}}, "document 1 is not a Kubernetes object: it has no kind"),
    ({"kind": "Job", "apiVersion": "batch/v1", "metadata": {}}, "document 1 (Job) has no metadata.name"),
    (obj("Job", "batch/v1", "train", {"parallelism": "many"}),
     "document 1 (Job train) cannot be read: invalid literal for int() with base 10: 'many'"),
])
def test_a_document_that_cannot_be_planned_is_named(document, message):
    with pytest.raises(submitted.BadManifest, match=message.replace("(", r"\(").replace(")", r"\)")):
        submitted.expand([document], "team", CREATED)


@pytest.mark.parametrize("example, groups", [
    ("jobset-depends-on", {"depends-on-new-0/initializer": 1, "depends-on-new-0/launcher": 1,
                           "depends-on-new-0/worker": 4}),
    ("jobset-pytorch-resnet", {"pytorch-new-0": 4}),
    ("leaderworkerset", {f"leaderworkerset-sample-{i}-new": 4 for i in range(3)}),
    ("mpijob-pi", {"pi-mpijob": 3}),
    ("raycluster", {"raycluster-kuberay-new": 2}),
    ("rayjob", {"rayjob-sample-cluster-new": 2}),
])
def test_the_ecosystems_shipped_examples_are_grouped_as_their_operators_pods_would_be(example, groups):
    documents = [d for d in yaml.safe_load_all((ECOSYSTEM / f"{example}.yaml").read_text()) if d]
    found, _ = groups_of(*documents)
    assert {key[1]: (size, members, problem) for key, (size, members, problem) in found.items()} == {
        name: (size, size, None) for name, size in groups.items()}
