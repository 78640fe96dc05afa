"""Kubeflow Trainer v2: a TrainJob's initializers run before its training stage, so they join no gang."""

from gangkeeper import identity, names
from gangkeeper.integrations import trainjob
from tests.integrations.pods import owner, pod

UID = "0b6f8a1e-3c2d-4e5f-8a9b-1c2d3e4f5a6b"


def trainjob_pod(step, gpus=0):
    """A pod of the JobSet the trainer renders for TrainJob `tune`, in replicated job `step`'s stage."""
    replicated_job = "node" if step == "trainer" else step
    labels = {names.JOBSET_NAME_LABEL: "tune", names.JOBSET_UID_LABEL: UID, names.JOBSET_RESTART_ATTEMPT_LABEL: "0",
              names.JOBSET_REPLICATED_JOB_LABEL: replicated_job, names.TRAINER_ANCESTOR_STEP_LABEL: step,
              names.JOB_NAME_LABEL: f"tune-{replicated_job}-0"}
    return pod(f"tune-{replicated_job}-0-0-abcde", labels, owners=[owner("Job", f"tune-{replicated_job}-0", "j1",
                                                                         "batch/v1")], gpus=gpus)


def test_an_initializer_is_left_alone_and_says_why():
    for step in sorted(names.TRAINER_INITIALIZER_STEPS):
        found = identity.classify(trainjob_pod(step), namespace="ml")
        assert not found.is_member
        assert found.reason.startswith(f"a TrainJob's {step}") and "created only once it completes" in found.reason


def test_the_training_stage_is_grouped_by_its_jobset():
    found = identity.classify(trainjob_pod("trainer", gpus=2), namespace="ml")
    assert found.identity.name == f"tune-{UID}-0" and found.identity.source == names.SOURCE_JOBSET


def test_only_the_initializer_steps_are_initializers():
    assert trainjob.is_initializer({names.TRAINER_ANCESTOR_STEP_LABEL: "model-initializer"})
    assert not trainjob.is_initializer({names.TRAINER_ANCESTOR_STEP_LABEL: "trainer"})
    assert not trainjob.is_initializer({})
