"""Kubeflow PyTorchJob (training-operator v1): one group per job (docs/design.md, "Group identity", rule 4).

The operator labels every pod with the job's name and makes the PyTorchJob its controlling
owner; the group is keyed by the job's name and UID. Its size is every replica of every role,
unless the job says fewer suffice: the gang's `minAvailable`, or an elastic job's `minReplicas`.
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


def min_count(spec: Mapping) -> int:
    """Σ replicas, unless the job says fewer suffice (gang minAvailable, or elastic minReplicas)."""
    run_policy = spec.get("runPolicy") or {}
    declared = ((run_policy.get("schedulingPolicy") or {}).get("minAvailable")
                or (spec.get("elasticPolicy") or {}).get("minReplicas"))
    if declared:
        return int(declared)
    return sum(int(replica.get("replicas", 1)) for replica in (spec.get("pytorchReplicaSpecs") or {}).values())


def declaration(job: Mapping) -> Declaration:
    return {"sizes": {"": min_count(job.get("spec") or {})}, "suspend": SUSPENSION.state(job)}


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
