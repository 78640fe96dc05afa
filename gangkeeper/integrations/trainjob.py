"""Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1 TrainJob): the switch of its JobSet's groups,
and initializers that are no part of any gang.

A TrainJob runs as a JobSet of its name, rendered from its (Cluster)TrainingRuntime and owned by
it, so its training pods are grouped, and sized, by the JobSet rule. The trainer controller
copies `TrainJob.spec.suspend` onto the JobSet: suspending the JobSet alone would be undone, so
the JobSet names the TrainJob as the switch of its groups (`switch_of`), and gangkeeper
suspends and resumes the TrainJob.

The shipped runtimes start a `dataset-initializer` and a `model-initializer` (CPU only) that
must complete before the JobSet controller creates the `node` pods. Their own stage would
release them (controller/cache/groups.py, the JobSet's `parts`), but they need no gang at all: the
webhook leaves them alone, and the JobSet's size leaves them out. Both know them by their
replicated job's name, the Trainer's name for the step, which every pod carries as JobSet's
`replicatedjob-name` label; the step label the runtimes set reaches the Jobs, not their pods.
"""

from collections.abc import Mapping

from gangkeeper import names
from gangkeeper.integrations.finding import Classification, labels_and_annotations
from gangkeeper.integrations.kind import SUSPEND_VERBS, Declaration, Integration, Resource, Suspension

RESOURCE = Resource(*names.TRAINJOB_API, names.TRAINJOB_KIND)
SUSPENSION = Suspension(("spec", "suspend"))


def is_initializer(replicated_job: str) -> bool:
    """Whether a JobSet's replicated job of this name is a TrainJob's initializer, which runs before its training."""
    return replicated_job in names.TRAINER_INITIALIZER_STEPS


def group_of(pod: Mapping) -> Classification | None:
    labels, _ = labels_and_annotations(pod)
    step = labels.get(names.JOBSET_REPLICATED_JOB_LABEL, "")
    if not labels.get(names.JOBSET_NAME_LABEL) or not is_initializer(step):
        return None
    return Classification(None, f"a TrainJob's {step} ({names.JOBSET_REPLICATED_JOB_LABEL}={step}): it runs "
                                "before the training stage, which is created only once it completes")


def switch_of(obj: Mapping) -> tuple[str, str, str] | None:
    """(resource, name, uid) of the TrainJob controlling `obj` (its JobSet), whose switch is the one that sticks."""
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if (isinstance(owner, Mapping) and owner.get("controller") and owner.get("kind") == names.TRAINJOB_KIND
                and str(owner.get("apiVersion", "")).startswith(f"{RESOURCE.group}/") and owner.get("uid")):
            return RESOURCE.name, str(owner.get("name", "")), str(owner["uid"])
    return None


def declaration(trainjob: Mapping) -> Declaration:
    """A TrainJob declares no group of its own (its JobSet does): it is read for its switch."""
    return {"sizes": {}, "suspend": SUSPENSION.state(trainjob)}


INTEGRATION = Integration(sources=(), group_of=group_of, resource=RESOURCE, declaration=declaration,
                          verbs=SUSPEND_VERBS, suspension=SUSPENSION)
