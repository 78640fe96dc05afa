"""Kubeflow PyTorchJob: one group per job, keyed by name and UID; size Σ replicas or the declared minimum."""

import pytest

from gangkeeper import names
from gangkeeper.integrations import pytorchjob
from tests.integrations.pods import owner, pod

UID = "6f1c7c1e-8f31-4a44-9f7e-1b2f2c8e9a01"


def job_pod(role="worker", index=0, uid=UID):
    labels = {names.KUBEFLOW_JOB_NAME_LABEL: "bert", names.KUBEFLOW_REPLICA_TYPE_LABEL: role,
              names.KUBEFLOW_REPLICA_INDEX_LABEL: str(index)}
    return pod(f"bert-{role}-{index}", labels, owners=[owner("PyTorchJob", "bert", uid, "kubeflow.org/v1")], gpus=8)


def test_master_and_workers_share_the_jobs_group():
    master, worker = pytorchjob.group_of(job_pod("master")), pytorchjob.group_of(job_pod(index=3))
    assert master == worker
    assert (master.identity.name, master.identity.source) == (f"bert-{UID}", names.SOURCE_PYTORCHJOB)
    assert master.reason == f"PyTorchJob bert (uid {UID})"


def test_a_pod_with_the_label_but_another_owner_is_not_the_jobs():
    body = job_pod()
    body["metadata"]["ownerReferences"] = [owner("TFJob", "bert", UID, "kubeflow.org/v1")]
    assert pytorchjob.group_of(body) is None


@pytest.mark.parametrize(("spec", "size"), [
    ({"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}}}, 4),
    ({"pytorchReplicaSpecs": {"Master": {}, "Worker": {}}}, 2),
    ({"elasticPolicy": {"minReplicas": 2}, "pytorchReplicaSpecs": {"Worker": {"replicas": 4}}}, 2),
    ({"runPolicy": {"schedulingPolicy": {"minAvailable": 3}}, "pytorchReplicaSpecs": {"Worker": {"replicas": 8}}}, 3),
    ({}, 0),
])
def test_the_min_count_is_every_replica_unless_the_job_says_fewer_suffice(spec, size):
    assert pytorchjob.min_count(spec) == size
    assert pytorchjob.declaration({"spec": spec})["sizes"] == {"": size}


@pytest.mark.parametrize(("elastic", "bounds"), [
    ({"minReplicas": 4, "maxReplicas": 8}, (4, 8)),
    ({"maxReplicas": 6}, (6, 6)),
    ({"minReplicas": 3}, (3, 3)),
    ({}, (5, 5)),
])
def test_an_elastic_jobs_bounds_are_defaulted_as_the_training_operator_does(elastic, bounds):
    spec = {"elasticPolicy": elastic, "pytorchReplicaSpecs": {"Worker": {"replicas": 5}}}
    assert pytorchjob.elastic_bounds(spec) == bounds
    assert pytorchjob.min_count(spec) == bounds[0]


def test_the_most_an_elastic_job_runs_is_its_replicas_up_to_its_maximum():
    elastic = {"elasticPolicy": {"minReplicas": 4, "maxReplicas": 8}}
    assert pytorchjob.declaration({"spec": {**elastic, "pytorchReplicaSpecs": {"Worker": {"replicas": 10}}}}) \
        ["maxima"] == {"": 8}
    assert pytorchjob.max_count({**elastic, "pytorchReplicaSpecs": {"Worker": {"replicas": 6}}}) == 6
    assert pytorchjob.max_count({"pytorchReplicaSpecs": {"Master": {}, "Worker": {"replicas": 3}}}) == 4


def test_the_gangs_min_available_wins_over_the_elastic_minimum():
    spec = {"runPolicy": {"schedulingPolicy": {"minAvailable": 2}}, "elasticPolicy": {"minReplicas": 4},
            "pytorchReplicaSpecs": {"Worker": {"replicas": 8}}}
    assert pytorchjob.min_count(spec) == 2


def test_the_job_declaring_a_member_is_its_owner():
    assert pytorchjob.INTEGRATION.declarer("g", {}, ("bert", UID)) == ("bert", UID)


def test_a_pytorchjob_is_suspended_through_its_run_policy():
    job = {"metadata": {"resourceVersion": "7"}, "spec": {"runPolicy": {"cleanPodPolicy": "None"}}}
    assert pytorchjob.SUSPENSION.patch(job, True) == {"metadata": {"resourceVersion": "7"},
                                                      "spec": {"runPolicy": {"suspend": True}}}
    assert not pytorchjob.SUSPENSION.is_suspended(job)
    assert pytorchjob.SUSPENSION.is_suspended({"spec": {"runPolicy": {"suspend": True}}})
