"""JobSet (kubernetes-sigs/jobset v1alpha2): one group per JobSet, restart attempt and stage (docs/design.md,
"Group identity", rule 5).

JobSet copies its name, UID and restart attempt onto every pod as labels; keying the group by
all three keeps the pods of an earlier attempt out of the retry's group. Kubeflow Trainer v2
TrainJobs run as JobSets.

A group is what starts together. The JobSet controller creates a replicated job's Jobs only
once the replicated jobs it `dependsOn` are Ready or Complete, and, started `InOrder`, each
replicated job only once the ones before it are ready. A JobSet-wide gang would wait for pods
that come only after it runs (a deadlock made by gangkeeper), so such a JobSet is one group per
stage: under `InOrder` each replicated job, otherwise the replicated jobs with the same
dependencies, which the controller creates in the same moment.
`spec.suspend` makes the JobSet controller suspend its Jobs, whose pods are then deleted.

A JobSet annotated `gangkeeper.io/tree: replicatedJob` is a tree of groups instead (issue 25): one
child group per replicated job, under a parent Gang named after the JobSet, which the controller
makes (owned by the JobSet), with `gangkeeper.io/min-group-count` children that must all be
placeable together (all of them when unset) and the JobSet's own `gangkeeper.io/topology-required`
(or `-preferred`) as the parent's domain; each replicated job's pod template says its own.
"""

from collections.abc import Mapping

from gangkeeper import names
from gangkeeper.integrations import job, trainjob
from gangkeeper.integrations.finding import Classification, found, index_of, labels_and_annotations
from gangkeeper.integrations.kind import (
    SUSPEND_VERBS,
    Declaration,
    Integration,
    ObjectRef,
    Rank,
    Resource,
    Suspension,
    as_tree,
)

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


def stages(spec: Mapping) -> dict[str, str]:
    """The stage of each replicated job, named after its first replicated job; empty when all start at once.

    Replicated jobs whose `dependsOn` lists the same (name, status) pairs are created together,
    as soon as those are reached; one without `dependsOn` is created at once."""
    replicated_jobs = [replicated for replicated in spec.get("replicatedJobs") or () if isinstance(replicated, Mapping)]
    if (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder":
        return {replicated.get("name", ""): replicated.get("name", "") for replicated in replicated_jobs}
    first_of: dict[frozenset, str] = {}
    by_job = {}
    for replicated in replicated_jobs:
        waits_for = frozenset((dependency.get("name"), dependency.get("status"))
                              for dependency in replicated.get("dependsOn") or () if isinstance(dependency, Mapping))
        by_job[replicated.get("name", "")] = first_of.setdefault(waits_for, replicated.get("name", ""))
    return by_job if len(first_of) > 1 else {}


def sizes(spec: Mapping) -> tuple[dict[str, int], dict[str, str]]:
    """Pods per stage (replicas × pods per Job of its replicated jobs; '' when all start at once) and the stages.

    A TrainJob's initializers count in no stage: the webhook leaves their pods alone."""
    by_stage = stages(spec)
    by_part: dict[str, int] = {}
    for replicated in spec.get("replicatedJobs") or ():
        job_spec = (replicated.get("template") or {}).get("spec") or {}
        if trainjob.is_initializer(replicated.get("name", "")):
            continue
        part = by_stage.get(replicated.get("name", ""), "")
        by_part[part] = by_part.get(part, 0) + int(replicated.get("replicas", 1)) * job.size(job_spec)
    return by_part or {"": 0}, by_stage


def declaration(jobset: Mapping) -> Declaration:
    """Its stages' sizes (a tree's: its replicated jobs') and its switch; a TrainJob's JobSet is
    suspended through the TrainJob."""
    spec = jobset.get("spec") or {}
    tree = ((jobset.get("metadata") or {}).get("annotations") or {}).get(names.TREE_ANNOTATION)
    if tree == names.TREE_BY_REPLICATED_JOB:
        spec = {**spec, "startupPolicy": {"startupPolicyOrder": "InOrder"}}  # one part per replicated job
    by_part, parts = sizes(spec)
    declared: Declaration = {"sizes": by_part, "parts": parts, "suspend": SUSPENSION.state(jobset)}
    if tree == names.TREE_BY_REPLICATED_JOB:
        as_tree(declared, jobset, len(set(parts.values())))
    switch = trainjob.switch_of(jobset)
    if switch is not None:
        declared["switch"] = switch
    return declared


def declarer(group: str, labels: Mapping[str, str], owner: tuple[str, str] | None) -> ObjectRef:
    """The JobSet its labels name: the pods' owner is a Job, which declares nothing."""
    return labels.get(names.JOBSET_NAME_LABEL, ""), labels.get(names.JOBSET_UID_LABEL)


def rank(labels: Mapping[str, str], annotations: Mapping[str, str]) -> Rank | None:
    """The Job's global index (JobSet ≥ 0.7), else its replicated job (the part, by name) and index
    within it; then the pod's completion index in its Job."""
    if names.JOBSET_NAME_LABEL not in labels:
        return None
    job_index = index_of(labels.get(names.JOBSET_JOB_GLOBAL_INDEX_LABEL)
                         or annotations.get(names.JOBSET_JOB_GLOBAL_INDEX_LABEL))
    part = ""
    if job_index is None:
        job_index = index_of(labels.get(names.JOBSET_JOB_INDEX_LABEL) or annotations.get(names.JOBSET_JOB_INDEX_LABEL))
        part = labels.get(names.JOBSET_REPLICATED_JOB_LABEL, "")
    if job_index is None:
        return None
    return part, job_index, job.completion_index(labels, annotations) or 0


INTEGRATION = Integration(
    sources=(names.SOURCE_JOBSET,), group_of=group_of, resource=RESOURCE, declaration=declaration,
    verbs=SUSPEND_VERBS, declarer=declarer,
    kept_labels=(names.JOBSET_NAME_LABEL, names.JOBSET_UID_LABEL, names.JOBSET_REPLICATED_JOB_LABEL),
    owns_pods=True, part_label=names.JOBSET_REPLICATED_JOB_LABEL, suspension=SUSPENSION, rank=rank,
)
