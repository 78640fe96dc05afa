"""KubeRay RayCluster (ray.io/v1): one gang per cluster, its head and the workers it cannot do
without (docs/design.md, "Group identity", rule 9).

A Ray cluster is a head pod and groups of workers; each group runs `replicas` pods per host count
(`numOfHosts`), kept between `minReplicas` and `maxReplicas`, and the Ray autoscaler moves
`replicas`. The RayCluster controller labels every pod with the cluster's name and node type and
makes the RayCluster its controlling owner, so the group is keyed by the cluster's name and UID.

The gang is what the cluster needs to be of use: the head and `minReplicas` of each worker group.
Workers beyond that (the autoscaler's, or a `replicas` above the minimum) are elastic: once the
gang is admitted the controller places them one at a time, as for any group's members beyond its
min count (controller/deciding/reconciler.py), so scaling up never waits for a whole second gang.
The most the cluster runs at once is what KubeRay keeps: the head and each group's `replicas`
held between its bounds (`max_count`); both bounds may change at any time, as the group's follow.

Rollback: a RayJob creates its RayCluster and owns it, and its `spec.suspend` deletes the cluster
(and its submitter) and creates a new one when cleared; suspending the cluster alone would leave
the RayJob waiting, by its deadlines, on a cluster it does not know to be suspended. Such a cluster
names the RayJob as its groups' switch (gangkeeper/integrations/rayjob.py says when that switch
may be used). A standalone RayCluster has its own `spec.suspend`: the RayCluster controller
deletes its pods and creates none until it is cleared. A cluster another owner controls (a
RayService, which rolls its clusters itself) has no switch: its pods are deleted, loudly, and
the RayCluster controller creates them again, gated.
"""

from collections.abc import Mapping

from gangkeeper import names
from gangkeeper.integrations import rayjob
from gangkeeper.integrations.finding import Classification, controlling_owner, found, labels_and_annotations
from gangkeeper.integrations.kind import (
    SUSPEND_VERBS,
    Declaration,
    Integration,
    Resource,
    Suspension,
    declared_by_owner,
)

RESOURCE = Resource(*names.RAYCLUSTER_API, names.RAYCLUSTER_KIND)
SUSPENSION = Suspension(("spec", "suspend"))
_NODE_TYPES = frozenset({names.RAY_HEAD, names.RAY_WORKER})


def group_of(pod: Mapping) -> Classification | None:
    """The RayCluster controlling a head or worker pod, by name and UID: a re-created cluster is another group."""
    labels, _ = labels_and_annotations(pod)
    node_type = labels.get(names.RAY_NODE_TYPE_LABEL)
    owner = controlling_owner(pod, names.RAYCLUSTER_KIND)
    if not labels.get(names.RAY_CLUSTER_LABEL) or node_type not in _NODE_TYPES or owner is None or not owner.get("uid"):
        return None
    role = "its head" if node_type == names.RAY_HEAD else f"a worker of {labels.get(names.RAY_GROUP_LABEL, '?')}"
    return found(f"{owner['name']}-{owner['uid']}", names.SOURCE_RAYCLUSTER,
                 f"RayCluster {owner['name']} (uid {owner['uid']}), {role}")


def min_workers(group: Mapping) -> int:
    """Workers a group cannot do without: `minReplicas` (capped by `maxReplicas`) hosts of
    `numOfHosts` pods each; none while the group is suspended, as KubeRay then runs none."""
    if group.get("suspend") is True:
        return 0
    least = int(group.get("minReplicas") or 0)
    if group.get("maxReplicas") is not None:
        least = min(least, int(group["maxReplicas"]))
    return least * int(group.get("numOfHosts") or 1)


def desired_workers(group: Mapping) -> int:
    """Workers KubeRay keeps for a group (`GetWorkerGroupDesiredReplicas`): `replicas` held between
    `minReplicas` and `maxReplicas`, times `numOfHosts`; none while the group is suspended."""
    if group.get("suspend") is True:
        return 0
    least, most, replicas = int(group.get("minReplicas") or 0), group.get("maxReplicas"), group.get("replicas")
    if replicas is None or int(replicas) < least:
        kept = least
    elif most is not None and int(replicas) > int(most):
        kept = int(most)
    else:
        kept = int(replicas)
    return kept * int(group.get("numOfHosts") or 1)


def _worker_groups(spec: Mapping) -> list[Mapping]:
    return [group for group in spec.get("workerGroupSpecs") or () if isinstance(group, Mapping)]


def size(spec: Mapping) -> int:
    """The head and each worker group's minimum."""
    return 1 + sum(min_workers(group) for group in _worker_groups(spec))


def max_count(spec: Mapping) -> int:
    """The head and the workers KubeRay keeps: the most pods the cluster runs at once."""
    return 1 + sum(desired_workers(group) for group in _worker_groups(spec))


def declaration(cluster: Mapping) -> Declaration:
    """Its size, the most it runs, and its switch: a RayJob's cluster is suspended through the
    RayJob, a standalone one through its own `spec.suspend`, one another owner controls not at all."""
    spec = cluster.get("spec") or {}
    declared: Declaration = {"sizes": {"": size(spec)}, "maxima": {"": max_count(spec)}}
    switch = rayjob.switch_of(cluster)
    if switch is not None:
        declared["switch"] = switch
    if switch is not None or not _controlled(cluster):
        declared["suspend"] = SUSPENSION.state(cluster)
    return declared


def _controlled(obj: Mapping) -> bool:
    owners = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return any(isinstance(owner, Mapping) and owner.get("controller") for owner in owners)


INTEGRATION = Integration(
    sources=(names.SOURCE_RAYCLUSTER,), group_of=group_of, resource=RESOURCE, declaration=declaration,
    verbs=SUSPEND_VERBS, declarer=declared_by_owner, owns_pods=True, suspension=SUSPENSION,
)
