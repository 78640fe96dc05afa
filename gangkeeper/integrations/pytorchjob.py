"""Kubeflow PyTorchJob (training-operator v1): one group per job (docs/design.md, "Group identity", rule 4).

The operator labels every pod with the job's name and makes the PyTorchJob its controlling
owner; the group is keyed by the job's name and UID. Its size is every replica of every role,
unless the job says fewer suffice: the gang's `runPolicy.schedulingPolicy.minAvailable`, else an
elastic job's minimum. An elastic job (`elasticPolicy`) runs torchrun with `--nnodes=MIN:MAX` on
every pod, master included: it trains with at least `minReplicas` pods and takes up to
`maxReplicas`, the bounds its HPA moves `Worker.replicas` between. The operator fills in a bound
left out in memory, never on the object (`setElasticPolicy`): the other bound, or both the
workers' replicas; so does `elastic_bounds`. The group is admitted at its minimum; the pods
beyond it are its elastic extras, placed one at a time, and never more pods than the job's
maximum (`max_count`): torchrun would keep any beyond it waiting in its rendezvous.
`spec.runPolicy.suspend` makes the operator delete the job's pods and create none until it is cleared.
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

RESOURCE = Resource(*names.PYTORCHJOB_API, names.PYTORCHJOB_KIND)
SUSPENSION = Suspension(("spec", "runPolicy", "suspend"))


def group_of(pod: Mapping) -> Classification | None:
    labels, _ = labels_and_annotations(pod)
    owner = controlling_owner(pod, names.PYTORCHJOB_KIND)
    if not labels.get(names.KUBEFLOW_JOB_NAME_LABEL) or owner is None or not owner.get("uid"):
        return None
    return found(f"{owner['name']}-{owner['uid']}", names.SOURCE_PYTORCHJOB,
                 f"PyTorchJob {owner['name']} (uid {owner['uid']})")


WORKER = "Worker"


def replicas(spec: Mapping) -> int:
    """Every replica of every role: the pods the operator keeps."""
    return sum(int(replica.get("replicas", 1)) for replica in (spec.get("pytorchReplicaSpecs") or {}).values())


def elastic_bounds(spec: Mapping) -> tuple[int, int] | None:
    """(min, max) pods an elastic job trains with, as the operator defaults them: a bound left out
    is the other one, both left out the workers' replicas; None for a job without `elasticPolicy`."""
    policy = spec.get("elasticPolicy")
    if not isinstance(policy, Mapping):
        return None
    least = int(policy["minReplicas"]) if policy.get("minReplicas") is not None else None
    most = int(policy["maxReplicas"]) if policy.get("maxReplicas") is not None else None
    if least is not None:
        return least, most if most is not None else least
    if most is not None:
        return most, most
    workers = int(((spec.get("pytorchReplicaSpecs") or {}).get(WORKER) or {}).get("replicas", 1))
    return workers, workers


def min_count(spec: Mapping) -> int:
    """Σ replicas, unless the job says fewer suffice: the gang's minAvailable, else its elastic minimum."""
    available = ((spec.get("runPolicy") or {}).get("schedulingPolicy") or {}).get("minAvailable")
    if available:
        return int(available)
    bounds = elastic_bounds(spec)
    return bounds[0] if bounds is not None else replicas(spec)


def max_count(spec: Mapping) -> int:
    """The pods the job runs at once at most: every replica, and no more than its elastic maximum."""
    bounds = elastic_bounds(spec)
    return replicas(spec) if bounds is None else min(replicas(spec), bounds[1])


def declaration(job: Mapping) -> Declaration:
    spec = job.get("spec") or {}
    return {"sizes": {"": min_count(spec)}, "maxima": {"": max_count(spec)}, "suspend": SUSPENSION.state(job)}


# Replica types in rank order (the operator writes them lowercased): the master is rank 0.
_REPLICA_TYPE_ORDER = {"master": 0, "worker": 1}


def rank(labels: Mapping[str, str], annotations: Mapping[str, str]) -> Rank | None:
    """Replica type (Master, Worker, then any other), then replica index."""
    replica_index = index_of(labels.get(names.KUBEFLOW_REPLICA_INDEX_LABEL))
    replica_type = labels.get(names.KUBEFLOW_REPLICA_TYPE_LABEL)
    if replica_type is None or replica_index is None:
        return None
    return "", _REPLICA_TYPE_ORDER.get(replica_type.lower(), len(_REPLICA_TYPE_ORDER)), replica_index


INTEGRATION = Integration(
    sources=(names.SOURCE_PYTORCHJOB,), group_of=group_of, resource=RESOURCE, declaration=declaration,
    verbs=SUSPEND_VERBS, declarer=declared_by_owner, owns_pods=True, suspension=SUSPENSION, rank=rank,
)
