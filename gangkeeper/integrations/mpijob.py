"""Kubeflow MPIJob (kubeflow.org/v2beta1, the MPI operator): one group per job, its launcher and
its workers (docs/design.md, "Group identity", rule 6).

The MPI operator makes a pod per worker replica, `<mpijob>-worker-<i>`, controlled by the MPIJob,
and a Job `<mpijob>-launcher`, controlled by the MPIJob too, whose one pod runs `mpirun` against
the workers. Every pod carries the training operator's `job-name` and `job-role` labels
(`launcher`, `worker`); no replica type. The webhook knows a worker by its controlling MPIJob
(kubeflow.org/v2beta1 only: the training operator's v1 MPIJob makes other pods) and the launcher
by its controlling Job, named after the MPIJob. No UID of the MPIJob reaches the launcher pod, so
the group is keyed by the MPIJob's name, `<mpijob>-mpijob`; the controller proves the launcher a
member through its Job, which the MPIJob must control (`Through`). An MPIJob deleted and created
again names its group as the old one did: the old one's pods are being garbage-collected then,
and the new worker pods and launcher Job, of the same names, come only once they are gone.

The launcher is a member, requesting accelerators or not. Under `launcherCreationPolicy:
AtStartup` (the default) the operator creates it with the workers, and it is of no use without
them: left to start alone, it would run `mpirun` against workers the queue holds back and fail
until its Job's `backoffLimit` fails the MPIJob (the operator's own PodGroups count it too:
minMember = workers + 1). So the launcher and the workers are one gang. Under
`WaitForWorkersReady` the launcher is created only once every worker is Ready: a gang counting it
would hold the workers gated for a pod that comes after them. The MPIJob then splits its group by
role (`parts`): the workers, then the launcher alone. `runLauncherAsWorker` (the launcher is a
rank too) changes neither.

`spec.runPolicy.suspend` makes the operator delete the workers and suspend the launcher Job, whose
pod the Job controller deletes without counting it as failed, and create them again when it is
cleared. Once the MPIJob has ended (its Succeeded or Failed condition with a completion time: the
operator then stops and cleans up), that end is its group's: its `cleanPodPolicy` deletes the
workers still running, which would otherwise leave a group that succeeded looking incomplete.
"""

from collections.abc import Mapping

from gangkeeper import names
from gangkeeper.integrations import job
from gangkeeper.integrations.finding import Classification, controlling_owner, found, labels_and_annotations
from gangkeeper.integrations.kind import (
    SUSPEND_VERBS,
    Declaration,
    Integration,
    ObjectRef,
    Resource,
    Suspension,
    Through,
)

RESOURCE = Resource(*names.MPIJOB_API, names.MPIJOB_KIND)
SUSPENSION = Suspension(("spec", "runPolicy", "suspend"))
API_VERSION = f"{RESOURCE.group}/{RESOURCE.version}"
_JOB_API_VERSION = f"{job.RESOURCE.group}/{job.RESOURCE.version}"
_ENDS = ("Succeeded", "Failed")


def group_name(mpijob: str) -> str:
    return f"{mpijob}-mpijob"


def group_of(pod: Mapping) -> Classification | None:
    """The MPIJob of a worker it controls or of the launcher its launcher Job controls."""
    labels, _ = labels_and_annotations(pod)
    mpijob, role = labels.get(names.KUBEFLOW_JOB_NAME_LABEL), labels.get(names.KUBEFLOW_JOB_ROLE_LABEL)
    if not mpijob or not _owned_as_the_operator_owns(pod, mpijob, role):
        return None
    return found(group_name(mpijob), names.SOURCE_MPIJOB,
                 f"MPIJob {mpijob}, {'its launcher' if role == names.MPI_LAUNCHER else 'a worker'}")


def _owned_as_the_operator_owns(pod: Mapping, mpijob: str, role: str | None) -> bool:
    """A worker controlled by the MPIJob, or the launcher by the MPIJob's launcher Job."""
    if role == names.MPI_WORKER:
        kind, api_version, name = names.MPIJOB_KIND, API_VERSION, mpijob
    elif role == names.MPI_LAUNCHER:
        kind, api_version, name = names.JOB_KIND, _JOB_API_VERSION, f"{mpijob}{names.MPI_LAUNCHER_SUFFIX}"
    else:
        return False
    owner = controlling_owner(pod, kind)
    return (owner is not None and owner.get("apiVersion") == api_version and owner.get("name") == name
            and bool(owner.get("uid")))


def workers(spec: Mapping) -> int:
    """Worker replicas, none unless given (the operator's default)."""
    return int(((spec.get("mpiReplicaSpecs") or {}).get("Worker") or {}).get("replicas") or 0)


def ended(status: Mapping) -> str | None:
    """How the operator ended the MPIJob, "Succeeded" or "Failed": the condition, with its completion time."""
    if not status.get("completionTime"):
        return None
    true = {c.get("type") for c in status.get("conditions") or () if isinstance(c, Mapping) and c.get("status") == "True"}
    return next((end for end in _ENDS if end in true), None)


def declaration(mpijob: Mapping) -> Declaration:
    """The launcher and the workers; under WaitForWorkersReady the workers, then the launcher, as parts."""
    spec = mpijob.get("spec") or {}
    declared: Declaration = {"sizes": {"": workers(spec) + 1}, "suspend": SUSPENSION.state(mpijob)}
    if spec.get("launcherCreationPolicy") == names.MPI_WAIT_FOR_WORKERS_READY:
        declared["sizes"] = {names.MPI_WORKER: workers(spec), names.MPI_LAUNCHER: 1}
        declared["parts"] = {role: role for role in (names.MPI_WORKER, names.MPI_LAUNCHER)}
    end = ended(mpijob.get("status") or {})
    if end is not None:
        declared["finished"] = end
    return declared


def declarer(group: str, labels: Mapping[str, str], owner: tuple[str, str] | None) -> ObjectRef | None:
    """A worker's controlling owner, the MPIJob; for the launcher, the MPIJob its name label names,
    proven by the launcher Job that controls the pod."""
    if owner is None:
        return None
    if labels.get(names.KUBEFLOW_JOB_ROLE_LABEL) == names.MPI_LAUNCHER:
        return labels.get(names.KUBEFLOW_JOB_NAME_LABEL, ""), Through(job.RESOURCE.name, *owner)
    return owner


INTEGRATION = Integration(
    sources=(names.SOURCE_MPIJOB,), group_of=group_of, resource=RESOURCE, declaration=declaration,
    verbs=SUSPEND_VERBS, declarer=declarer, kept_labels=(names.KUBEFLOW_JOB_NAME_LABEL, names.KUBEFLOW_JOB_ROLE_LABEL),
    owns_pods=True, part_label=names.KUBEFLOW_JOB_ROLE_LABEL, suspension=SUSPENSION,
)
