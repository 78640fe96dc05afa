"""JobSet (kubernetes-sigs/jobset v1alpha2): one group per JobSet and restart attempt (docs/design.md,
"Group identity", rule 5).

JobSet copies its name, UID and restart attempt onto every pod as labels; keying the group by
all three keeps the pods of an earlier attempt out of the retry's group. Kubeflow Trainer v2
TrainJobs run as JobSets. Started `InOrder`, a JobSet is one group per replicated job: a
JobSet-wide gang would deadlock, since later jobs start only when earlier ones are ready.
`spec.suspend` makes the JobSet controller suspend its Jobs, whose pods are then deleted.
"""

from collections.abc import Mapping

from gangkeeper import names
from gangkeeper.integrations import job
from gangkeeper.integrations.finding import Classification, found, labels_and_annotations
from gangkeeper.integrations.kind import SUSPEND_VERBS, Declaration, Integration, ObjectRef, Resource, Suspension

RESOURCE = Resource(*names.JOBSET_API, names.JOBSET_KIND)
SUSPENSION = Suspension(("spec", "suspend"))


def group_of(pod: Mapping) -> Classification | None:
    labels, _ = labels_and_annotations(pod)
    jobset, uid = labels.get(names.JOBSET_NAME_LABEL), labels.get(names.JOBSET_UID_LABEL)
    if not jobset or not uid:
        return None
    attempt = labels.get(names.JOBSET_RESTART_ATTEMPT_LABEL, "0")
    return found(f"{jobset}-{uid}-{attempt}", names.SOURCE_JOBSET,
                 f"JobSet {jobset} (uid {uid}), restart attempt {attempt}")


def sizes(spec: Mapping) -> tuple[dict[str, int], bool]:
    """Pods per replicated job (replicas × pods per Job) and whether they start in order."""
    by_job = {}
    for replicated in spec.get("replicatedJobs") or ():
        job_spec = (replicated.get("template") or {}).get("spec") or {}
        by_job[replicated.get("name", "")] = int(replicated.get("replicas", 1)) * job.size(job_spec)
    in_order = (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
    return (by_job if in_order else {"": sum(by_job.values())}), in_order


def declaration(jobset: Mapping) -> Declaration:
    by_part, in_order = sizes(jobset.get("spec") or {})
    return {"sizes": by_part, "in_order": in_order, "suspend": SUSPENSION.state(jobset)}


def declarer(group: str, labels: Mapping[str, str], owner: tuple[str, str] | None) -> ObjectRef:
    """The JobSet its labels name: the pods' owner is a Job, which declares nothing."""
    return labels.get(names.JOBSET_NAME_LABEL, ""), labels.get(names.JOBSET_UID_LABEL)


INTEGRATION = Integration(
    sources=(names.SOURCE_JOBSET,), group_of=group_of, resource=RESOURCE, declaration=declaration,
    verbs=SUSPEND_VERBS, declarer=declarer,
    kept_labels=(names.JOBSET_NAME_LABEL, names.JOBSET_UID_LABEL, names.JOBSET_REPLICATED_JOB_LABEL),
    owns_pods=True, part_label=names.JOBSET_REPLICATED_JOB_LABEL, suspension=SUSPENSION,
)
