"""Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1 TrainJob): its initializers are no part of any gang.

A TrainJob runs as a JobSet rendered from its (Cluster)TrainingRuntime, so its training pods are
grouped by the JobSet rule. The shipped runtimes start a `dataset-initializer` and a
`model-initializer` (CPU only) that must complete before the JobSet controller creates the
`node` pods: gated, they would wait for a group that can only start after them. The webhook
leaves them alone, and the JobSet's size leaves them out (`is_initializer` on the pod
template's labels, which the runtime sets and every pod carries).
"""

from collections.abc import Mapping

from gangkeeper import names
from gangkeeper.integrations.finding import Classification, labels_and_annotations
from gangkeeper.integrations.kind import Integration


def is_initializer(labels: Mapping[str, str]) -> bool:
    """Whether pods with these labels are a TrainJob's initializers, which run before its training stage."""
    return labels.get(names.TRAINER_ANCESTOR_STEP_LABEL) in names.TRAINER_INITIALIZER_STEPS


def group_of(pod: Mapping) -> Classification | None:
    labels, _ = labels_and_annotations(pod)
    if not is_initializer(labels):
        return None
    step = labels[names.TRAINER_ANCESTOR_STEP_LABEL]
    return Classification(None, f"a TrainJob's {step} ({names.TRAINER_ANCESTOR_STEP_LABEL}): it runs before the "
                                "training stage, which is created only once it completes")


INTEGRATION = Integration(sources=(), group_of=group_of)
