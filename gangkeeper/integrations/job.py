"""batch/v1 Job: one group per Job (docs/design.md, "Group identity", rule 7).

A pod does not say its Job's parallelism, so the webhook cannot tell a parallel Job from a
single-pod one: every Job pod is grouped by its Job, and the controller, which reads the Job,
sizes a parallelism-1 Job as a group of one. `spec.suspend` (stable since 1.24) makes the Job
controller delete the Job's running pods and create none until it is cleared.
"""

from collections.abc import Mapping

from gangkeeper import names
from gangkeeper.integrations.finding import Classification, controlling_owner, found, index_of, labels_and_annotations
from gangkeeper.integrations.kind import (
    SUSPEND_VERBS,
    Declaration,
    Integration,
    Rank,
    Resource,
    Suspension,
    declared_by_owner,
)

RESOURCE = Resource(*names.JOB_API, names.JOB_KIND)
SUSPENSION = Suspension(("spec", "suspend"))


def group_of(pod: Mapping) -> Classification | None:
    """The Job that controls the pod, by name and UID: a re-created Job of the same name is another group."""
    labels, _ = labels_and_annotations(pod)
    owner = controlling_owner(pod, names.JOB_KIND)
    if not labels.get(names.JOB_NAME_LABEL) or owner is None or not owner.get("uid"):
        return None
    return found(f"{owner['name']}-{owner['uid']}", names.SOURCE_JOB, f"Job {owner['name']} (uid {owner['uid']})")


def size(spec: Mapping) -> int:
    """Pods a Job runs at once: min(parallelism, completions); unset completions run `parallelism`."""
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    return parallelism if completions is None else min(parallelism, int(completions))


def declaration(job: Mapping) -> Declaration:
    return {"sizes": {"": size(job.get("spec") or {})}, "suspend": SUSPENSION.state(job)}


def completion_index(labels: Mapping[str, str], annotations: Mapping[str, str]) -> int | None:
    """An Indexed Job's pod's index: its label, or the annotation older clusters set alone."""
    return index_of(labels.get(names.JOB_COMPLETION_INDEX) or annotations.get(names.JOB_COMPLETION_INDEX))


def rank(labels: Mapping[str, str], annotations: Mapping[str, str]) -> Rank | None:
    """The completion index."""
    completion = completion_index(labels, annotations)
    return None if completion is None else ("", completion, 0)


INTEGRATION = Integration(
    sources=(names.SOURCE_JOB,), group_of=group_of, resource=RESOURCE, declaration=declaration,
    verbs=SUSPEND_VERBS, declarer=declared_by_owner, owns_pods=True, suspension=SUSPENSION, rank=rank,
)
