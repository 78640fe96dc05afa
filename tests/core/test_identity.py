"""Group identity from the pod alone, on pods shaped as their operators create them."""

import pytest

from gangkeeper import names
from gangkeeper.identity import classify, is_valid_label_value, to_label_value
from tests import builders
from tests.builders import owner

JOB_UID = "6f1c7c1e-8f31-4a44-9f7e-1b2f2c8e9a01"
JOBSET_UID = "5c1d0f4e-2b7a-4c55-9d7e-7a1c0e2f9b10"


def pod(name="p", labels=None, annotations=None, owners=(), gpus=0, node_name=None, gates=(), **spec):
    """A pod asking `gpus` GPUs (requested as the API server defaults them), else a CPU."""
    resources = {"gpus": gpus, "requests": {}} if gpus else {"requests": {"cpu": "1"}}
    return builders.pod(name, labels=labels or None, annotations=annotations or None, owners=owners,
                        node_name=node_name, gates=gates, **resources, **spec)


def pytorchjob_pod(job="pytorch-dist", role="worker", index=0, uid=JOB_UID):
    # kubeflow/training-operator: pkg/apis/kubeflow.org/v1 common labels, owner = the PyTorchJob.
    labels = {names.KUBEFLOW_JOB_NAME_LABEL: job, names.KUBEFLOW_REPLICA_TYPE_LABEL: role,
              names.KUBEFLOW_REPLICA_INDEX_LABEL: str(index),
              names.KUBEFLOW_OPERATOR_NAME_LABEL: "pytorchjob-controller"}
    if role == "master":
        labels[names.KUBEFLOW_JOB_ROLE_LABEL] = "master"
    return pod(f"{job}-{role}-{index}", labels, owners=[owner("PyTorchJob", job, uid, "kubeflow.org/v1")], gpus=1)


def jobset_pod(jobset="trainer", attempt=0, uid=JOBSET_UID):
    keys = {names.JOBSET_NAME_LABEL: jobset, names.JOBSET_UID_LABEL: uid,
            names.JOBSET_RESTART_ATTEMPT_LABEL: str(attempt), names.JOBSET_REPLICATED_JOB_LABEL: "workers",
            names.JOBSET_JOB_INDEX_LABEL: "0", names.JOB_NAME_LABEL: f"{jobset}-workers-0",
            names.JOB_CONTROLLER_UID_LABEL: "aa11", names.JOB_COMPLETION_INDEX: "0"}
    return pod(f"{jobset}-workers-0-0-x7k2p", keys, keys, owners=[owner("Job", f"{jobset}-workers-0", "aa11", "batch/v1")],
               gpus=8)


def indexed_job_pod(job="sweep", uid="1b2c"):
    labels = {names.JOB_NAME_LABEL: job, names.JOB_CONTROLLER_UID_LABEL: uid, names.JOB_COMPLETION_INDEX: "3"}
    return pod(f"{job}-3-abcde", labels, owners=[owner("Job", job, uid, "batch/v1")])


def group_of(body, **kwargs):
    found = classify(body, namespace="ml", **kwargs)
    return found.identity


def test_pytorchjob_master_and_workers_share_one_group_keyed_by_job_and_uid():
    master, worker = group_of(pytorchjob_pod(role="master")), group_of(pytorchjob_pod(index=3))
    assert master == worker
    assert master.source == names.SOURCE_PYTORCHJOB
    assert master.name == f"pytorch-dist-{JOB_UID}"


def test_two_jobs_of_the_same_name_with_different_uids_never_share_a_group():
    assert group_of(pytorchjob_pod(uid=JOB_UID)) != group_of(pytorchjob_pod(uid="00000000-1111"))


def test_jobset_restart_attempts_never_share_a_group():
    first, retry = group_of(jobset_pod(attempt=0)), group_of(jobset_pod(attempt=1))
    assert first.source == retry.source == names.SOURCE_JOBSET
    assert first != retry


def test_jobset_rule_wins_over_the_job_it_creates():
    assert group_of(jobset_pod()).source == names.SOURCE_JOBSET


def test_indexed_job_pods_are_grouped_by_their_job():
    found = group_of(indexed_job_pod())
    assert found.source == names.SOURCE_JOB
    assert found.name == "sweep-1b2c"


def test_a_lone_gpu_pod_is_a_group_of_its_own():
    found = group_of(pod("solo", gpus=2))
    assert (found.name, found.source) == ("solo", names.SOURCE_ACCELERATOR_POD)


def test_a_generate_name_pod_takes_the_fallback_name():
    body = pod(gpus=1)
    body["metadata"] = {"generateName": "gen-", "namespace": "ml"}
    assert group_of(body, fallback_name="gen-ab12cd34").name == "gen-ab12cd34"


def test_a_cpu_pod_is_left_alone():
    found = classify(pod("web-1"), namespace="ml")
    assert found.identity is None
    assert "not a training pod" in found.reason


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (pod("bound", gpus=1, node_name="gpu-node-1"), "already bound"),
        (pod("kq", {names.KUEUE_QUEUE_NAME_LABEL: "team-a"}, gpus=1), "Kueue"),
        (pod("km", {names.KUEUE_MANAGED_LABEL: "true"}, gpus=1), "Kueue"),
        (pod("kg", gpus=1, gates=["kueue.x-k8s.io/admission"]), "Kueue"),
        (pod("native", gpus=1, schedulingGroup={"podGroupName": "pg"}), "native gang"),
    ],
)
def test_pods_owned_by_someone_else_are_left_alone(body, why):
    found = classify(body, namespace="ml")
    assert found.identity is None
    assert why in found.reason


@pytest.mark.parametrize("labels", [
    {names.CAPACITY_FOR_LABEL: "train"},
    {names.CAPACITY_FOR_LABEL: "train", names.GROUP_LABEL: "train"},
    {names.CAPACITY_FOR_LABEL: "train", names.KUBEFLOW_JOB_NAME_LABEL: "pytorch-dist"},
])
def test_a_placeholder_is_never_a_member_whatever_else_it_carries(labels):
    found = classify(pod("train-capacity-1-0", labels, gpus=8), namespace="ml")
    assert found.identity is None
    assert found.reason == f"a placeholder holding capacity for the group of Gang train (label {names.CAPACITY_FOR_LABEL}): " \
                           "never a member"


def test_never_enforced_namespaces_are_left_alone():
    assert classify(pod(gpus=1), namespace="kube-system").identity is None
    assert classify(pod(gpus=1), namespace="gangkeeper", excluded_namespaces=["gangkeeper"]).identity is None


def test_explicit_label_wins_and_is_kept_as_written():
    body = pytorchjob_pod()
    body["metadata"]["labels"][names.GROUP_LABEL] = "my-team-run"
    assert group_of(body).name == "my-team-run"
    assert group_of(body).source == names.SOURCE_EXPLICIT


def test_native_then_plugins_then_volcano_labels():
    assert group_of(pod(labels={names.NATIVE_POD_GROUP_LABEL: "pg"})).source == names.SOURCE_NATIVE_POD_GROUP
    assert group_of(pod(labels={names.PLUGINS_POD_GROUP_LABEL: "pg"})).source == names.SOURCE_PLUGINS_POD_GROUP
    assert group_of(pod(annotations={names.VOLCANO_GROUP_ANNOTATION: "pg"})).source == names.SOURCE_VOLCANO_POD_GROUP


def test_long_names_are_shortened_deterministically_and_distinctly():
    long_a, long_b = "a" * 70 + "-x", "a" * 70 + "-y"
    assert to_label_value(long_a) == to_label_value(long_a)
    assert to_label_value(long_a) != to_label_value(long_b)
    assert is_valid_label_value(to_label_value(long_a)) and len(to_label_value(long_a)) == 63


def test_a_long_job_name_still_gives_a_valid_group_name():
    found = group_of(pytorchjob_pod(job="llama-3-70b-finetune-with-a-very-long-experiment-name"))
    assert is_valid_label_value(found.name)
    assert found.name.startswith("llama-3-70b")


@pytest.mark.parametrize("value", ["", "a", "a.b_c-d", "x" * 63])
def test_valid_label_values(value):
    assert is_valid_label_value(value)


@pytest.mark.parametrize("value", ["-a", "a-", "a b", "x" * 64, "é", None, 3])
def test_invalid_label_values(value):
    assert not is_valid_label_value(value)


def test_an_explicit_label_naming_another_jobs_group_is_explicit_not_that_job():
    impostor = pod("sneaky", {names.GROUP_LABEL: f"pytorch-dist-{JOB_UID}"}, gpus=1)
    assert group_of(impostor).source == names.SOURCE_EXPLICIT


def test_our_own_label_from_an_earlier_pass_keeps_its_derived_source():
    member = pytorchjob_pod()
    member["metadata"]["labels"][names.GROUP_LABEL] = f"pytorch-dist-{JOB_UID}"
    assert group_of(member) == group_of(pytorchjob_pod())


def test_a_pod_labelled_with_its_own_name_is_an_explicit_group_not_a_lone_pod():
    """Pods p, p-1, p-2 all labelled into group `p`: the first one's name equals the group, which
    must not turn it into a group of one apart from the others."""
    first = pod("p", {names.GROUP_LABEL: "p"}, {names.MIN_COUNT_ANNOTATION: "3"}, gpus=1)
    assert group_of(first).source == names.SOURCE_EXPLICIT


def test_a_lone_pod_labelled_by_an_earlier_admission_pass_stays_a_lone_pod():
    labelled = pod("solo", {names.GROUP_LABEL: "solo"}, {names.GROUP_SOURCE_ANNOTATION: names.SOURCE_ACCELERATOR_POD},
                   gpus=1)
    assert group_of(labelled).source == names.SOURCE_ACCELERATOR_POD
