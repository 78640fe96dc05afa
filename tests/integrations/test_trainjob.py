"""Kubeflow Trainer v2: a TrainJob's initializers run before its training stage, so they join no gang."""

from gangkeeper import identity, names
from gangkeeper.integrations import jobset, trainjob
from tests.integrations.pods import owner, pod

UID = "0b6f8a1e-3c2d-4e5f-8a9b-1c2d3e4f5a6b"


def trainjob_pod(step, gpus=0):
    """A pod of the JobSet the trainer renders for TrainJob `tune`, in replicated job `step`'s stage."""
    replicated_job = "node" if step == "trainer" else step
    labels = {names.JOBSET_NAME_LABEL: "tune", names.JOBSET_UID_LABEL: UID, names.JOBSET_RESTART_ATTEMPT_LABEL: "0",
              names.JOBSET_REPLICATED_JOB_LABEL: replicated_job, names.JOB_NAME_LABEL: f"tune-{replicated_job}-0"}
    return pod(f"tune-{replicated_job}-0-0-abcde", labels, owners=[owner("Job", f"tune-{replicated_job}-0", "j1",
                                                                         "batch/v1")], gpus=gpus)


def test_an_initializer_is_left_alone_and_says_why():
    for step in sorted(names.TRAINER_INITIALIZER_STEPS):
        found = identity.classify(trainjob_pod(step), namespace="ml")
        assert not found.is_member
        assert found.reason.startswith(f"a TrainJob's {step} (jobset.sigs.k8s.io/replicatedjob-name={step})")
        assert "created only once it completes" in found.reason


def test_the_training_stage_is_grouped_by_its_jobset():
    found = identity.classify(trainjob_pod("trainer", gpus=2), namespace="ml")
    assert found.identity.name == f"tune-{UID}-0" and found.identity.source == names.SOURCE_JOBSET


def test_only_the_initializer_steps_are_initializers():
    assert trainjob.is_initializer("model-initializer") and trainjob.is_initializer("dataset-initializer")
    assert not trainjob.is_initializer("node") and not trainjob.is_initializer("")


def test_a_pod_named_like_an_initializer_outside_a_jobset_is_not_left_alone_for_it():
    assert trainjob.group_of(pod(labels={names.JOBSET_REPLICATED_JOB_LABEL: "model-initializer"})) is None


def test_a_jobset_a_trainjob_controls_names_the_trainjob_as_its_groups_switch():
    rendered = {"metadata": {"name": "tune", "ownerReferences": [
        owner("TrainJob", "tune", "t-uid", "trainer.kubeflow.org/v1alpha1")]}, "spec": {"replicatedJobs": []}}
    assert jobset.declaration(rendered)["switch"] == ("trainjobs.trainer.kubeflow.org", "tune", "t-uid")
    assert "switch" not in jobset.declaration({"metadata": {"name": "plain"}, "spec": {}})
    somebody_elses = owner("TrainJob", "tune", "t-uid", "example.com/v1")
    assert trainjob.switch_of({"metadata": {"ownerReferences": [somebody_elses]}}) is None


def test_a_trainjob_is_suspended_through_spec_suspend():
    assert trainjob.SUSPENSION.suspending("7", "2027-01-01T00:00:00Z") == {
        "metadata": {"resourceVersion": "7", "annotations": {
            names.SUSPENDED_BY_ANNOTATION: names.SUSPENDED_BY_VALUE, names.RESUME_AT_ANNOTATION: "2027-01-01T00:00:00Z"}},
        "spec": {"suspend": True}}
